package h1

import (
	"errors"
	"net"
	"syscall"
)

// rawPeer peeks at an idle connection's socket without blocking.
type rawPeer struct {
	rc   syscall.RawConn
	peek func(fd uintptr) bool // made once, so a check allocates nothing
	n    int
	err  error
	buf  [1]byte
}

func peerOf(nc net.Conn) rawPeer {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return rawPeer{}
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return rawPeer{}
	}
	return rawPeer{rc: rc}
}

// alive reports whether an idle connection is still open: a server that
// closed it (or sent anything unasked, which can only be an error or a
// TLS alert) has left something to read.
func (cn *conn) alive() bool {
	p := &cn.peer
	if p.rc == nil {
		return true
	}
	if p.peek == nil {
		p.peek = func(fd uintptr) bool {
			p.n, _, p.err = syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			return true
		}
	}
	if err := p.rc.Read(p.peek); err != nil {
		return false
	}
	return errors.Is(p.err, syscall.EAGAIN)
}
