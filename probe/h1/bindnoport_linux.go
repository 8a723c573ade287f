package h1

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// bindAddressNoPort leaves a connection's local port to connect(), as it
// is without a source address (IP_BIND_ADDRESS_NO_PORT). Bound to a source
// address first, the socket would take a port free towards every
// destination, and none still held by a closed connection in TIME_WAIT:
// a source address would then hold far fewer connections than the 28,000
// or so that one destination allows it, and a run right after another
// from the same address would fail to bind. Where the option is refused
// the connection is bound as before.
func bindAddressNoPort(_, _ string, c syscall.RawConn) error {
	return c.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
	})
}
