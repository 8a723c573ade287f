// Package h1 is a small HTTP/1.1 client made for measuring streamed
// responses. The request is written and the response read on the caller's
// goroutine, from buffers that belong to the connection or come from a pool,
// so that once a connection is open a request allocates almost nothing and
// a stream costs one goroutine.
//
// It exists because net/http's allocations and goroutines per request were
// the largest cost left in tokenprobe's measurements on a small machine
// (the history of docs/BENCHMARKS.md has the figures before and after).
//
// It does only what probing an inference server needs: one request at a
// time per connection, keep-alive, Content-Length, chunked and
// close-delimited bodies, TLS with ALPN "http/1.1". Proxies and HTTP/2 are
// left to net/http, which the caller keeps for them.
package h1

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/ratelimit"
)

// Options configure a Client. Zero values take the defaults named.
type Options struct {
	// ConnectTimeout bounds dialling and the TLS handshake (10s).
	ConnectTimeout time.Duration
	// IdleTimeout is how long an unused connection is kept (90s), with
	// or without traffic: a timer closes those past it while none is
	// used, so a daemon between runs holds no connection longer.
	IdleTimeout time.Duration
	// MaxIdlePerHost caps the connections kept for reuse per host (16384).
	MaxIdlePerHost int
	// ReadBufferSize is each connection's read buffer
	// (DefaultReadBufferSize). A response header line longer than it is
	// skipped, not an error, unless it is the status line.
	ReadBufferSize int
	// TLS configures https targets; nil uses the system roots.
	TLS *tls.Config
	// UserAgent is sent unless a request's headers name one ("tokenprobe").
	UserAgent string
	// Redact, when set, returns at most n bytes of b with every secret
	// taken out first; error messages quote what a server sent through it.
	Redact func(b []byte, n int) string
	// SourceAddrs, when set, are the local addresses new connections
	// come from, in turn: past about 28,000 connections to one address
	// and port, one source address runs out of ephemeral ports.
	SourceAddrs []net.IP
}

// Client holds connections for reuse, per host. It is safe for concurrent
// use.
type Client struct {
	o       Options
	dialers []net.Dialer // one per source address, or one
	next    atomic.Uint64
	mu      sync.Mutex
	hosts   map[string]*host
	// wmu guards the watches of the contexts requests are under, and
	// each connection's place on them (conn.arm).
	wmu     sync.Mutex
	watches map[<-chan struct{}]*watch // by the context's Done
	spare   *watch                     // an ended watch, for the next context
}

// DefaultReadBufferSize is a connection's read buffer unless Options say
// otherwise. A token chunk is a few hundred bytes, and so are the header
// lines tokenprobe reads (a longer one is skipped); a longer SSE line is
// gathered apart (probe/sse). A probe holds thousands of streams, and
// each buffer of 4 KiB was a page of its own that the kernel's first copy
// into it faulted in: 1 KiB puts four on a page (docs/BENCHMARKS.md,
// issue 48's sixteenth round).
const DefaultReadBufferSize = 1024

// New returns a Client.
func New(o Options) *Client {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 90 * time.Second
	}
	if o.MaxIdlePerHost <= 0 {
		o.MaxIdlePerHost = 16384
	}
	if o.ReadBufferSize <= 0 {
		o.ReadBufferSize = DefaultReadBufferSize
	}
	if o.UserAgent == "" {
		o.UserAgent = "tokenprobe"
	}
	c := &Client{o: o, dialers: Dialers(o.SourceAddrs, 0), hosts: map[string]*host{}}
	return c
}

// Dialers are the dialers of connections from each source address in
// turn (one dialer from any address when there is none), with timeout
// (0: the caller's context bounds the dial).
func Dialers(sources []net.IP, timeout time.Duration) []net.Dialer {
	if len(sources) == 0 {
		return []net.Dialer{{Timeout: timeout, KeepAlive: 30 * time.Second}}
	}
	out := make([]net.Dialer, len(sources))
	for i, ip := range sources {
		out[i] = net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, LocalAddr: &net.TCPAddr{IP: ip}, Control: bindAddressNoPort}
	}
	return out
}

// dialer is the next connection's dialer: the source addresses in turn.
func (c *Client) dialer() *net.Dialer {
	if len(c.dialers) == 1 {
		return &c.dialers[0]
	}
	return &c.dialers[(c.next.Add(1)-1)%uint64(len(c.dialers))]
}

// Target is one URL to send requests to, parsed once.
type Target struct {
	h *host
	// path is the request target: the escaped path and the query.
	path string
	// hostHeader is the Host header.
	hostHeader string
	// basicAuth is the Authorization header's value for user:password in
	// the URL, or empty.
	basicAuth string
}

// Target parses rawURL (http or https) for use with Do.
func (c *Client) Target(rawURL string) (*Target, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	var port string
	switch u.Scheme {
	case "http":
		port = "80"
	case "https":
		port = "443"
	default:
		return nil, fmt.Errorf("unsupported scheme %q in %s", u.Scheme, rawURL)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("no host in %s", rawURL)
	}
	hostname := u.Hostname()
	if p := u.Port(); p != "" {
		port = p
	}
	addr := net.JoinHostPort(hostname, port)
	t := &Target{path: u.EscapedPath(), hostHeader: u.Host}
	if t.path == "" {
		t.path = "/"
	}
	if u.RawQuery != "" {
		t.path += "?" + u.RawQuery
	}
	if u.User != nil {
		pw, _ := u.User.Password()
		t.basicAuth = "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pw))
	}
	key := u.Scheme + "://" + addr
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.hosts[key]
	if h == nil {
		h = &host{c: c, addr: addr}
		if u.Scheme == "https" {
			cfg := &tls.Config{}
			if c.o.TLS != nil {
				cfg = c.o.TLS.Clone()
			}
			if cfg.ServerName == "" {
				cfg.ServerName = hostname
			}
			// Only HTTP/1.1 is spoken here; a server that insists on
			// HTTP/2 fails the handshake and is reported as such.
			cfg.NextProtos = []string{"http/1.1"}
			h.tls = cfg
		}
		c.hosts[key] = h
	}
	t.h = h
	return t, nil
}

// CloseIdle closes every connection kept for reuse.
func (c *Client) CloseIdle() {
	c.mu.Lock()
	hosts := make([]*host, 0, len(c.hosts))
	for _, h := range c.hosts {
		hosts = append(hosts, h)
	}
	c.mu.Unlock()
	for _, h := range hosts {
		h.closeIdle()
	}
}

// host is the connections kept for one scheme, host and port.
type host struct {
	c    *Client
	addr string
	tls  *tls.Config // nil for plain http

	mu   sync.Mutex
	idle []*conn // most recently used last
	// closedInARow counts the kept connections in a row that the server
	// had closed when they were next used; from closesAfterEach on, the
	// server is taken to close every connection after its response and
	// none is kept until noReuseUntil, when keeping is tried again (a
	// restarted server may keep them).
	closedInARow int
	noReuseUntil time.Time
	// reaper closes connections idle past the timeout when no request
	// comes to find them; it is armed while any is kept.
	reaper      *time.Timer
	reaperArmed bool
}

// closesAfterEach is how many kept connections in a row found closed make
// a server one that closes after every response; recheckReuse how long
// its connections are then not kept. Only a connection found closed
// within closedSoon of its response counts: llama.cpp's server closes a
// streamed answer's connection 0.1 ms after its last chunk, while the
// servers that keep connections close them idle past a timeout, 5 s the
// shortest met (uvicorn's, which vLLM and SGLang run on; llama.cpp's
// for answers not streamed). A connection found closed past a timeout
// says nothing of the next one: counted, every run of a daemon that
// comes back after the timeout would stop keeping connections for
// recheckReuse, its requests each paying a connection's setup.
const (
	closesAfterEach = 3
	recheckReuse    = 5 * time.Minute
	closedSoon      = time.Second
)

// reuseFailed notes a kept connection found closed by the server, idle
// having passed since its last response.
func (h *host) reuseFailed(idle time.Duration) {
	if idle >= closedSoon {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closedInARow++
	if h.closedInARow >= closesAfterEach {
		h.noReuseUntil = time.Now().Add(recheckReuse)
		h.closedInARow = 0
	}
}

// reuseWorked notes a kept connection that carried a request.
func (h *host) reuseWorked() {
	h.mu.Lock()
	h.closedInARow = 0
	h.mu.Unlock()
}

// get returns an idle connection that still looks open and how long it
// was kept, or nil. (The time is returned, not kept in the connection: 8
// bytes more took a conn from the 768-byte size class to the 896.)
func (h *host) get() (*conn, time.Duration) {
	now := time.Now()
	for {
		h.mu.Lock()
		n := len(h.idle)
		if n == 0 {
			h.mu.Unlock()
			return nil, 0
		}
		cn := h.idle[n-1]
		h.idle[n-1] = nil
		h.idle = h.idle[:n-1]
		h.mu.Unlock()
		idle := now.Sub(cn.idleSince)
		if idle >= h.c.o.IdleTimeout {
			cn.close()
			continue
		}
		if cn.alive() {
			return cn, idle
		}
		h.reuseFailed(idle)
		cn.close()
	}
}

// put keeps cn for reuse; the reaper lets go of it once it has been idle
// too long (the newest are reused first, so stale ones sink to the front).
func (h *host) put(cn *conn) {
	// An idle connection keeps no request's deadline: alive's look at
	// the socket, a read, would fail past it and the connection would be
	// thrown away.
	cn.setDeadline(time.Time{})
	cn.idleSince = time.Now()
	h.mu.Lock()
	if len(h.idle) >= h.c.o.MaxIdlePerHost || cn.idleSince.Before(h.noReuseUntil) {
		h.mu.Unlock()
		cn.close()
		return
	}
	h.idle = append(h.idle, cn)
	if !h.reaperArmed {
		h.reaperArmed = true
		if h.reaper == nil {
			h.reaper = time.AfterFunc(h.c.o.IdleTimeout, h.reap)
		} else {
			h.reaper.Reset(h.c.o.IdleTimeout)
		}
	}
	h.mu.Unlock()
}

// reap closes the connections idle past the timeout, the oldest first,
// and arms itself again for the oldest one left.
func (h *host) reap() {
	now := time.Now()
	h.mu.Lock()
	n := 0
	for n < len(h.idle) && now.Sub(h.idle[n].idleSince) >= h.c.o.IdleTimeout {
		n++
	}
	stale := slices.Clone(h.idle[:n])
	h.idle = slices.Delete(h.idle, 0, n) // clears the tail it leaves
	if len(h.idle) > 0 {
		h.reaper.Reset(h.idle[0].idleSince.Add(h.c.o.IdleTimeout).Sub(now))
	} else {
		h.reaperArmed = false
	}
	h.mu.Unlock()
	for _, cn := range stale {
		cn.close()
	}
}

func (h *host) closeIdle() {
	h.mu.Lock()
	idle := h.idle
	h.idle = nil
	h.mu.Unlock()
	for _, cn := range idle {
		cn.close()
	}
}

// Phases are where a request's time went before its answer: resolving
// the host, connecting, the TLS handshake (each zero on a reused
// connection), and when the response's first byte came.
type Phases struct {
	DNS, Connect, TLS time.Duration
	Reused            bool
	FirstByte         time.Time
}

// dial opens a new connection, within the connect timeout and by the
// request's deadline (none when zero), timing its phases: the name is
// resolved first (each address then tried in turn), so that the lookup
// is told apart from the connection.
func (h *host) dial(ctx context.Context, deadline time.Time, ph *Phases) (*conn, error) {
	end := time.Now().Add(h.c.o.ConnectTimeout)
	if !deadline.IsZero() && deadline.Before(end) {
		end = deadline
	}
	if d, ok := ctx.Deadline(); ok && d.Before(end) {
		end = d // connectCtx's deadline is never its parent's later one
	}
	start := time.Now()
	addrs := []string{h.addr}
	host, port, err := net.SplitHostPort(h.addr)
	lookup := err == nil && net.ParseIP(host) == nil
	if lookup || h.tls != nil || ctx.Done() == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, end)
		defer cancel()
	} else {
		ctx = connectCtx{ctx, end}
	}
	if lookup {
		ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
		}
		addrs = addrs[:0]
		for _, ip := range ips {
			addrs = append(addrs, net.JoinHostPort(ip.String(), port))
		}
		ph.DNS = time.Since(start)
	}
	began := time.Now()
	var nc net.Conn
	d := h.c.dialer()
	for _, a := range addrs {
		if nc, err = d.DialContext(ctx, "tcp", a); err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	ph.Connect = time.Since(began)
	if h.tls == nil {
		return newConn(h, nc, nc), nil
	}
	began = time.Now()
	tc := tls.Client(nc, h.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	ph.TLS = time.Since(began)
	return newConn(h, nc, tc), nil
}

// connectCtx is a context with an earlier deadline and nothing else of
// its own. Given it, net.Dialer bounds a connect by the socket's write
// deadline alone, where a context.WithDeadline child adds a timer and an
// entry in its parent's children to every dial (0.5% of the client's CPU
// per chunk at 25,000 streams: docs/BENCHMARKS.md, issue 48). It is only
// for a connect to an address: a name's lookup through the C library and
// the TLS handshake watch Done alone, and a connect takes its deadline
// only from a context whose Done is not nil.
type connectCtx struct {
	context.Context
	end time.Time
}

func (c connectCtx) Deadline() (time.Time, bool) { return c.end, true }

// Request is one request to send.
type Request struct {
	Target *Target
	Method string // POST if empty
	// Header is sent as it is, its keys in canonical form (as
	// http.Header.Set writes them). Host in it replaces the URL's host;
	// Content-Length, Transfer-Encoding and Connection in it are ignored.
	Header map[string][]string
	// ContentType, Accept and BearerToken, when set, are sent as the
	// Content-Type, Accept and "Authorization: Bearer" headers, in place
	// of those in Header.
	ContentType string
	Accept      string
	BearerToken string
	// RequestID, when not 0, is sent as X-Request-Id: RequestIDPrefix
	// and the number, in place of one in Header.
	RequestIDPrefix string
	RequestID       uint64
	// TraceID and SpanID, when the trace id is set, are sent as the
	// traceparent header (W3C trace context, version 00, the sampled flag
	// from Sampled), in place of one in Header.
	TraceID [16]byte
	SpanID  [8]byte
	Sampled bool
	Body    []byte
	// Deadline, when set, ends the request, the dial and the body's reads
	// included: past it they fail with a timeout (os.ErrDeadlineExceeded).
	// It is the connection's deadline, not a timer context of the
	// request's own: a context timer costs a timer and two registrations
	// with the caller's context each request (docs/BENCHMARKS.md, issue
	// 48's fifth round).
	Deadline time.Time
}

// Response is the head of a response and its body. It belongs to the
// connection: its fields are valid until Body.Close, which must be called.
type Response struct {
	StatusCode int
	// ContentType, RetryAfter and ContentEncoding are those headers'
	// values, or empty. The client asks for no content coding and decodes
	// none: a body with one is the caller's to refuse.
	ContentType     []byte
	RetryAfter      []byte
	ContentEncoding []byte
	// RateLimit is what the rate-limit headers said (probe/ratelimit), or
	// nil when there were none.
	RateLimit *ratelimit.Reading
	Body      *Body
	// Retried is set when the request was sent a second time, on a new
	// connection, because the kept one it was first sent on had been
	// closed by the server.
	Retried bool
	// Phases are the connection's and the head's times.
	Phases Phases
}

// ErrHeaderTooLarge is returned for a response head over 1 MiB.
var ErrHeaderTooLarge = errors.New("response header exceeds 1 MiB")

// ErrSwitchingProtocols is returned for a 101 answer, which no request of
// this client asks for.
var ErrSwitchingProtocols = errors.New("HTTP 101 Switching Protocols to a request that asked for no upgrade; connection closed")

// Do sends req and reads the response head. Cancelling ctx aborts the
// request at any point, the body's reads included; the error is then the
// connection's, and ctx says why. req.Deadline bounds it the same way.
// A request that fails on a reused
// connection before any byte of a response is sent again once on a new
// one: servers close idle connections while advertising keep-alive, and
// that is not an error of the request.
func (c *Client) Do(ctx context.Context, req *Request) (*Response, error) {
	if err := checkHeader(req.Header); err != nil {
		return nil, err
	}
	h := req.Target.h
	retried := false
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var cn *conn
		var idle time.Duration
		if attempt == 0 {
			cn, idle = h.get() // the retry dials: other idle ones may be closed too
		}
		reused := cn != nil
		var ph Phases
		if !reused {
			var err error
			if cn, err = h.dial(ctx, req.Deadline, &ph); err != nil {
				return nil, err
			}
		}
		ph.Reused = reused
		// The deadline before arm: a cancellation's past deadline, set by
		// arm's hook, must not be overwritten by the request's.
		cn.setDeadline(req.Deadline)
		cn.arm(ctx)
		err := cn.writeRequest(req)
		var gotBytes bool
		if err == nil {
			gotBytes, err = cn.readHead()
		}
		if err == nil {
			if reused {
				h.reuseWorked()
			}
			cn.resp.Retried = retried
			ph.FirstByte = cn.firstByte
			cn.resp.Phases = ph
			return &cn.resp, nil
		}
		cn.disarm()
		cn.close()
		if ctx.Err() == nil && reused && !gotBytes && attempt == 0 && retryable(err) {
			h.reuseFailed(idle)
			retried = true
			continue
		}
		return nil, err
	}
}

// retryable reports whether err on a reused connection, before any byte
// of a response, means the server had closed it.
func retryable(err error) bool { return !isTimeout(err) }

// checkHeader refuses header names and values that would break the
// request's framing.
func checkHeader(hdr map[string][]string) error {
	for k, vs := range hdr {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") {
			return fmt.Errorf("invalid header name %q", k)
		}
		for _, v := range vs {
			if strings.ContainsAny(v, "\r\n\x00") {
				return fmt.Errorf("invalid header value for %s", k)
			}
		}
	}
	return nil
}
