// Package result is the one model of a measured request that every sink
// reads: the Prometheus and OTLP exporters, run summaries, JSONL records and
// the status page. Its fields mean exactly what docs/METRICS.md says.
package result

import (
	"time"

	"github.com/tokenprobe/tokenprobe/probe/ratelimit"
)

// CachePhase is a prefix-cache probe's request's place in its triple: the
// first use of a new prefix, the same prefix again at once, then another
// new prefix of the same length.
type CachePhase uint8

const (
	NoCache CachePhase = iota
	CacheCold
	CacheWarm
	CacheFresh
)

var cachePhaseNames = [...]string{"", "cold", "warm", "fresh"}

func (c CachePhase) String() string {
	if int(c) < len(cachePhaseNames) {
		return cachePhaseNames[c]
	}
	return ""
}

// ParseCachePhase is the phase String names (NoCache for any other text).
func ParseCachePhase(s string) CachePhase {
	for i, n := range cachePhaseNames {
		if n == s {
			return CachePhase(i)
		}
	}
	return NoCache
}

// Outcome is how a request ended (METRICS.md section 2).
type Outcome uint8

const (
	Success Outcome = iota
	Error
	Cancelled
	// WrongAnswer is a request answered in full whose answer failed a
	// check (the wrong model, an answer the profile's checks refuse): a
	// failed request with its timing kept.
	WrongAnswer
)

var outcomeNames = [...]string{Success: "success", Error: "error", Cancelled: "cancelled", WrongAnswer: "wrong_answer"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Outcomes lists every outcome, in the order used for labels and reports.
var Outcomes = []Outcome{Success, Error, Cancelled, WrongAnswer}

// Reason classifies an Error outcome: what an on-call engineer routes
// by (docs/MEASUREMENT.md, "Failure reasons"; docs/RUNBOOK.md says who
// acts on each). The set is closed so that it can be a metric label
// without growing the series count.
type Reason uint8

const (
	ReasonNone Reason = iota
	ReasonTimeout
	ReasonConnect
	// ReasonAuth: the key is missing, wrong or revoked (401, 403, an
	// authentication or permission error).
	ReasonAuth
	// ReasonRateLimit: requests or tokens over the rate limit (429).
	ReasonRateLimit
	// ReasonQuota: the account's quota, credit or spend limit is spent
	// (OpenAI's insufficient_quota, Anthropic's billing_error): waiting a
	// minute does not help.
	ReasonQuota
	// ReasonOverloaded: the provider or server sheds load it cannot
	// carry (Anthropic's 529 overloaded_error, a 503 that says so, TGI's
	// "overloaded").
	ReasonOverloaded
	// ReasonContentFilter: a content policy refused the prompt or cut
	// the answer (Azure's content_filter, finish_reason content_filter).
	ReasonContentFilter
	// ReasonContextLength: the prompt and max_tokens exceed the model's
	// context.
	ReasonContextLength
	// ReasonModelNotFound: no such model or deployment.
	ReasonModelNotFound
	// ReasonBadRequest: any other refusal of the request as sent (4xx,
	// redirects): a path, parameter or body the server does not take.
	ReasonBadRequest
	// ReasonServerError: any other 5xx.
	ReasonServerError
	ReasonStream
	ReasonEmpty
	// ReasonRequest: the request could not be built. An answer that
	// fails a check is not an error at all but a WrongAnswer.
	ReasonRequest
)

var reasonNames = [...]string{
	ReasonNone: "", ReasonTimeout: "timeout", ReasonConnect: "connect",
	ReasonAuth: "auth", ReasonRateLimit: "rate_limit", ReasonQuota: "quota", ReasonOverloaded: "overloaded",
	ReasonContentFilter: "content_filter", ReasonContextLength: "context_length", ReasonModelNotFound: "model_not_found",
	ReasonBadRequest: "bad_request", ReasonServerError: "server_error",
	ReasonStream: "stream", ReasonEmpty: "empty", ReasonRequest: "request",
}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

// Reasons lists every error reason, in label order.
var Reasons = []Reason{ReasonTimeout, ReasonConnect, ReasonAuth, ReasonRateLimit, ReasonQuota, ReasonOverloaded,
	ReasonContentFilter, ReasonContextLength, ReasonModelNotFound, ReasonBadRequest, ReasonServerError,
	ReasonStream, ReasonEmpty, ReasonRequest}

// legacyReasons are the names records written before the reasons were
// split by cause (tokenprobe 0.x) carry: read back as their nearest
// reason, so that merge and compare still read old run folders.
var legacyReasons = map[string]Reason{"http_4xx": ReasonBadRequest, "http_429": ReasonRateLimit, "http_5xx": ReasonServerError}

// ParseReason reads a reason's name as records and summaries write it,
// the names of older records included; ok is false for a name that is
// none.
func ParseReason(name string) (r Reason, ok bool) {
	for _, r := range Reasons {
		if r.String() == name {
			return r, true
		}
	}
	r, ok = legacyReasons[name]
	return r, ok
}

// Anomaly is something a server did wrong that did not change the
// request's outcome: the request was measured in full, but the server
// misbehaved after it, and an operator should see that. The set is closed
// so that it can be a metric label.
type Anomaly uint8

const (
	AnomalyNone Anomaly = iota
	// AnomalyDrain: the body did not end within the client's drain
	// timeout after the stream's end ([DONE]); the connection was closed
	// instead of kept.
	AnomalyDrain
	// AnomalyRetried: the server had closed the kept-alive connection the
	// request was first sent on, and it was sent again on a new one
	// (Request.Retried; counted beside the request's other anomaly).
	AnomalyRetried
	// AnomalyUsage: the server's token counts were absurd (a fraction, an
	// overflow, far more than max_tokens allows): the request's tokens
	// were counted from its chunks instead.
	AnomalyUsage
	// AnomalyStatus: the answer came whole with a 2xx status other than
	// 200 (HTTPStatus says which): Portkey's gateway answers 246 "Hooks
	// failed" when its guardrails failed without denying, the model's
	// answer unchanged. It is measured as any answer.
	AnomalyStatus
)

var anomalyNames = [...]string{AnomalyNone: "", AnomalyDrain: "drain", AnomalyRetried: "retried", AnomalyUsage: "usage", AnomalyStatus: "status"}

func (a Anomaly) String() string {
	if int(a) < len(anomalyNames) {
		return anomalyNames[a]
	}
	return "unknown"
}

// Anomalies lists every anomaly, in label order.
var Anomalies = []Anomaly{AnomalyDrain, AnomalyRetried, AnomalyUsage, AnomalyStatus}

// TokenSource says where a token count came from.
type TokenSource uint8

const (
	SourceNone      TokenSource = iota
	SourceUsage                 // the server's usage object
	SourceChunks                // counted content chunks (output only)
	SourceIntended              // what the workload meant to send (input only)
	SourceTokenizer             // the tokenizer's count of the answer's text (output only)
)

var sourceNames = [...]string{SourceNone: "none", SourceUsage: "usage", SourceChunks: "chunks", SourceIntended: "intended", SourceTokenizer: "tokenizer"}

func (s TokenSource) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return "unknown"
}

// Request is the measurement of one request. Durations are from one
// monotonic clock. A duration that is not defined for this request (TTST of
// a one-chunk answer, ITL with fewer than two tokens) is reported by the
// matching Has method, never as a zero that would pass an SLO.
type Request struct {
	ID uint64
	// Retried is set when the request was sent a second time, on a new
	// connection, because the server had closed the kept-alive connection
	// it was first sent on: its TTFT includes the first attempt.
	Retried bool
	// RunSeq is the number of the run the request belongs to, unique
	// among the runs of this process (probe.Run.Seq): what links its span
	// to the run's.
	RunSeq   uint64
	Profile  string
	Endpoint string
	Model    string
	// API is the endpoint's API (probe/openai: chat, completions,
	// responses, messages, embeddings, kserve_generate); URL the
	// endpoint's base URL. Sinks may describe the target with them; they
	// are never metric labels.
	API string
	URL string
	// Stage is the index of the plan's stage the request belongs to.
	Stage int
	// Level is the load level in force when the request was scheduled
	// (concurrency or rate of the current stage), for reading latency
	// against load.
	Level float64
	// Warmup requests are measured but excluded from summaries and exports.
	Warmup bool
	// Session and Turn place a request in a multi-turn session (Turn
	// counts from 0); Session is empty for single requests. Never labels.
	Session string
	Turn    int
	// CachePhase and CacheTriple place a request of a prefix-cache probe
	// in its triple (probe/workload.PrefixCache); CachePhase is NoCache
	// for every other request. Never labels.
	CachePhase  CachePhase
	CacheTriple int
	// IdentityPrompt is a model-identity probe's prompt, numbered from 1
	// (0 for every other request). Never a label.
	IdentityPrompt int

	Scheduled time.Time // when the load generator meant to send it
	Start     time.Time // just before the HTTP request was issued
	End       time.Time // last content chunk (success) or when it failed
	// ScheduledInStage is Scheduled after its stage's start, on the
	// monotonic clock: a trace's own offset over its speedup.
	ScheduledInStage time.Duration

	Streaming bool
	Outcome   Outcome
	Reason    Reason
	// Err is the error text for logs and debugging; never a label.
	Err        string
	HTTPStatus int
	// RetryAfter is how long the server asked to wait before the next
	// request (its Retry-After header, seconds or a date), 0 when it
	// asked nothing.
	RetryAfter time.Duration
	// RateLimit is what the answer's rate-limit headers said (the
	// provider's limit, what remains of it, when it resets), or nil when
	// it sent none: most self-hosted servers.
	RateLimit *ratelimit.Reading
	// Cost is what the request's tokens cost at its endpoint's Price, in
	// Currency; 0 without a price.
	Cost     float64
	Currency string
	// Anomaly is what the server did wrong after the request was
	// measured, if anything; it leaves Outcome as it is.
	Anomaly Anomaly

	// ContentChunks counts content chunks (output and reasoning).
	ContentChunks int
	TTFT          time.Duration // first content chunk - Start
	TTST          time.Duration // second content chunk - first
	// TTFO is time to first output (non-reasoning) token; it equals TTFT
	// unless the model reasons first.
	TTFO    time.Duration
	HasTTFO bool
	E2E     time.Duration // last content chunk - Start
	// Gaps holds every inter-chunk gap, in order.
	Gaps []time.Duration

	InputTokens int
	InputSource TokenSource
	// CachedInputTokens is the part of InputTokens the server's usage says
	// it read from its prompt cache (0 where it says nothing).
	CachedInputTokens int
	// IntendedInputTokens is what the workload meant to send; compared
	// with the server's count it shows how good the prompt sizing is.
	IntendedInputTokens int
	OutputTokens        int
	OutputSource        TokenSource
	// Answer is the answer's chunks as they came, each followed by a 0
	// byte, kept only when the prompt asked (client.Prompt.KeepText) and
	// dropped once its tokens are counted and its checks run.
	Answer []byte
	// AnswerBytes is the size of the answer's chunks as they came, all of
	// them; AnswerCut is set when Answer holds only the first of them,
	// the limit of what is kept (client.Prompt.KeepLimit) reached.
	AnswerBytes int
	AnswerCut   bool
	// ServedModel is the model the answer says served it, FinishReason
	// the last finish_reason it gave ("" where it gave none).
	ServedModel  string
	FinishReason string
	// Checks are the answer checks run on it, in the profile's order.
	Checks []Check
	// Trace is the trace context the request carried.
	Trace Trace
	// DNS, Connect and TLS are the new connection's phases (zero on a
	// kept one, Reused), FirstByte the time from Start to the response's
	// first byte: the network's and the server's head's share of TTFT.
	DNS, Connect, TLS, FirstByte time.Duration
	Reused                       bool
	// Inputs is how many inputs an embeddings request sent, Vectors how
	// many embeddings came back and Dimensions their length (-1 when
	// they differ, 0 when one is empty).
	Inputs, Vectors, Dimensions int
}

// Check is one answer check's verdict on a request.
type Check struct {
	Name string `json:"name"`
	Pass bool   `json:"pass"`
	// Message is a failing check's own: what it wanted, and the answer's
	// start where the check reads it.
	Message string `json:"message,omitempty"`
}

// Measured reports whether the request was answered in full, so that its
// timing counts: a success, or a wrong answer.
func (r *Request) Measured() bool { return r.Outcome == Success || r.Outcome == WrongAnswer }

// DispatchLag is how late the client sent the request against its schedule.
func (r *Request) DispatchLag() time.Duration { return r.Start.Sub(r.Scheduled) }

// HasTTFT reports whether TTFT is defined (at least one content chunk).
func (r *Request) HasTTFT() bool { return r.ContentChunks >= 1 && r.Streaming }

// HasTTST reports whether TTST is defined (at least two content chunks).
func (r *Request) HasTTST() bool { return r.ContentChunks >= 2 && r.Streaming }

// ITL is the per-request inter-token latency (E2E - TTFT) / (OSL - 1).
// ok is false when it is not defined (OSL < 2 or not streamed).
func (r *Request) ITL() (itl time.Duration, ok bool) {
	if !r.Streaming || r.ContentChunks < 1 || r.OutputTokens < 2 {
		return 0, false
	}
	return (r.E2E - r.TTFT) / time.Duration(r.OutputTokens-1), true
}

// OutputTokensPerSecond is OSL / E2E for this request.
func (r *Request) OutputTokensPerSecond() (float64, bool) {
	if r.E2E <= 0 || r.OutputTokens <= 0 {
		return 0, false
	}
	return float64(r.OutputTokens) / r.E2E.Seconds(), true
}

// Counted reports whether the request counts towards SLO attainment: only
// successes and errors do; cancellations are no fault of the server.
func (r *Request) Counted() bool { return r.Outcome != Cancelled }

// Price is a provider's price per million tokens, in Currency.
type Price struct {
	Input, CachedInput, Output float64
	Currency                   string
}

// Cost is what in input tokens (cached of them read from the provider's
// prompt cache) and out output tokens cost.
func (p *Price) Cost(in, cached, out int) float64 {
	cached = min(max(cached, 0), in)
	return (float64(in-cached)*p.Input + float64(cached)*p.CachedInput + float64(out)*p.Output) / 1e6
}
