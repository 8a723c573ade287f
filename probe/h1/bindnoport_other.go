//go:build !linux

package h1

import "syscall"

// bindAddressNoPort is Linux's IP_BIND_ADDRESS_NO_PORT; elsewhere a
// source address is bound with its port, as the system does it.
func bindAddressNoPort(_, _ string, _ syscall.RawConn) error { return nil }
