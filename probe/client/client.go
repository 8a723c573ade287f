// Package client sends one OpenAI-compatible request and measures it
// exactly as docs/METRICS.md defines: it stamps each content chunk the
// moment the SSE reader hands it over, before any other work, and classifies
// every way a request can end into one outcome and reason.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/redact"
	"github.com/tokenprobe/tokenprobe/probe/h1"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/ratelimit"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/sse"
)

// Options tune the transport.
type Options struct {
	// ConnectTimeout bounds dialling and the TLS handshake.
	ConnectTimeout time.Duration
	// MaxLineBytes bounds one SSE line (sse.DefaultMaxLineBytes if 0).
	MaxLineBytes int
	// MaxBodyBytes bounds one response body (64 MiB if 0).
	MaxBodyBytes int64
	// TLS configures HTTPS endpoints; nil uses the system roots.
	TLS *tls.Config
	// OnChunk, when set, sees every content chunk's data and the time it
	// was stamped, on the request's goroutine and before the next read.
	// It must be quick and must not keep data. The benchmark harness uses
	// it to compare each stamp with the time the server sent the chunk.
	OnChunk func(data []byte, at time.Time)
	// NetHTTP sends every request through net/http instead of tokenprobe's
	// own HTTP/1.1 client (probe/h1), for servers that only speak HTTP/2.
	// Requests through a proxy (HTTP_PROXY, HTTPS_PROXY) always take
	// net/http.
	NetHTTP bool
	// Secrets are taken out of every text a server sent before it reaches
	// a result's error (and so a log, a page, a record); nil takes out
	// nothing.
	Secrets *redact.Set
	// TraceSample is the share of requests whose traceparent says
	// sampled: those whose spans the probe exports. Every request
	// carries a traceparent, sampled or not, so a server can join it.
	TraceSample float64
	// SourceAddrs, when set, are the local addresses new connections
	// come from, in turn (h1.Options.SourceAddrs).
	SourceAddrs []net.IP
}

// Client measures requests. It is safe for concurrent use and is meant to
// be shared by every request to the same endpoint so connections are reused.
type Client struct {
	h1      *h1.Client
	http    *http.Client
	netHTTP bool
	maxLine int
	maxBody int64
	onChunk func([]byte, time.Time)
	secrets *redact.Set
	sample  float64
	readers sync.Pool

	mu      sync.RWMutex
	targets map[targetKey]*target
}

type targetKey struct {
	base, model string
	api         *openai.Protocol
	stream      bool
}

// target is where one base URL's requests for one API go (for one model,
// streamed or not, where the API's path names them), worked out once.
type target struct {
	url string
	h1  *h1.Target // nil: through net/http
}

// roundRobin dials with each dialer in turn.
func roundRobin(dialers []net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if len(dialers) == 1 {
		return dialers[0].DialContext
	}
	var next atomic.Uint64
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return dialers[(next.Add(1)-1)%uint64(len(dialers))].DialContext(ctx, network, addr)
	}
}

// New returns a Client with a transport sized for thousands of concurrent
// streams to one host.
func New(o Options) *Client {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 64 << 20
	}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         roundRobin(h1.Dialers(o.SourceAddrs, o.ConnectTimeout)),
		TLSClientConfig:     o.TLS,
		TLSHandshakeTimeout: o.ConnectTimeout,
		// Every in-flight stream holds a connection; keep as many idle so
		// the next request does not pay for a new one.
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 16384,
		IdleConnTimeout:     90 * time.Second,
		// Compression would make the transport buffer chunks before we
		// see them, and token streams barely compress.
		DisableCompression: true,
		ForceAttemptHTTP2:  true,
		ReadBufferSize:     4096,
		WriteBufferSize:    4096,
	}
	c := &Client{
		http: &http.Client{
			Transport: tr,
			// Redirects of a POST are a misconfigured base URL; report them.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		h1:      h1.New(h1.Options{ConnectTimeout: o.ConnectTimeout, TLS: o.TLS, Redact: o.Secrets.Excerpt, SourceAddrs: o.SourceAddrs}),
		netHTTP: o.NetHTTP,
		maxLine: o.MaxLineBytes,
		maxBody: o.MaxBodyBytes,
		onChunk: o.OnChunk,
		secrets: o.Secrets,
		sample:  o.TraceSample,
		targets: map[targetKey]*target{},
	}
	c.readers.New = func() any { return &streamReader{sse: *sse.NewReader(nil, c.maxLine)} }
	return c
}

// CloseIdle closes idle connections (at the end of a run).
func (c *Client) CloseIdle() {
	c.h1.CloseIdle()
	c.http.CloseIdleConnections()
}

// target returns where requests to base for api go.
func (c *Client) target(base string, api *openai.Protocol, model string, stream bool) (*target, error) {
	k := targetKey{base, model, api, stream}
	c.mu.RLock()
	t := c.targets[k]
	c.mu.RUnlock()
	if t != nil {
		return t, nil
	}
	t = &target{url: api.URL(base, model, stream)}
	u, err := url.Parse(t.url)
	if err != nil {
		return nil, err
	}
	if !c.netHTTP {
		if proxy, err := http.ProxyFromEnvironment(&http.Request{URL: u}); err == nil && proxy == nil {
			if t.h1, err = c.h1.Target(t.url); err != nil {
				return nil, err
			}
		}
	}
	c.mu.Lock()
	c.targets[k] = t
	c.mu.Unlock()
	return t, nil
}

// response is what Do reads of either client's response.
type response struct {
	status      int
	contentType []byte
	retryAfter  []byte
	encoding    []byte // Content-Encoding
	body        io.ReadCloser
	// retried: sent a second time, the kept connection of the first
	// attempt having been closed by the server.
	retried bool
	phases  h1.Phases
	// rateLimit is the rate-limit headers' reading, the response's own
	// copy (probe/h1's belongs to its connection); nil without any.
	rateLimit *ratelimit.Reading
}

var errRequestTimeout = errors.New("request timeout")

// call is a request's context and the end its endpoint's timeout sets
// (zero: none). Through probe/h1 the deadline is the connection's, set
// once a request, not a timer context: that costs a timer and two
// registrations with the run's context each request, a cost that shows
// at wide levels (docs/BENCHMARKS.md, how to read the figures).
// net/http's requests, and signing, still take a context with the
// deadline.
type call struct {
	ctx      context.Context
	deadline time.Time
}

// pastDeadline reports whether the request's deadline has passed.
func (q call) pastDeadline() bool { return !q.deadline.IsZero() && !time.Now().Before(q.deadline) }

// over reports whether the request was ended from outside what it read:
// its context cancelled, or its deadline passed. An error then is that
// end's, not the server's.
func (q call) over() bool { return q.ctx.Err() != nil || q.pastDeadline() }

// Do sends one request and fills r with its measurement. r.Scheduled must
// already be set; Do sets everything else it measures. Cancelling ctx marks
// the request cancelled (the workload's doing); the endpoint's Timeout marks
// it a timeout (the server's).
func (c *Client) Do(ctx context.Context, ep *Endpoint, p Prompt, r *result.Request) {
	api := openai.Of(ep.API)
	if api.Vectors {
		p.Stream = false // the API streams nothing
		r.Inputs = 1 + len(p.Inputs)
	}
	r.Streaming = p.Stream
	if !r.Trace.Valid() {
		r.Trace = result.NewTrace(c.sample)
	}
	base := ep.URL()
	r.Endpoint, r.Model, r.API, r.URL = ep.Name, ep.Model, string(ep.API), redact.URL(base)
	r.IntendedInputTokens = p.InputTokens
	r.CachePhase, r.CacheTriple, r.IdentityPrompt = p.CachePhase, p.CacheTriple, p.IdentityPrompt
	r.InputTokens, r.InputSource = p.InputTokens, result.SourceIntended

	if p.Body == nil {
		if err := Encode(ep, &p); err != nil {
			r.Start = time.Now()
			c.fail(r, result.ReasonRequest, err)
			return
		}
	}
	q := call{ctx: ctx}
	if ep.Timeout > 0 {
		q.deadline = time.Now().Add(ep.Timeout)
	}
	tg, err := c.target(base, api, ep.Model, p.Stream)
	if err != nil {
		r.Start = time.Now()
		c.fail(r, result.ReasonConnect, err)
		return
	}
	if !q.deadline.IsZero() && (tg.h1 == nil || ep.Signer != nil) {
		// net/http knows no deadline but its request's context's, and
		// signing may fetch credentials (a cloud's metadata service, a
		// token endpoint), which the deadline bounds too.
		var cancel context.CancelFunc
		q.ctx, cancel = context.WithDeadlineCause(ctx, q.deadline, errRequestTimeout)
		defer cancel()
	}
	r.Start = time.Now()
	var resp response
	if tg.h1 != nil {
		resp, err = c.sendH1(q, ep, tg, p, r)
	} else {
		resp, err = c.sendNetHTTP(q.ctx, ep, tg, p, r)
	}
	if err != nil {
		c.fail(r, c.classify(q, err), err)
		return
	}
	r.HTTPStatus, r.Retried, r.RateLimit = resp.status, resp.retried, resp.rateLimit
	ph := resp.phases
	r.DNS, r.Connect, r.TLS, r.Reused = ph.DNS, ph.Connect, ph.TLS, ph.Reused
	if !ph.FirstByte.IsZero() {
		r.FirstByte = ph.FirstByte.Sub(r.Start)
	}
	c.readBody(q, api, resp, r, p)
	if resp.status != 200 && r.Outcome == result.Success && r.Anomaly == result.AnomalyNone {
		r.Anomaly = result.AnomalyStatus
	}
	if c.closeBody(resp.body, tg.h1 == nil) {
		r.Anomaly = result.AnomalyDrain
	}
	if ep.Price != nil && r.Outcome == result.Success {
		// An answered request is billed, a wrong answer too (the checks
		// come later); a refused one is not.
		r.Cost, r.Currency = ep.Price.Cost(r.InputTokens, r.CachedInputTokens, r.OutputTokens), ep.Price.Currency
	}
}

// readBody reads and measures a response whose head has arrived.
func (c *Client) readBody(q call, api *openai.Protocol, resp response, r *result.Request, p Prompt) {
	switch {
	case resp.status < 200 || resp.status > 299:
		c.failStatus(q, r, resp)
		return
	case len(resp.encoding) > 0 && !strings.EqualFold(string(resp.encoding), "identity"):
		c.fail(r, result.ReasonStream, fmt.Errorf("the response is Content-Encoding %q, which tokenprobe does not decode: it asks for Accept-Encoding: identity, so a proxy in between is compressing", c.secrets.Excerpt(resp.encoding, 80)))
		return
	}
	switch {
	case !p.Stream:
		c.readWhole(q, api, &limitReader{r: resp.body, n: c.maxBody}, r, p)
	case !isEventStream(resp.contentType):
		c.fail(r, result.ReasonStream, fmt.Errorf("content type %q is not text/event-stream", c.secrets.Excerpt(resp.contentType, 80)))
		return
	default: // bounded to c.maxBody there; probe/h1's body is read in the connection's buffer
		c.readStream(q, api, resp.body, r, p)
	}
	if r.Outcome == result.Success && filtered(r.FinishReason) {
		// Answered, but a content policy cut the answer or refused the
		// prompt: not the answer asked for, and a cause of its own that
		// a wrong answer would hide. Its timing stays for debugging.
		r.Outcome, r.Reason = result.Error, result.ReasonContentFilter
		r.Err = "the answer ended with finish_reason " + r.FinishReason + ": the server's content policy stopped it"
	}
}

// filtered reports whether a finish reason says a content policy stopped
// the answer: OpenAI's and Azure's content_filter (the Chat Completions
// reference), Anthropic's stop_reason refusal (the Messages API reference).
func filtered(finish string) bool { return finish == "content_filter" || finish == "refusal" }

// closeBody ends a response body, reporting whether its rest did not come
// within h1.DrainTimeout. probe/h1's Body.Close drains and bounds itself.
// net/http reuses a connection only once its body has been read to the
// end, so its body is drained here, a little and within the same bound:
// the timer's Close ends a read that waits longer.
func (c *Client) closeBody(body io.ReadCloser, netHTTP bool) (drainTimedOut bool) {
	if !netHTTP {
		return errors.Is(body.Close(), h1.ErrDrainTimeout)
	}
	drainTimedOut = readBounded(io.Discard, body, 4096, h1.DrainTimeout)
	_ = body.Close()
	return drainTimedOut
}

var (
	contentJSON = "application/json"
	acceptSSE   = "text/event-stream"
)

// sendH1 sends p through tokenprobe's own HTTP/1.1 client.
func (c *Client) sendH1(q call, ep *Endpoint, tg *target, p Prompt, r *result.Request) (response, error) {
	header, bearer := ep.auth()
	if ep.Signer != nil {
		var err error
		if header, err = c.signed(q.ctx, ep, tg.url, header, p.Body); err != nil {
			return response{}, &signError{err}
		}
		bearer = ""
	}
	req := h1.Request{Target: tg.h1, Header: header, ContentType: contentJSON, BearerToken: bearer, Body: p.Body,
		RequestIDPrefix: result.RequestIDPrefix(), RequestID: r.ID, TraceID: r.Trace.TraceID, SpanID: r.Trace.SpanID, Sampled: r.Trace.Sampled,
		Deadline: q.deadline}
	if p.Stream {
		req.Accept = acceptSSE
	}
	resp, err := c.h1.Do(q.ctx, &req)
	if err != nil {
		return response{}, err
	}
	out := response{status: resp.StatusCode, contentType: resp.ContentType, retryAfter: resp.RetryAfter, encoding: resp.ContentEncoding, body: resp.Body,
		retried: resp.Retried, phases: resp.Phases}
	if resp.RateLimit != nil {
		rl := *resp.RateLimit
		out.rateLimit = &rl
	}
	return out, nil
}

// sendNetHTTP sends p through net/http.
func (c *Client) sendNetHTTP(ctx context.Context, ep *Endpoint, tg *target, p Prompt, r *result.Request) (response, error) {
	requestID := r.XRequestID()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tg.url, bytes.NewReader(p.Body))
	if err != nil {
		return response{}, err
	}
	header, bearer := ep.auth()
	if ep.Signer != nil {
		if header, err = c.signed(ctx, ep, tg.url, header, p.Body); err != nil {
			return response{}, &signError{err}
		}
		bearer = ""
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", contentJSON)
	// Ask for no content coding: this client decodes none (the
	// transport's own gzip is off, see New).
	req.Header.Set("Accept-Encoding", "identity")
	if p.Stream {
		req.Header.Set("Accept", acceptSSE)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if requestID != "" {
		req.Header.Set("X-Request-Id", requestID)
	}
	var tp [result.TraceParentLen]byte
	req.Header.Set("Traceparent", string(r.Trace.AppendTraceParent(tp[:0])))
	// Some servers close every connection after a response while
	// advertising keep-alive. An empty idempotency key (never sent on the
	// wire) lets the transport retry a request that failed on such a
	// reused connection before any response, instead of reporting an error
	// the server did not make.
	req.Header["X-Idempotency-Key"] = nil
	conns := 0 // more than one: the transport sent the request again
	// The transport may call these from its dialing goroutines, several
	// at once for Happy Eyeballs: under a lock.
	var (
		mu                   sync.Mutex
		ph                   h1.Phases
		dnsAt, connAt, tlsAt time.Time
	)
	at := func(f func()) { mu.Lock(); f(); mu.Unlock() }
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GetConn:              func(string) { at(func() { conns++ }) },
		GotConn:              func(info httptrace.GotConnInfo) { at(func() { ph.Reused = info.Reused }) },
		DNSStart:             func(httptrace.DNSStartInfo) { at(func() { dnsAt = time.Now() }) },
		DNSDone:              func(httptrace.DNSDoneInfo) { at(func() { ph.DNS = time.Since(dnsAt) }) },
		ConnectStart:         func(string, string) { at(func() { connAt = time.Now() }) },
		ConnectDone:          func(string, string, error) { at(func() { ph.Connect = time.Since(connAt) }) },
		TLSHandshakeStart:    func() { at(func() { tlsAt = time.Now() }) },
		TLSHandshakeDone:     func(tls.ConnectionState, error) { at(func() { ph.TLS = time.Since(tlsAt) }) },
		GotFirstResponseByte: func() { at(func() { ph.FirstByte = time.Now() }) },
	}))
	resp, err := c.http.Do(req)
	if err != nil {
		return response{}, err
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// What follows is no HTTP response: refused here, as probe/h1
		// refuses it, and the connection closed with the body.
		_ = resp.Body.Close()
		return response{}, h1.ErrSwitchingProtocols
	}
	mu.Lock()
	got, sends := ph, conns
	mu.Unlock()
	out := response{status: resp.StatusCode, contentType: []byte(resp.Header.Get("Content-Type")),
		retryAfter: []byte(resp.Header.Get("Retry-After")), encoding: []byte(resp.Header.Get("Content-Encoding")), body: resp.Body,
		retried: sends > 1, phases: got}
	var rl ratelimit.Reading
	for name, vs := range resp.Header {
		if len(vs) > 0 {
			rl.Header([]byte(name), []byte(vs[0]))
		}
	}
	if rl.Any() {
		out.rateLimit = &rl
	}
	return out, nil
}
