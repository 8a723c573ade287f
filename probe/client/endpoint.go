package client

import (
	"context"
	"maps"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/served"
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
	// Price, when set, gives every request its cost.
	Price *result.Price
	// Signer, when set, signs every request (a cloud's SigV4 signature,
	// an OAuth2 access token: probe/cloudauth), in place of the API key.
	Signer Signer
	// lastSecret is the signer's last credential added to the secrets.
	lastSecret atomic.Pointer[string]
	// Extra fields for the request body.
	Extra map[string]any

	wire     sync.Once
	wireHead http.Header
	bearer   string

	// Served is the model the endpoint's answers have named, learned by
	// the default model check: it lasts as long as the endpoint, across
	// runs and the reloads that keep the endpoint unchanged.
	Served served.Model

	// heldUntil is when the server's last Retry-After ends (unix nanos):
	// it asked every client to wait, so every run against the endpoint
	// does, not only the one that heard it.
	heldUntil atomic.Int64
}

// Signer gives a request the headers of a cloud's sign-in: it signs a
// POST of body to url carrying header. It may fetch credentials, within
// its own bound; an error fails the request as auth.
type Signer interface {
	Sign(ctx context.Context, url string, header http.Header, body []byte) (http.Header, error)
}

// signed is header with the signer's headers added, and no bearer. The
// credentials a server could echo back (an access token, a session
// token) join the secrets every error text is redacted of, as the
// endpoint's rotating ones: the last few are kept, not every one a token
// endpoint ever issued.
func (c *Client) signed(ctx context.Context, ep *Endpoint, url string, header http.Header, body []byte) (http.Header, error) {
	h := header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", contentJSON)
	add, err := ep.Signer.Sign(ctx, url, h, body)
	if err != nil {
		return nil, c.secrets.Error(err)
	}
	for k, v := range add {
		h[k] = v
	}
	secret := add.Get("X-Amz-Security-Token")
	if tok, ok := strings.CutPrefix(add.Get("Authorization"), "Bearer "); ok {
		secret = tok
	}
	if last := ep.lastSecret.Load(); c.secrets != nil && secret != "" && (last == nil || *last != secret) {
		c.secrets.AddRotating(ep.Name+"\x00"+ep.BaseURL, secret)
		ep.lastSecret.Store(&secret)
	}
	return h, nil
}

// auth is the headers every request carries and the bearer token, as the
// API wants them: the key in its own header where the API names one (the
// Messages API's x-api-key, with an anthropic-version), a bearer token
// elsewhere. Worked out once per endpoint.
func (ep *Endpoint) auth() (http.Header, string) {
	ep.wire.Do(func() {
		ep.wireHead, ep.bearer = ep.Headers, ep.APIKey
		api := openai.Of(ep.API)
		if api.KeyHeader == "" {
			return
		}
		h := ep.Headers.Clone()
		if h == nil {
			h = http.Header{}
		}
		if ep.APIKey != "" && h.Get(api.KeyHeader) == "" {
			h.Set(api.KeyHeader, ep.APIKey)
		}
		for _, kv := range api.Headers {
			if h.Get(kv[0]) == "" {
				h.Set(kv[0], kv[1])
			}
		}
		ep.wireHead, ep.bearer = h, ""
	})
	return ep.wireHead, ep.bearer
}

// Hold records that the server asked for no requests before until. A
// later hold never shortens an earlier one.
func (ep *Endpoint) Hold(until time.Time) {
	u := until.UnixNano()
	for {
		cur := ep.heldUntil.Load()
		if cur >= u || ep.heldUntil.CompareAndSwap(cur, u) {
			return
		}
	}
}

// HeldFor is how long from now the server still asks for no requests
// (0 or less: none asked).
func (ep *Endpoint) HeldFor(now time.Time) time.Duration {
	return time.Duration(ep.heldUntil.Load() - now.UnixNano())
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
	// Extra are body fields of this request's profile, merged over the
	// endpoint's.
	Extra map[string]any
	Text  string
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
	// CachePhase and CacheTriple are copied to the request's measurement
	// (result.Request): its place in a prefix-cache probe's triple.
	CachePhase  result.CachePhase
	CacheTriple int
	// IdentityPrompt is a model-identity probe's prompt, from 1.
	IdentityPrompt int
	// Inputs are an embeddings batch's inputs after Text.
	Inputs []string
	// KeepText keeps the answer's text (Request.Answer), for a tokenizer to
	// count its output tokens after the request is measured, and for the
	// answer checks. KeepLimit, when above 0, bounds the bytes kept: past
	// it the answer is cut (Request.AnswerCut), whole chunks kept.
	KeepText  bool
	KeepLimit int
	// Expect is what the answer to a known-answer prompt must match,
	// judged after the request (probe/check), never by the client.
	Expect *regexp.Regexp
	// Body is the request body already encoded by Encode, or nil: a
	// load generator encodes ahead of the send time, so that the encoding
	// of a long prompt never makes a request late.
	Body []byte
}

// Encode fills p.Body for ep.
func Encode(ep *Endpoint, p *Prompt) error {
	body, err := openai.Body(openai.RequestBody{
		API: ep.API, Model: ep.Model, Prompt: p.Text, Parts: p.Parts, History: p.History, Inputs: p.Inputs, MaxTokens: p.MaxTokens,
		Stream: p.Stream, IncludeUsage: ep.IncludeUsage, Extra: extra(ep.Extra, p.Extra),
	})
	p.Body = body
	return err
}

// extra is the endpoint's body fields with the profile's over them.
func extra(endpoint, profile map[string]any) map[string]any {
	if len(profile) == 0 {
		return endpoint
	}
	out := maps.Clone(endpoint)
	if out == nil {
		out = map[string]any{}
	}
	maps.Copy(out, profile)
	return out
}
