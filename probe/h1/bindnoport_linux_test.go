package h1

import (
	"context"
	"net"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// A connection from a source address leaves its port to connect()
// (IP_BIND_ADDRESS_NO_PORT), so that the address's ports are shared out
// per destination and ports in TIME_WAIT can be reused, as without a
// source address.
func TestSourceAddressPortIsChosenAtConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	d := Dialers([]net.IP{net.ParseIP("127.0.0.7")}, 0)[0]
	c, err := d.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ip := c.LocalAddr().(*net.TCPAddr).IP.String(); ip != "127.0.0.7" {
		t.Fatalf("the connection came from %s, not its source address", ip)
	}
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := raw.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT) }); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	if v != 1 {
		t.Error("the source address was bound with a port of its own (IP_BIND_ADDRESS_NO_PORT is not set)")
	}
}
