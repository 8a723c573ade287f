//go:build !linux

package sim

import (
	"errors"
	"net"
)

// ListenShared is Linux's SO_REUSEPORT listener; elsewhere it is refused.
func ListenShared(string) (net.Listener, error) {
	return nil, errors.New("a shared port (SO_REUSEPORT) is only supported on Linux here")
}
