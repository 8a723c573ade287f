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
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/h1"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/sse"
)

// Endpoint is everything needed to reach one model server.
type Endpoint struct {
	Name    string
	BaseURL string // e.g. http://127.0.0.1:8000/v1
	// BaseURLs, when set, are replicas behind no load balancer, used in
	// turn; BaseURL is then ignored.
	BaseURLs []string
	next     atomic.Uint64
	API      openai.API
	Model    string
	Headers  http.Header
	APIKey   string // sent as a bearer token; never logged
	// Timeout bounds a whole request, first byte to last chunk.
	Timeout time.Duration
	// IncludeUsage asks streaming servers for a trailing usage chunk.
	IncludeUsage bool
	// Extra fields for the request body.
	Extra map[string]any
}

// URL returns the base URL of the next request: BaseURL, or the replicas
// round robin.
func (ep *Endpoint) URL() string {
	if len(ep.BaseURLs) == 0 {
		return ep.BaseURL
	}
	return ep.BaseURLs[(ep.next.Add(1)-1)%uint64(len(ep.BaseURLs))]
}

// Prompt is one request's input from the workload.
type Prompt struct {
	Text string
	// Parts, when set, is the prompt in pieces joined by single spaces, in
	// place of Text: a trace's shared blocks, encoded straight into the
	// body without first being copied into one long string.
	Parts []string
	// InputTokens is the intended prompt length in tokens.
	InputTokens int
	// MaxTokens caps the answer; 0 leaves it to the server.
	MaxTokens int
	Stream    bool
	// History is the conversation before Text, for a session's later turns.
	History []openai.Message
	// Body is the request body already encoded by Encode, or nil: a
	// load generator encodes ahead of the send time, so that the encoding
	// of a long prompt never makes a request late.
	Body []byte
}

// Encode fills p.Body for ep.
func Encode(ep *Endpoint, p *Prompt) error {
	body, err := openai.Body(openai.RequestBody{
		API: ep.API, Model: ep.Model, Prompt: p.Text, Parts: p.Parts, History: p.History, MaxTokens: p.MaxTokens,
		Stream: p.Stream, IncludeUsage: ep.IncludeUsage, Extra: ep.Extra,
	})
	p.Body = body
	return err
}

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
	readers sync.Pool

	mu      sync.RWMutex
	targets map[targetKey]*target
}

type targetKey struct {
	base string
	api  openai.API
}

// target is where one base URL's requests for one API go, worked out once.
type target struct {
	url string
	h1  *h1.Target // nil: through net/http
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
		DialContext:         (&net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext,
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
		h1:      h1.New(h1.Options{ConnectTimeout: o.ConnectTimeout, TLS: o.TLS}),
		netHTTP: o.NetHTTP,
		maxLine: o.MaxLineBytes,
		maxBody: o.MaxBodyBytes,
		onChunk: o.OnChunk,
		targets: map[targetKey]*target{},
	}
	c.readers.New = func() any { return sse.NewReader(nil, c.maxLine) }
	return c
}

// CloseIdle closes idle connections (at the end of a run).
func (c *Client) CloseIdle() {
	c.h1.CloseIdle()
	c.http.CloseIdleConnections()
}

// target returns where requests to base for api go.
func (c *Client) target(base string, api openai.API) (*target, error) {
	k := targetKey{base, api}
	c.mu.RLock()
	t := c.targets[k]
	c.mu.RUnlock()
	if t != nil {
		return t, nil
	}
	t = &target{url: strings.TrimSuffix(base, "/") + api.Path()}
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
	body        io.ReadCloser
}

var errRequestTimeout = errors.New("request timeout")

// Do sends one request and fills r with its measurement. r.Scheduled must
// already be set; Do sets everything else it measures. Cancelling ctx marks
// the request cancelled (the workload's doing); the endpoint's Timeout marks
// it a timeout (the server's).
func (c *Client) Do(ctx context.Context, ep *Endpoint, p Prompt, r *result.Request) {
	r.Streaming = p.Stream
	base := ep.URL()
	r.Endpoint, r.Model, r.API, r.URL = ep.Name, ep.Model, string(ep.API), base
	r.IntendedInputTokens = p.InputTokens
	r.InputTokens, r.InputSource = p.InputTokens, result.SourceIntended

	if p.Body == nil {
		if err := Encode(ep, &p); err != nil {
			r.Start = time.Now()
			c.fail(r, result.ReasonValidation, err)
			return
		}
	}
	if ep.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, ep.Timeout, errRequestTimeout)
		defer cancel()
	}
	tg, err := c.target(base, ep.API)
	if err != nil {
		r.Start = time.Now()
		c.fail(r, result.ReasonConnect, err)
		return
	}
	r.Start = time.Now()
	var resp response
	if tg.h1 != nil {
		resp, err = c.sendH1(ctx, ep, tg, p)
	} else {
		resp, err = c.sendNetHTTP(ctx, ep, tg, p)
	}
	if err != nil {
		c.fail(r, c.classify(ctx, err), err)
		return
	}
	defer resp.body.Close()
	r.HTTPStatus = resp.status
	if resp.status < 200 || resp.status > 299 {
		c.failStatus(r, resp)
		return
	}
	limited := &limitReader{r: resp.body, n: c.maxBody}
	if p.Stream {
		if ct := resp.contentType; !isEventStream(ct) {
			c.fail(r, result.ReasonStream, fmt.Errorf("content type %q is not text/event-stream", ct))
			return
		}
		c.readStream(ctx, limited, r, p)
	} else {
		c.readWhole(ctx, limited, r)
	}
	// net/http reuses a connection only once its body has been read to
	// the end: drain a little after a clean end. probe/h1's Body.Close
	// does this itself.
	if tg.h1 == nil {
		_, _ = io.CopyN(io.Discard, resp.body, 4096)
	}
}

var (
	contentJSON = "application/json"
	acceptSSE   = "text/event-stream"
)

// sendH1 sends p through tokenprobe's own HTTP/1.1 client.
func (c *Client) sendH1(ctx context.Context, ep *Endpoint, tg *target, p Prompt) (response, error) {
	req := h1.Request{Target: tg.h1, Header: ep.Headers, ContentType: contentJSON, BearerToken: ep.APIKey, Body: p.Body}
	if p.Stream {
		req.Accept = acceptSSE
	}
	resp, err := c.h1.Do(ctx, &req)
	if err != nil {
		return response{}, err
	}
	return response{status: resp.StatusCode, contentType: resp.ContentType, retryAfter: resp.RetryAfter, body: resp.Body}, nil
}

// sendNetHTTP sends p through net/http.
func (c *Client) sendNetHTTP(ctx context.Context, ep *Endpoint, tg *target, p Prompt) (response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tg.url, bytes.NewReader(p.Body))
	if err != nil {
		return response{}, err
	}
	for k, vs := range ep.Headers {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", contentJSON)
	if p.Stream {
		req.Header.Set("Accept", acceptSSE)
	}
	if ep.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+ep.APIKey)
	}
	// Some servers close every connection after a response while
	// advertising keep-alive. An empty idempotency key (never sent on the
	// wire) lets the transport retry a request that failed on such a
	// reused connection before any response, instead of reporting an error
	// the server did not make.
	req.Header["X-Idempotency-Key"] = nil
	resp, err := c.http.Do(req)
	if err != nil {
		return response{}, err
	}
	return response{status: resp.StatusCode, contentType: []byte(resp.Header.Get("Content-Type")),
		retryAfter: []byte(resp.Header.Get("Retry-After")), body: resp.Body}, nil
}

func (c *Client) readStream(ctx context.Context, body io.Reader, r *result.Request, p Prompt) {
	rd := c.readers.Get().(*sse.Reader)
	rd.Reset(body)
	defer func() { rd.Reset(nil); c.readers.Put(rd) }()

	if p.MaxTokens > 0 && cap(r.Gaps) == 0 {
		r.Gaps = make([]time.Duration, 0, min(p.MaxTokens, 8192))
	}
	var (
		chunk          openai.Chunk
		first, last    time.Time
		done, finished bool
		usage          openai.Chunk
	)
	for {
		ev, err := rd.Next()
		// Stamp before anything else: this is the moment the chunk reached us.
		now := time.Now()
		if err != nil {
			if err == io.EOF {
				break
			}
			c.endStream(ctx, r, first, last, err)
			return
		}
		if string(ev.Name) == "error" {
			c.endStream(ctx, r, first, last, fmt.Errorf("error event in stream: %.200s", ev.Data))
			return
		}
		if bytes.Equal(ev.Data, doneMarker) {
			done = true
			break
		}
		if perr := openai.ParseChunk(ev.Data, &chunk); perr != nil {
			c.endStream(ctx, r, first, last, fmt.Errorf("%w: %.200s", perr, ev.Data))
			return
		}
		if chunk.Error {
			c.endStream(ctx, r, first, last, fmt.Errorf("error in stream: %.200s", ev.Data))
			return
		}
		if chunk.Usage {
			usage = chunk
		}
		finished = finished || chunk.Finished
		if !chunk.Content && !chunk.Reasoning {
			continue
		}
		switch r.ContentChunks {
		case 0:
			first = now
			r.TTFT = now.Sub(r.Start)
		case 1:
			r.TTST = now.Sub(first)
			r.Gaps = append(r.Gaps, now.Sub(last))
		default:
			r.Gaps = append(r.Gaps, now.Sub(last))
		}
		if chunk.Content && !r.HasTTFO {
			r.TTFO, r.HasTTFO = now.Sub(r.Start), true
		}
		last = now
		r.ContentChunks++
		if c.onChunk != nil {
			c.onChunk(ev.Data, now)
		}
	}
	if !done && !finished {
		c.endStream(ctx, r, first, last, errors.New("stream ended without [DONE] or finish_reason"))
		return
	}
	c.tokens(r, usage)
	if r.ContentChunks == 0 {
		r.End = time.Now()
		r.Outcome, r.Reason, r.Err = result.Error, result.ReasonEmpty, "stream carried no content"
		return
	}
	r.End = last
	r.E2E = last.Sub(r.Start)
	r.Outcome = result.Success
}

var doneMarker = []byte("[DONE]")

// endStream classifies a stream that broke off. What was measured before
// the break stays in r for debugging, but the outcome is an error.
func (c *Client) endStream(ctx context.Context, r *result.Request, first, last time.Time, err error) {
	reason := result.ReasonStream
	if ctx.Err() != nil {
		reason = c.classify(ctx, err)
	}
	c.fail(r, reason, err)
	if r.ContentChunks > 0 {
		r.E2E = last.Sub(r.Start)
	}
}

func (c *Client) readWhole(ctx context.Context, body io.Reader, r *result.Request) {
	data, err := io.ReadAll(body)
	if err != nil {
		reason := result.ReasonStream
		if ctx.Err() != nil {
			reason = c.classify(ctx, err)
		}
		c.fail(r, reason, err)
		return
	}
	r.End = time.Now()
	var chunk openai.Chunk
	if err := openai.ParseChunk(data, &chunk); err != nil {
		c.fail(r, result.ReasonStream, fmt.Errorf("%w: %.200s", err, data))
		return
	}
	if chunk.Error {
		c.fail(r, result.ReasonStream, fmt.Errorf("error in response: %.200s", data))
		return
	}
	if !chunk.Content && !chunk.Reasoning {
		c.fail(r, result.ReasonEmpty, errors.New("response carried no content"))
		return
	}
	r.ContentChunks = 1
	c.tokens(r, chunk)
	r.E2E = r.End.Sub(r.Start)
	r.Outcome = result.Success
}

// tokens settles ISL and OSL from the server's usage when it sent one.
func (c *Client) tokens(r *result.Request, usage openai.Chunk) {
	if usage.Usage && usage.PromptTokens > 0 {
		r.InputTokens, r.InputSource = usage.PromptTokens, result.SourceUsage
	}
	if usage.Usage && usage.CompletionTokens > 0 {
		r.OutputTokens, r.OutputSource = usage.CompletionTokens, result.SourceUsage
	} else {
		r.OutputTokens, r.OutputSource = r.ContentChunks, result.SourceChunks
	}
}

func (c *Client) fail(r *result.Request, reason result.Reason, err error) {
	r.End = time.Now()
	r.Outcome, r.Reason = result.Error, reason
	if reason == result.ReasonNone {
		r.Outcome = result.Cancelled
	}
	if err != nil {
		r.Err = err.Error()
	}
}

func (c *Client) failStatus(r *result.Request, resp response) {
	snippet, _ := io.ReadAll(io.LimitReader(resp.body, 512))
	var reason result.Reason
	switch s := resp.status; {
	case s == http.StatusTooManyRequests:
		reason = result.ReasonHTTP429
	case s >= 500:
		reason = result.ReasonHTTP5xx
	default:
		reason = result.ReasonHTTP4xx
	}
	msg := fmt.Sprintf("HTTP %d: %s", resp.status, bytes.TrimSpace(snippet))
	if len(resp.retryAfter) > 0 {
		msg += " (Retry-After: " + string(resp.retryAfter) + ")"
	}
	c.fail(r, reason, errors.New(msg))
}

// classify maps a transport error to a reason. ReasonNone means the
// workload cancelled the request.
func (c *Client) classify(ctx context.Context, err error) result.Reason {
	if ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), errRequestTimeout) {
			return result.ReasonTimeout
		}
		return result.ReasonNone
	}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var tlsErr *tls.RecordHeaderError
	var certErr *tls.CertificateVerificationError
	var urlErr *url.Error
	switch {
	case errors.As(err, &dnsErr), errors.As(err, &tlsErr), errors.As(err, &certErr),
		errors.Is(err, syscall.ECONNREFUSED):
		return result.ReasonConnect
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return result.ReasonConnect
	case errors.As(err, &urlErr) && urlErr.Timeout():
		return result.ReasonTimeout
	case strings.Contains(err.Error(), "tls:"):
		return result.ReasonConnect
	}
	return result.ReasonStream
}

func isEventStream(ct []byte) bool {
	ct = bytes.TrimSpace(ct)
	if len(ct) == 0 {
		return true // some servers omit it; the stream itself will tell
	}
	const want = "text/event-stream"
	if len(ct) >= len(want) && bytes.EqualFold(ct[:len(want)], []byte(want)) &&
		(len(ct) == len(want) || ct[len(want)] == ';' || ct[len(want)] == ' ') {
		return true // the common case, without the allocations of a full parse
	}
	mt, _, err := mime.ParseMediaType(string(ct))
	return err == nil && mt == want
}

// limitReader bounds a response body and says so when the bound is hit,
// where io.LimitReader would end quietly and hide the cause.
type limitReader struct {
	r io.Reader
	n int64
}

var errBodyTooLarge = errors.New("response body exceeds the size limit")

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errBodyTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}
