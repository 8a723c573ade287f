package h1

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/ratelimit"
)

// conn is one connection and everything a request on it needs, reused
// from one request to the next.
type conn struct {
	h  *host
	nc net.Conn // the TCP connection, or TLS over it
	// br reads nc. It is the connection's own, not a pointer to another
	// object: a stream's chunk passes through it, and at wide levels each
	// separate object a chunk touches is a cold cache line and page of its
	// own (docs/BENCHMARKS.md, how to read the figures).
	br bufio.Reader
	// body is the response's body; beside br, as a chunk reads both.
	body Body
	// peer is the TCP connection's file descriptor access, for the
	// liveness check of an idle connection (nil where unsupported).
	peer      rawPeer
	idleSince time.Time
	// firstByte is when the current response's first byte came.
	firstByte time.Time

	// Cancelling the request's context sets a deadline in the past, which
	// ends any read or write in progress: w is the watch of that context
	// the connection is on (Client.arm), nil once the watch fired on it,
	// and wi its place there; both under Client.wmu. armed is the owner's
	// own.
	w     *watch
	wi    int
	armed bool
	// deadline is the one set (Request.Deadline), kept so that a
	// connection whose requests have none is not set each time.
	deadline time.Time

	resp Response
	// closeAfter is set when the response says the connection ends with it.
	closeAfter bool
	// ctype, retry and encoding hold the headers the caller reads.
	ctype, retry, encoding []byte
	// rl is what the rate-limit headers said (probe/ratelimit).
	rl ratelimit.Reading
}

// newConn wraps nc, which is raw or TLS over raw.
func newConn(h *host, raw, nc net.Conn) *conn {
	cn := &conn{h: h, nc: nc, br: *bufio.NewReaderSize(nc, h.c.o.ReadBufferSize)}
	cn.peer = peerOf(raw)
	cn.body.cn = cn
	cn.resp.Body = &cn.body
	return cn
}

var aLongTimeAgo = time.Unix(1, 0)

func (cn *conn) abort() { _ = cn.nc.SetDeadline(aLongTimeAgo) }

// setDeadline bounds the connection's reads and writes by a request's
// deadline, or lifts the bound (t zero).
func (cn *conn) setDeadline(t time.Time) {
	if t.IsZero() && cn.deadline.IsZero() {
		return
	}
	cn.deadline = t
	_ = cn.nc.SetDeadline(t)
}

// arm makes cancelling ctx abort the connection's reads and writes.
func (cn *conn) arm(ctx context.Context) {
	cn.armed = false
	if done := ctx.Done(); done != nil {
		cn.h.c.arm(ctx, done, cn)
		cn.armed = true
	}
}

// disarm undoes arm and reports whether the connection is still usable:
// false when the context fired and the connection's deadline is spent.
func (cn *conn) disarm() bool {
	if !cn.armed {
		return true
	}
	cn.armed = false
	return cn.h.c.disarm(cn)
}

// watch is one context's hook, shared by the connections whose requests
// are under that context: a probe's requests share their run's, and a
// context.AfterFunc of each request's own is an entry in that context's
// map of children, added and deleted under its lock once a request
// (docs/BENCHMARKS.md, how to read the figures). The watch lives while
// a connection is on it.
//
// Watches are keyed by the context's Done channel, not by the context:
// contexts that share the channel are cancelled together, and a channel
// is a map key whatever the context's type, where a context struct that
// holds a slice, or wraps one that does, panics a map lookup.
type watch struct {
	c      *Client
	done   <-chan struct{} // its key in Client.watches
	stop   func() bool
	fireFn func() // w.fire, made once
	conns  []*conn
}

// arm puts cn on the watch of ctx, whose Done is done, starting one if
// none is kept. The context's hook runs fire in a goroutine of its own,
// so registering and stopping it under wmu cannot deadlock.
func (c *Client) arm(ctx context.Context, done <-chan struct{}, cn *conn) {
	c.wmu.Lock()
	w := c.watches[done]
	if w == nil {
		if w = c.spare; w != nil {
			c.spare = nil
		} else {
			w = &watch{c: c}
			w.fireFn = w.fire
		}
		if c.watches == nil {
			c.watches = map[<-chan struct{}]*watch{}
		}
		w.done = done
		c.watches[done] = w
		w.stop = context.AfterFunc(ctx, w.fireFn)
	}
	cn.w, cn.wi = w, len(w.conns)
	w.conns = append(w.conns, cn)
	c.wmu.Unlock()
}

// disarm takes cn off its watch, ending the watch when cn was its last,
// and reports false when the watch had fired on cn.
func (c *Client) disarm(cn *conn) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	w := cn.w
	if w == nil {
		return false // the watch fired on cn
	}
	last := len(w.conns) - 1
	moved := w.conns[last]
	w.conns[cn.wi], moved.wi = moved, cn.wi
	w.conns[last] = nil
	w.conns = w.conns[:last]
	cn.w = nil
	if last == 0 {
		delete(c.watches, w.done)
		// When stop says the hook has run or is running, fire finds w
		// empty and out of the map; otherwise w serves the next context,
		// so that one request after another allocates no watch.
		if w.stop() && c.spare == nil {
			w.done, w.stop = nil, nil
			if cap(w.conns) > 64 {
				w.conns = nil // what a wide run left
			}
			c.spare = w
		}
	}
	return true
}

// fire aborts every connection on w: its context is done.
func (w *watch) fire() {
	c := w.c
	c.wmu.Lock()
	if c.watches[w.done] == w {
		delete(c.watches, w.done)
	}
	conns := w.conns
	w.conns = nil
	for _, cn := range conns {
		cn.w = nil
	}
	c.wmu.Unlock()
	for _, cn := range conns {
		cn.abort()
	}
}

func (cn *conn) close() { _ = cn.nc.Close() }

// writeBufs are request heads (and small bodies) being written; a
// connection needs one only while it writes.
var writeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// inlineBody is the largest body written in one piece with its head.
const inlineBody = 16 << 10

func (cn *conn) writeRequest(req *Request) error {
	bp := writeBufs.Get().(*[]byte)
	b := (*bp)[:0]
	method := req.Method
	if method == "" {
		method = "POST"
	}
	t := req.Target
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, t.path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	if hs := req.Header["Host"]; len(hs) > 0 {
		b = append(b, hs[0]...)
	} else {
		b = append(b, t.hostHeader...)
	}
	b = append(b, "\r\n"...)
	if _, ok := req.Header["User-Agent"]; !ok {
		b = appendHeader(b, "User-Agent", cn.h.c.o.UserAgent)
	}
	for k, vs := range req.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Accept-Encoding":
			continue // framing and coding are this client's
		case "Content-Type", "Accept", "Authorization", "X-Request-Id", "Traceparent":
			if req.ContentType != "" && k == "Content-Type" || req.Accept != "" && k == "Accept" ||
				(req.BearerToken != "" || t.basicAuth != "") && k == "Authorization" || req.RequestID != 0 && k == "X-Request-Id" ||
				req.TraceID != [16]byte{} && k == "Traceparent" {
				continue // the request's own fields win
			}
		}
		for _, v := range vs {
			b = appendHeader(b, k, v)
		}
	}
	if req.ContentType != "" {
		b = appendHeader(b, "Content-Type", req.ContentType)
	}
	if req.Accept != "" {
		b = appendHeader(b, "Accept", req.Accept)
	}
	switch {
	case req.BearerToken != "":
		b = append(b, "Authorization: Bearer "...)
		b = append(b, req.BearerToken...)
		b = append(b, "\r\n"...)
	case t.basicAuth != "":
		b = appendHeader(b, "Authorization", t.basicAuth)
	}
	if req.TraceID != [16]byte{} {
		b = append(b, "Traceparent: 00-"...)
		b = hex.AppendEncode(b, req.TraceID[:])
		b = append(b, '-')
		b = hex.AppendEncode(b, req.SpanID[:])
		if req.Sampled {
			b = append(b, "-01\r\n"...)
		} else {
			b = append(b, "-00\r\n"...)
		}
	}
	if req.RequestID != 0 {
		b = append(b, "X-Request-Id: "...)
		b = append(b, req.RequestIDPrefix...)
		b = strconv.AppendUint(b, req.RequestID, 10)
		b = append(b, "\r\n"...)
	}
	// This client decodes no content coding: ask for none, so that a
	// compressing proxy in between sends the stream as it is.
	b = append(b, "Accept-Encoding: identity\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(req.Body)), 10)
	b = append(b, "\r\n\r\n"...)
	var err error
	if len(req.Body) <= inlineBody {
		b = append(b, req.Body...)
		_, err = cn.nc.Write(b)
	} else if _, err = cn.nc.Write(b); err == nil {
		// Straight from the caller's buffer: a long prompt is not copied.
		_, err = cn.nc.Write(req.Body)
	}
	if cap(b) <= 2*inlineBody {
		*bp = b[:0]
		writeBufs.Put(bp)
	}
	return err
}

func appendHeader(b []byte, k, v string) []byte {
	b = append(b, k...)
	b = append(b, ": "...)
	b = append(b, v...)
	return append(b, "\r\n"...)
}

const maxHeadBytes = 1 << 20

// readHead reads the status line and headers and sets up the body.
// gotBytes says whether any byte of a response arrived, which decides
// whether a failed request may be sent again.
func (cn *conn) readHead() (gotBytes bool, err error) {
	budget := maxHeadBytes
	for {
		line, long, err := cn.readLine(&budget)
		if (len(line) > 0 || long) && !gotBytes {
			gotBytes = true
			cn.firstByte = time.Now()
		}
		if err != nil {
			if gotBytes && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return gotBytes, err
		}
		if long {
			return true, errors.New("malformed HTTP status line: too long")
		}
		minor, code, ok := parseStatusLine(line)
		if !ok {
			return true, fmt.Errorf("malformed HTTP status line %q", cn.excerpt(line))
		}
		if err := cn.readHeaders(&budget, minor, code); err != nil {
			return true, err
		}
		// 101 switches the connection to a protocol nobody asked for: what
		// follows is not HTTP/1.1, so the connection is closed (Do closes
		// it on any error). Other 1xx answers are interim, as RFC 9110
		// 15.2 requires of a client: the real one follows.
		if code == 101 {
			return true, ErrSwitchingProtocols
		}
		if code >= 100 && code < 200 {
			continue
		}
		return true, nil
	}
}

// parseStatusLine reads "HTTP/1.x NNN reason".
func parseStatusLine(line []byte) (minor, code int, ok bool) {
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, 0, false
	}
	if line[7] < '0' || line[7] > '9' {
		return 0, 0, false
	}
	for _, d := range line[9:12] {
		if d < '0' || d > '9' {
			return 0, 0, false
		}
		code = code*10 + int(d-'0')
	}
	if len(line) > 12 && line[12] != ' ' {
		return 0, 0, false
	}
	return int(line[7] - '0'), code, true
}

// readHeaders reads header lines up to the blank line and decides how the
// body is framed.
func (cn *conn) readHeaders(budget *int, minor, code int) error {
	cn.ctype, cn.retry, cn.encoding = cn.ctype[:0], cn.retry[:0], cn.encoding[:0]
	cn.rl = ratelimit.Reading{}
	var (
		length                   int64 = -1
		chunked, closes, keepAlv bool
	)
	for {
		line, long, err := cn.readLine(budget)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		if long {
			continue // a header this client does not read
		}
		if len(line) == 0 {
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return fmt.Errorf("malformed HTTP header line %q", cn.excerpt(line))
		}
		name, value := line[:colon], bytes.Trim(line[colon+1:], " \t")
		switch {
		case equalFold(name, "Content-Length"):
			n, ok := parseLength(value)
			if !ok || (length >= 0 && n != length) {
				return fmt.Errorf("bad Content-Length %q", cn.excerpt(value))
			}
			length = n
		case equalFold(name, "Transfer-Encoding"):
			if !equalFold(value, "chunked") {
				return fmt.Errorf("unsupported Transfer-Encoding %q", cn.excerpt(value))
			}
			chunked = true
		case equalFold(name, "Connection"):
			closes = closes || hasToken(value, "close")
			keepAlv = keepAlv || hasToken(value, "keep-alive")
		case equalFold(name, "Content-Type"):
			cn.ctype = append(cn.ctype[:0], value...)
		case equalFold(name, "Retry-After"):
			cn.retry = append(cn.retry[:0], value...)
		case equalFold(name, "Content-Encoding"):
			cn.encoding = append(cn.encoding[:0], value...)
		default:
			cn.rl.Header(name, value)
		}
	}
	cn.closeAfter = closes || (minor == 0 && !keepAlv)
	if minor == 0 {
		chunked = false // HTTP/1.0 has no transfer codings (RFC 9112 6.1)
	}
	cn.resp.StatusCode = code
	cn.resp.ContentType, cn.resp.RetryAfter, cn.resp.ContentEncoding = cn.ctype, cn.retry, cn.encoding
	cn.resp.RateLimit = nil
	if cn.rl.Any() {
		cn.resp.RateLimit = &cn.rl
	}
	b := &cn.body
	*b = Body{cn: cn}
	switch {
	case code == 204 || code == 304 || code < 200:
		b.mode, b.eof = modeNone, true
	case chunked:
		b.mode = modeChunked
	case length >= 0:
		b.mode, b.left = modeLength, length
		b.eof = length == 0
	default:
		b.mode = modeClose
		cn.closeAfter = true
	}
	return nil
}

// readLine returns one line without its line ending, from the read buffer.
// A line longer than the buffer is consumed and reported as long.
func (cn *conn) readLine(budget *int) (line []byte, long bool, err error) {
	line, err = cn.br.ReadSlice('\n')
	for err == bufio.ErrBufferFull { //nolint:errorlint // bufio's sentinel, never wrapped; this runs per line
		long = true
		if *budget -= len(line); *budget < 0 {
			return nil, true, ErrHeaderTooLarge
		}
		line, err = cn.br.ReadSlice('\n')
	}
	if *budget -= len(line); *budget < 0 {
		return nil, long, ErrHeaderTooLarge
	}
	if err != nil {
		return line, long, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, long, nil
}

// parseLength reads a decimal Content-Length, without the allocation of
// converting it to a string.
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, d := range v {
		if d < '0' || d > '9' {
			return 0, false
		}
		n = n*10 + int64(d-'0')
	}
	return n, true
}

func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c, d := b[i], s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// hasToken reports whether a comma-separated header value holds tok.
func hasToken(v []byte, tok string) bool {
	for len(v) > 0 {
		i := bytes.IndexByte(v, ',')
		item := v
		if i >= 0 {
			item, v = v[:i], v[i+1:]
		} else {
			v = nil
		}
		if equalFold(bytes.Trim(item, " \t"), tok) {
			return true
		}
	}
	return false
}

// excerpt is at most 80 bytes of what a server sent, for an error
// message: redacted first (Options.Redact), then cut, so that no part of a
// secret the server echoed survives at the edge.
func (cn *conn) excerpt(b []byte) string {
	if r := cn.h.c.o.Redact; r != nil {
		return r(b, 80)
	}
	return string(b[:min(len(b), 80)])
}
