package sim

import (
	"context"
	"net"
	"net/http"
	"time"
)

// Server is a simulator listening on a TCP address, in its own process
// (`tokenprobe sim`) or embedded in tokenprobe as the demo's endpoint.
type Server struct {
	*Handler
	srv *http.Server
	ln  net.Listener
}

// Start listens on addr ("127.0.0.1:0" picks a free port) and serves.
func Start(addr string, cfg Config) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return Serve(ln, cfg)
}

// Serve serves on ln, which it closes when the server closes (or when
// cfg is refused).
func Serve(ln net.Listener, cfg Config) (*Server, error) {
	h, err := NewHandler(cfg)
	if err != nil {
		ln.Close()
		return nil, err
	}
	s := &Server{Handler: h, ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idleTimeout(cfg)}}
	// Serve only returns when the listener closes; an embedding daemon
	// must not die with it, so the error goes nowhere.
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// idleTimeout is cfg's keep-alive as net/http's IdleTimeout, where zero
// (with no ReadTimeout) keeps a connection until the client closes it.
func idleTimeout(cfg Config) time.Duration {
	switch {
	case cfg.Bench || cfg.KeepAlive < 0:
		return 0
	case cfg.KeepAlive == 0:
		return DefaultKeepAlive
	}
	return cfg.KeepAlive
}

// URL is the OpenAI base URL of the server, ending in /v1.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() + "/v1" }

// Addr is the listening address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server, cutting streams still running.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		return s.srv.Close()
	}
	return nil
}
