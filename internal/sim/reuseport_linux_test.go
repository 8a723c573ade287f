package sim

import (
	"net"
	"net/http"
	"sync/atomic"
	"testing"
)

// Two simulators on one shared port both serve it: a plain listener
// could not bind the second, and the kernel spreads connections over the
// two, so between them they hold what neither process's open-file limit
// allows alone.
func TestSimulatorsShareAPort(t *testing.T) {
	first, err := ListenShared("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := first.Addr().String()
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Fatal("a plain listener bound a port already shared: the test cannot tell sharing from no sharing")
	}
	second, err := ListenShared(addr)
	if err != nil {
		t.Fatalf("a second simulator on the shared port: %v", err)
	}
	var counted [2]*countingListener
	for i, ln := range []net.Listener{first, second} {
		counted[i] = &countingListener{Listener: ln}
		s, err := Serve(counted[i], Config{Bench: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
	}
	// Each new connection (no keep-alive) is handed to one of the two;
	// over 64 of them both get some.
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	for range 64 {
		resp, err := (&http.Client{Transport: tr}).Get("http://" + addr + "/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("health: %s", resp.Status)
		}
	}
	for i, c := range counted {
		if c.n.Load() == 0 {
			t.Errorf("simulator %d accepted none of 64 connections", i)
		}
	}
}

type countingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}
