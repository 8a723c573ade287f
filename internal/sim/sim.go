// Package sim is a simulated OpenAI-compatible inference server. A queueing
// model stands in for the GPU: a fixed number of slots run requests, the
// rest wait in FIFO order, prefill takes time in proportion to the prompt,
// and the time between tokens grows mildly with the number of running
// requests. Past the slot count, TTFT climbs with the queue while ITL barely
// moves: the cliff tokenprobe exists to catch. Fault injection makes it
// misbehave on purpose.
package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Config is the simulated server's model.
type Config struct {
	Model string
	// Slots is how many requests run at once (the batch size).
	Slots int
	// MaxQueue rejects requests with 503 when this many already wait; 0
	// means an unbounded queue.
	MaxQueue int
	// PrefillBase + PrefillPerToken x input tokens is the time from getting
	// a slot to the first token.
	PrefillBase     time.Duration
	PrefillPerToken time.Duration
	// DecodeBase is the time between tokens with one running request; each
	// further running request adds DecodeSlowdown of it.
	DecodeBase     time.Duration
	DecodeSlowdown float64
	// Jitter is the relative standard deviation of each step's time.
	Jitter float64
	// DefaultMaxTokens is the answer length when a request sets no max_tokens.
	DefaultMaxTokens int
	// TokensPerChunk puts several tokens into one chunk, as servers with
	// speculative decoding or stream intervals do.
	TokensPerChunk int
	Seed           uint64
	Faults         Faults
	// Provider is whose error answers the faults give: "openai",
	// "azure", "anthropic" (Providers), or "" for the simulator's own.
	Provider string
	// RateLimit meters requests and tokens as a hosted API does, with
	// Provider's rate-limit headers on every answer.
	RateLimit RateLimit
	// Auth checks a cloud's sign-in (SigV4, OAuth2 tokens) on every
	// completion request.
	Auth Auth
	// Answers are known answers to the prompts they match (LoadAnswers);
	// other prompts get filler words.
	Answers []Answer
	// ReasoningTokens come before every streamed chat, Responses and
	// Messages answer, in each API's reasoning shape, for a reasoning
	// model's TTFT and time to first output token.
	ReasoningTokens int
	// Tracer, when set, exports a server span per request, a child of its
	// traceparent, as vLLM's --otlp-traces-endpoint does.
	Tracer trace.Tracer
	// EmbeddingDimensions is the length of every vector /v1/embeddings
	// answers with (default 384).
	EmbeddingDimensions int
	// Metrics are how the simulator's vLLM series count, where real
	// servers differ.
	Metrics MetricsHabits
	// Bench turns the model off for benchmarking the client: no slots, no
	// prefill, no jitter, no faults; every request streams its tokens
	// DecodeBase apart on a fixed schedule, and every content chunk starts
	// with "ts", its wall-clock send time in unix nanoseconds, so that the
	// client's timing error can be measured chunk by chunk. The simulator's
	// own cost per chunk is kept to a copy and a write.
	Bench bool
	// KeepAlive is how long a connection is kept idle before the
	// simulator closes it: DefaultKeepAlive when zero, never when
	// negative or in Bench mode.
	KeepAlive time.Duration
}

// DefaultKeepAlive is how long llama.cpp's server (measured, docs/
// REAL-SERVERS.md) and uvicorn, which vLLM and SGLang run on, keep an idle
// connection: a client's connections kept past it are found closed.
const DefaultKeepAlive = 5 * time.Second

// MetricsHabits imitate how some servers count, so that the reading of a
// server's own metrics is tested against each way.
type MetricsHabits struct {
	// Lazy creates each series at its first observation, as a labelled
	// histogram of Python's prometheus_client is (its family is on the
	// page as HELP and TYPE lines alone until then), instead of at start.
	Lazy bool
	// QueueOnlyWaited observes the queue time only of requests that found
	// every slot taken, instead of every request's (zero waits included).
	QueueOnlyWaited bool
}

// Faults are per-request probabilities in [0, 1].
type Faults struct {
	Error500   float64
	Error503   float64
	Error429   float64
	RetryAfter time.Duration
	// Error answers of a cause, in Config.Provider's shape: a key
	// refused, a quota spent, the provider overloaded, a content filter,
	// a prompt over the context, no such model.
	Auth, Quota, Overloaded, ContentFilter, ContextLength, ModelNotFound float64
	// Disconnect closes the connection in the middle of the stream.
	Disconnect float64
	// Stall pauses the stream for StallFor in the middle.
	Stall    float64
	StallFor time.Duration
	// Malformed sends a broken JSON chunk in the middle of the stream.
	Malformed float64
	// Wrong answers, answered in full at the usual speed: Empty streams
	// no content; Truncate stops after 3 tokens with finish_reason
	// length; Garbage answers words of no language; BadJSON cuts a JSON
	// answer (response_format) short. WrongModel names another model in
	// a WrongModelRate share of answers, as a gateway that falls back.
	Empty, Truncate, Garbage, BadJSON float64
	WrongModel                        string
	WrongModelRate                    float64
}

// Defaults fills the zero fields with a small model on a busy GPU: 10 ms
// between tokens, 0.1 ms of prefill per prompt token.
func (c Config) Defaults() Config {
	if c.Model == "" {
		c.Model = "tokenprobe-sim"
	}
	if c.Slots <= 0 {
		c.Slots = 4
	}
	if c.PrefillBase == 0 {
		c.PrefillBase = 5 * time.Millisecond
	}
	if c.PrefillPerToken == 0 {
		c.PrefillPerToken = 100 * time.Microsecond
	}
	if c.DecodeBase == 0 {
		c.DecodeBase = 10 * time.Millisecond
	}
	if c.DefaultMaxTokens <= 0 {
		c.DefaultMaxTokens = 128
	}
	if c.TokensPerChunk <= 0 {
		c.TokensPerChunk = 1
	}
	if c.EmbeddingDimensions <= 0 {
		c.EmbeddingDimensions = 384
	}
	if c.Faults.RetryAfter == 0 {
		c.Faults.RetryAfter = time.Second
	}
	if c.Faults.StallFor == 0 {
		c.Faults.StallFor = 5 * time.Second
	}
	return c
}

// Validate reports a configuration the model cannot run.
func (c Config) Validate() error {
	f := c.Faults
	for name, p := range map[string]float64{"error_500": f.Error500, "error_503": f.Error503, "error_429": f.Error429,
		"auth": f.Auth, "quota": f.Quota, "overloaded": f.Overloaded, "content_filter": f.ContentFilter,
		"context_length": f.ContextLength, "model_not_found": f.ModelNotFound,
		"disconnect": f.Disconnect, "stall": f.Stall, "malformed": f.Malformed,
		"empty": f.Empty, "truncate": f.Truncate, "garbage": f.Garbage, "bad_json": f.BadJSON, "wrong_model_rate": f.WrongModelRate} {
		if p < 0 || p > 1 {
			return fmt.Errorf("faults.%s: %v is not a probability in [0, 1]", name, p)
		}
	}
	if f.errorRates() > 1 {
		return errors.New("faults: the error answers' rates (error_500 to model_not_found) add up to more than 1")
	}
	if !validProvider(c.Provider) {
		return fmt.Errorf("provider %q: want one of openai, azure, anthropic, or none", c.Provider)
	}
	if f.Empty+f.Truncate+f.Garbage+f.BadJSON > 1 {
		return errors.New("faults: empty, truncate, garbage and bad_json add up to more than 1")
	}
	if f.WrongModelRate > 0 && f.WrongModel == "" {
		return errors.New("faults.wrong_model_rate needs faults.wrong_model: the model to answer with")
	}
	if c.RateLimit.Requests < 0 || c.RateLimit.Tokens < 0 || c.RateLimit.Window < 0 {
		return errors.New("rate_limit: requests, tokens and window must not be negative")
	}
	if c.Jitter < 0 || c.DecodeSlowdown < 0 {
		return errors.New("jitter and decode_slowdown must not be negative")
	}
	return nil
}

// Handler serves the simulated API.
type Handler struct {
	cfg   Config
	slots *slots
	seq   atomic.Uint64
	mux   *http.ServeMux
	sm    *serverMetrics
	// limiter meters requests and tokens (Config.RateLimit); nil without.
	limiter *limiter
	tokens  tokens

	// Counters for tests and the simulator's own /metrics.
	requests atomic.Uint64
	faults   atomic.Uint64
}

// NewHandler returns the simulator as an http.Handler.
func NewHandler(cfg Config) (*Handler, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, slots: newSlots(cfg.Slots), mux: http.NewServeMux()}
	if rl := cfg.RateLimit; rl.Requests > 0 || rl.Tokens > 0 {
		h.limiter = &limiter{cfg: rl}
	}
	h.sm = newServerMetrics(h)
	for _, api := range apis {
		for _, route := range api.routes {
			h.mux.HandleFunc("POST "+route, h.signedIn(func(w http.ResponseWriter, r *http.Request) { h.complete(w, r, api) }))
		}
	}
	if cfg.Auth.TokenLifetime > 0 {
		h.mux.HandleFunc("POST /token", h.token)
	}
	h.mux.HandleFunc("GET /v1/models", h.models)
	h.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	h.mux.Handle("GET /metrics", h.sm.handler())
	return h, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Config returns the configuration in force, defaults applied.
func (h *Handler) Config() Config { return h.cfg }

// Stats returns running and waiting requests, requests served, faults injected.
func (h *Handler) Stats() (running, waiting int, requests, faults uint64) {
	running, waiting = h.slots.load()
	return running, waiting, h.requests.Load(), h.faults.Load()
}

type request struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Prompt              json.RawMessage `json:"prompt"`
	MaxTokens           int             `json:"max_tokens"`
	MaxCompletionTokens int             `json:"max_completion_tokens"`
	// Input and MaxOutputTokens are the Responses API's.
	Input           json.RawMessage `json:"input"`
	MaxOutputTokens int             `json:"max_output_tokens"`
	Stream          bool            `json:"stream"`
	StreamOptions   *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// ResponseFormat asks for JSON (json_object or json_schema): the
	// answer is then a JSON object.
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	// The same asked for in the Responses API (text.format) and, as vLLM
	// reads it, the Messages API (output_config.format).
	Text         *format `json:"text"`
	OutputConfig *format `json:"output_config"`
	// Tools offered are answered with a call (tools.go).
	Tools      []tool          `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`

	// raw is the body, for an API's own fields (api.read); inputs an
	// embeddings request's count of inputs.
	raw    []byte
	inputs int
	// countTokens: the API's answers count their tokens when asked to
	// (KServe's return_num_output_tokens).
	countTokens bool
}

type format struct {
	Format *struct {
		Type string `json:"type"`
	} `json:"format"`
}

// wantsJSON reports whether the request asks for a JSON answer, in any
// API's words.
func (r *request) wantsJSON() bool {
	json := func(t string) bool { return t == "json_object" || t == "json_schema" }
	switch {
	case r.ResponseFormat != nil && json(r.ResponseFormat.Type):
		return true
	case r.Text != nil && r.Text.Format != nil && json(r.Text.Format.Type):
		return true
	}
	return r.OutputConfig != nil && r.OutputConfig.Format != nil && json(r.OutputConfig.Format.Type)
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// promptTokens approximates the tokenizer as tokenprobe's synthetic prompts
// are built: one whitespace-separated word is one token.
func (r *request) promptTokens() int {
	n := 0
	count := func(raw json.RawMessage) {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			n += countFields(s)
			return
		}
		var parts []struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(raw, &parts) == nil {
			for _, p := range parts {
				n += countFields(p.Text)
			}
		}
	}
	for _, m := range r.Messages {
		count(m.Content)
	}
	if len(r.Prompt) > 0 {
		count(r.Prompt)
	}
	return n
}

// countFields is len(strings.Fields(s)) without building the slice: a
// trace prompt of 20,000 words would allocate 320 KB only to be counted,
// and the simulator shares the benchmark machine with the client it
// serves.
func countFields(s string) int {
	n := 0
	for range strings.FieldsSeq(s) {
		n++
	}
	return n
}

func (h *Handler) complete(w http.ResponseWriter, r *http.Request, api *api) {
	h.requests.Add(1)
	chat := api.chat
	var req request
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		httpError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	req.raw = body
	if api.read != nil {
		if msg := api.read(&req, r); msg != "" {
			httpError(w, http.StatusBadRequest, msg)
			return
		}
	}
	if chat && len(req.Messages) == 0 || !chat && len(req.Prompt) == 0 {
		httpError(w, http.StatusBadRequest, "no messages or prompt")
		return
	}
	maxTokens := req.MaxTokens
	if req.MaxCompletionTokens > 0 {
		maxTokens = req.MaxCompletionTokens
	}
	if maxTokens <= 0 {
		maxTokens = h.cfg.DefaultMaxTokens
	}
	seq := h.seq.Add(1)
	if h.cfg.Bench {
		h.benchStream(r.Context(), w, chat, seq, maxTokens)
		return
	}
	rng := rand.New(rand.NewPCG(h.cfg.Seed, seq))
	plan := h.plan(rng, maxTokens)

	if plan.cause != causeNone {
		h.faults.Add(1)
		status, body, shaped := h.errorFor(plan.cause)
		if plan.cause == causeRateLimit {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(h.cfg.Faults.RetryAfter.Seconds()))))
		}
		if !shaped {
			httpError(w, status, "injected fault")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
		return
	}
	if h.limiter != nil {
		if ok, wait := h.limiter.admit(w.Header(), h.cfg.Provider, req.promptTokens()+maxTokens, time.Now()); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			status, body := h.providerError(h.cfg.Provider, causeRateLimit)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
			return
		}
	}
	if h.cfg.MaxQueue > 0 {
		if _, waiting := h.slots.load(); waiting >= h.cfg.MaxQueue {
			httpError(w, http.StatusServiceUnavailable, "queue full")
			return
		}
	}

	inTokens := req.promptTokens()
	ctx := r.Context()
	life := h.sm.arrive()
	if h.cfg.Tracer != nil {
		parent, id, model := traceContext(r), fmt.Sprintf("sim-%d", seq), req.Model
		life.span = func(l *lifecycle, end time.Time) { l.serverSpan(parent, h.cfg.Tracer, id, model, end) }
	}
	waited, err := h.slots.acquire(ctx)
	if err != nil {
		return // the client went away while queued
	}
	defer h.slots.release()
	life.schedule(inTokens, waited)
	defer life.finish(false) // a no-op after the answer's end was recorded

	prefill := h.cfg.PrefillBase + time.Duration(inTokens)*h.cfg.PrefillPerToken
	if !sleep(ctx, h.jitter(rng, prefill)) {
		return
	}
	model := req.Model
	if model == "" {
		model = h.cfg.Model
	}
	id := fmt.Sprintf("sim-%d", seq)
	answer := streamArgs{chat: chat, chunkTokens: h.cfg.TokensPerChunk, countTokens: req.countTokens, id: id, model: model, maxTokens: maxTokens, inTokens: inTokens, finish: "length",
		json: req.wantsJSON()}
	if words := req.known(h.cfg.Answers); words != nil {
		answer.known = words
		if len(words) <= maxTokens {
			answer.maxTokens, answer.finish = len(words), "stop"
		}
	}
	if name, args, ok := toolCall(req.Tools, req.ToolChoice); ok && chat {
		answer.tool = &toolAnswer{name: name, args: args}
		answer.json = false
		if n := answer.tool.tokens(); n <= maxTokens {
			answer.maxTokens, answer.finish = n, "tool_calls"
		}
	}
	plan.wrong(&answer, h.cfg.Faults.WrongModel)
	if plan.wrongModel || plan.answer != answerRight {
		h.faults.Add(1)
	}
	if api.vectors {
		life.tokens(1)
		life.finish(true)
		writeEmbeddings(w, answer, req.inputs, h.cfg.EmbeddingDimensions, plan.answer)
		return
	}
	if !req.Stream {
		life.tokens(1)
		for i := 1; i < answer.maxTokens; i++ {
			if !sleep(ctx, h.jitter(rng, h.decodeStep())) {
				return
			}
			life.tokens(1)
		}
		life.finish(true)
		text := ""
		if answer.maxTokens > 0 {
			text = answer.piece(0, answer.maxTokens)
		}
		api.whole(w, answer, text)
		return
	}
	answer.usage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	if api.thinks {
		answer.thinking = h.cfg.ReasoningTokens
	}
	h.stream(ctx, w, rng, plan, life, api, answer)
}

func (f Faults) errorRates() float64 {
	return f.Error500 + f.Error503 + f.Error429 + f.Auth + f.Quota + f.Overloaded + f.ContentFilter + f.ContextLength + f.ModelNotFound
}

// plan is what faults this request will meet, drawn up front.
type plan struct {
	cause      cause
	breakAt    int // token index of a mid-stream fault, -1 for none
	disconnect bool
	stall      bool
	malformed  bool
	answer     wrongAnswer
	wrongModel bool
}

// wrongAnswer is how an answer answered in full is wrong.
type wrongAnswer uint8

const (
	answerRight wrongAnswer = iota
	answerEmpty
	answerTruncated
	answerGarbage
	answerBadJSON
)

// wrong makes a's answer as wrong as p says.
func (p plan) wrong(a *streamArgs, model string) {
	if p.wrongModel {
		a.model = model
	}
	switch p.answer {
	case answerEmpty:
		a.maxTokens, a.finish = 0, "stop"
	case answerTruncated:
		a.maxTokens, a.finish = min(a.maxTokens, 3), "length"
	case answerGarbage:
		a.garbage = true
		if a.tool != nil {
			a.tool.name = "zq_" + a.tool.name // a function never offered
		}
	case answerBadJSON:
		if a.tool != nil {
			a.tool.args = a.tool.args[:len(a.tool.args)-1] // the closing brace lost
			a.maxTokens = min(a.maxTokens, a.tool.tokens())
			break
		}
		a.json, a.badJSON = true, true
	}
}

func (h *Handler) plan(rng *rand.Rand, maxTokens int) plan {
	f := h.cfg.Faults
	p := plan{breakAt: -1}
	if i := pick(rng.Float64(), f.Error500, f.Error503, f.Error429, f.Auth, f.Quota, f.Overloaded, f.ContentFilter, f.ContextLength, f.ModelNotFound); i >= 0 {
		p.cause = cause500 + cause(i)
		return p
	}
	switch pick(rng.Float64(), f.Disconnect, f.Stall, f.Malformed) {
	case 0:
		p.disconnect = true
	case 1:
		p.stall = true
	case 2:
		p.malformed = true
	}
	if p.disconnect || p.stall || p.malformed {
		p.breakAt = maxTokens / 2
	}
	if i := pick(rng.Float64(), f.Empty, f.Truncate, f.Garbage, f.BadJSON); i >= 0 {
		p.answer = wrongAnswer(i + 1)
	}
	p.wrongModel = rng.Float64() < f.WrongModelRate
	return p
}

// pick is the index of the probability u falls in, with ps laid end to
// end from 0, or -1 past their sum.
func pick(u float64, ps ...float64) int {
	sum := 0.0
	for i, p := range ps {
		if sum += p; u < sum {
			return i
		}
	}
	return -1
}

// decodeStep is the time between two tokens given the current batch.
func (h *Handler) decodeStep() time.Duration {
	running, _ := h.slots.load()
	if running < 1 {
		running = 1
	}
	return time.Duration(float64(h.cfg.DecodeBase) * (1 + h.cfg.DecodeSlowdown*float64(running-1)))
}

func (h *Handler) jitter(rng *rand.Rand, d time.Duration) time.Duration {
	if h.cfg.Jitter == 0 {
		return d
	}
	f := 1 + h.cfg.Jitter*rng.NormFloat64()
	return time.Duration(float64(d) * max(f, 0.1))
}

type streamArgs struct {
	// chat: a chat answer, not a completion (its object names).
	chat                bool
	id, model, finish   string
	maxTokens, inTokens int
	usage               bool
	// json answers a JSON object, badJSON cut short; garbage answers
	// words of no language.
	json, badJSON, garbage bool
	// tool, when set, is the answer: a call, its arguments streamed.
	tool *toolAnswer
	// known, when set, is the answer's words: a known answer.
	known []string
	// thinking is how many reasoning tokens come before the answer.
	thinking int
	// chunkTokens is how many tokens a streamed chunk holds; countTokens
	// asks each answer object to say how many it holds.
	chunkTokens int
	countTokens bool
}

// outTokens is the answer's tokens, its reasoning's included (as every
// API counts them).
func (a streamArgs) outTokens() int { return a.maxTokens + a.thinking }

// toolAnswer is a tool call answered, its arguments' tokens toolBytes
// bytes each.
type toolAnswer struct{ name, args string }

const toolBytes = 4

func (t *toolAnswer) tokens() int { return max((len(t.args)+toolBytes-1)/toolBytes, 1) }

// argsOf is the arguments' tokens [i, i+n).
func (t *toolAnswer) argsOf(i, n int) string {
	return t.args[min(i*toolBytes, len(t.args)):min((i+n)*toolBytes, len(t.args))]
}

// piece is the text of the answer's tokens [i, i+n).
func (a streamArgs) piece(i, n int) string {
	if a.tool != nil {
		return a.tool.argsOf(i, n)
	}
	t := words(i, n)
	if a.known != nil {
		t = " " + strings.Join(a.known[min(i, len(a.known)):min(i+n, len(a.known))], " ")
	}
	if a.garbage {
		t = garbled(i, n)
	}
	if a.json {
		if i == 0 {
			t = `{"answer":"` + t
		}
		if i+n >= a.maxTokens && !a.badJSON {
			t += `"}`
		}
	}
	return t
}

// garbled is n tokens of no language, from token i.
func garbled(i, n int) string {
	var b strings.Builder
	for k := range n {
		fmt.Fprintf(&b, " zq%xv", (i+k)*7919%4093)
	}
	return b.String()
}

func (h *Handler) stream(ctx context.Context, w http.ResponseWriter, rng *rand.Rand, p plan, life *lifecycle, api *api, a streamArgs) {
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, 0, 512)
	for i := range a.thinking {
		if i > 0 && !sleep(ctx, h.jitter(rng, h.decodeStep())) {
			return
		}
		buf = api.thinking(buf[:0], a, i, " hmm")
		life.tokens(1)
		if _, err := w.Write(buf); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
	}
	sent := 0
	for sent < a.maxTokens {
		if sent > 0 || a.thinking > 0 {
			if !sleep(ctx, h.jitter(rng, h.decodeStep()*time.Duration(h.cfg.TokensPerChunk))) {
				return
			}
		}
		if sent >= p.breakAt && p.breakAt >= 0 {
			p.breakAt = -1
			h.faults.Add(1)
			switch {
			case p.disconnect:
				hijackClose(w)
				return
			case p.stall:
				if !sleep(ctx, h.cfg.Faults.StallFor) {
					return
				}
			case p.malformed:
				_, _ = w.Write([]byte("data: {\"choices\":[{\"delta\":{\"content\":\n\n"))
			}
		}
		n := min(h.cfg.TokensPerChunk, a.maxTokens-sent)
		buf = api.text(buf[:0], a, sent, a.piece(sent, n))
		sent += n
		life.tokens(n)
		if _, err := w.Write(buf); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
	}
	buf = api.end(buf[:0], a)
	life.finish(true)
	_, _ = w.Write(buf)
	if fl != nil {
		fl.Flush()
	}
}

var vocabulary = strings.Fields("the of and to in is that for it as with was on be by at this from or an are not have but were which one all their there been has more")

// words returns n tokens of output text starting at token i.
func words(i, n int) string {
	var b strings.Builder
	for k := range n {
		b.WriteByte(' ')
		b.WriteString(vocabulary[(i+k)%len(vocabulary)])
	}
	return b.String()
}

func (h *Handler) models(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []any{
		map[string]any{"id": h.cfg.Model, "object": "model", "owned_by": "tokenprobe-sim"},
	}})
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "sim_error", "code": code}})
}

func hijackClose(w http.ResponseWriter) {
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

var timerPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// sleep waits d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := timerPool.Get().(*time.Timer)
	t.Reset(d)
	defer func() { t.Stop(); timerPool.Put(t) }()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
