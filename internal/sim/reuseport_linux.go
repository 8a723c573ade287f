package sim

import (
	"context"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// ListenShared listens on addr with SO_REUSEPORT: several simulator
// processes may listen on the same port, and the kernel spreads new
// connections over them. One process's open-file limit then no longer
// bounds how many streams one address serves (docs/SCALING.md).
func ListenShared(addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	return lc.Listen(context.Background(), "tcp", addr)
}
