package openai

import (
	"fmt"
	"io"
	"strings"
)

// API is the request shape an endpoint speaks, as the configuration
// names it (api, --endpoint-type).
type API string

// A Protocol is all that one API is to the probe, in one file of this
// package: where its requests go, how they are written (tools and
// structured output in its own shape, the key in its own header), how
// its stream and whole answers are read into a Chunk, how its answer
// reads back as text, and the names OpenTelemetry gives it. Nothing
// outside an API's file asks which API it is: it asks its Protocol.
type Protocol struct {
	API API
	// Operation and Provider are gen_ai.operation.name and
	// gen_ai.provider.name in OpenTelemetry's semantic conventions.
	Operation, Provider string
	// URL is where a request for model goes below base (which, as with
	// OpenAI's clients, normally ends in /v1), streamed or not.
	URL func(base, model string, stream bool) string
	// Root is the path a server's root takes to be this API's base:
	// aiperf's --url names the root (http://host:8000), and its endpoint
	// paths carry /v1 themselves.
	Root string
	// Body encodes a request. It writes the JSON itself rather than
	// through encoding/json's reflection: a body is encoded for every
	// request (docs/BENCHMARKS.md).
	Body func(b *RequestBody) ([]byte, error)
	// Event reads one streamed event's data into c, allocating nothing;
	// Whole a whole (not streamed) response body.
	Event, Whole func(data []byte, c *Chunk) error
	// Read, when set, reads a whole response as it arrives, in place of
	// Whole over the body read whole: an answer of data that is never
	// read as text (vectors) costs its window, not its size.
	Read func(r io.Reader, c *Chunk) error
	// Answer adds one kept chunk (or a whole response) to an answer read
	// back after the request, for the checks and the tokenizer.
	Answer func(raw []byte, a *answerBuilder)
	// KeyHeader is the header the API key goes in, with Headers set where
	// the endpoint's headers set none; empty: Authorization: Bearer.
	KeyHeader string
	Headers   [][2]string
	// Vectors: answered with vectors, never streamed; what comes back is
	// counted in vectors, not tokens, and is not timed per token.
	Vectors bool
	// EndsAtEOF: the stream has no end marker ([DONE], a finish reason,
	// a closing event); the body's end ends it.
	EndsAtEOF bool
	// CountsAdd: each streamed event's token counts are its own, added
	// up over the stream, where other APIs' are totals so far.
	CountsAdd bool
	// Greedy are the body fields that make the API decode greedily and
	// as reproducibly as it can (temperature 0, a seed where it takes
	// one), for a model-identity probe; nil: the API generates nothing
	// to compare.
	Greedy map[string]any
	// Logprobs are the body fields that ask for each generated token's
	// log-probability (the chosen token's alone), which Answer reads
	// back; nil: the API offers none (Anthropic's Messages), or tokenprobe
	// does not read them yet (OpenAI's Responses).
	Logprobs map[string]any
}

// protocols are the APIs, in the order the configuration lists them. A
// new API is one file defining its Protocol and one entry here.
var protocols = []*Protocol{chat, completions, responses, messages, embeddings, kserveGenerate}

// BaseOfRoot is the base URL of raw for this API where raw names a
// server's root, as aiperf's --url does: a URL without a path gets the
// API's Root (/v1), one with a path is the base as written, and one
// without a scheme is http://.
func (p *Protocol) BaseOfRoot(raw string) string {
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	scheme, rest, _ := strings.Cut(raw, "://")
	hostPath, query, hasQuery := strings.Cut(rest, "?")
	if i := strings.IndexByte(hostPath, '/'); i < 0 || strings.Trim(hostPath[i:], "/") == "" {
		host := strings.TrimSuffix(hostPath, "/")
		raw = scheme + "://" + host + p.Root
		if hasQuery {
			raw += "?" + query
		}
	}
	return raw
}

// APIs lists the APIs, as the configuration names them.
var APIs = func() []API {
	out := make([]API, len(protocols))
	for i, p := range protocols {
		out[i] = p.API
	}
	return out
}()

// Lookup is api's protocol, or nil for an API it does not know.
func Lookup(api API) *Protocol {
	for _, p := range protocols {
		if p.API == api {
			return p
		}
	}
	return nil
}

// Of is api's protocol, chat's for an API it does not know (a result
// read back from a record written by another version).
func Of(api API) *Protocol {
	if p := Lookup(api); p != nil {
		return p
	}
	return chat
}

// Body encodes b's request in its API's shape.
func Body(b RequestBody) ([]byte, error) {
	p := Lookup(b.API)
	if p == nil {
		return nil, fmt.Errorf("unknown API %q", b.API)
	}
	return p.Body(&b)
}

// below is base's path with path after it, base's query (Azure OpenAI's
// api-version) kept after that.
func below(base, path string) string {
	b, query, ok := strings.Cut(base, "?")
	u := strings.TrimSuffix(b, "/") + path
	if ok {
		u += "?" + query
	}
	return u
}

// at is a URL func for an API whose requests go to one path.
func at(path string) func(base, _ string, _ bool) string {
	return func(base, _ string, _ bool) string { return below(base, path) }
}

// reading is a scanner over data, c cleared for it. A reader is called
// on it directly, never passed as a function value: that would move the
// scanner to the heap, an allocation per event.
func reading(data []byte, c *Chunk) scanner {
	*c = Chunk{}
	return scanner{b: data}
}

// end is err, or ErrMalformed where data was not one object read whole:
// no object first (a reader skips a value it does not know), or anything
// but space after it.
func (s *scanner) end(err error) error {
	if err != nil {
		return err
	}
	start := scanner{b: s.b}
	s.ws()
	if start.peek() != '{' || s.i != len(s.b) {
		return ErrMalformed
	}
	return nil
}
