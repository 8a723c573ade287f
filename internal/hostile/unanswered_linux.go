package hostile

import (
	"errors"
	"net"
	"strconv"
	"syscall"
	"time"
)

// UnansweredAddr is a loopback address whose connects are never answered:
// a listener that is never accepted from, its queue full. Linux drops a
// SYN to a listener whose accept queue is full, so a connect to it waits
// as it would for a host that is down. Close releases the listener and
// the connections that filled its queue.
func UnansweredAddr() (addr string, closeAll func(), err error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", nil, err
	}
	var held []net.Conn
	closeAll = func() {
		for _, c := range held {
			c.Close()
		}
		_ = syscall.Close(fd)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		closeAll()
		return "", nil, err
	}
	// A backlog of 0 queues one connection.
	if err := syscall.Listen(fd, 0); err != nil {
		closeAll()
		return "", nil, err
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		closeAll()
		return "", nil, err
	}
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	// Fill the queue until a connect goes unanswered. A loopback connect
	// is answered by the kernel at once, but the dialling goroutine may
	// wait its turn on a busy machine, and a deadline past by then reads
	// as no answer: the wait is long enough not to mistake one for the
	// other.
	for range 16 {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return addr, closeAll, nil
			}
			closeAll()
			return "", nil, err
		}
		held = append(held, c)
	}
	closeAll()
	return "", nil, ErrAnswered
}
