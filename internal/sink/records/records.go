// Package records writes records.jsonl: one JSON line per measured
// request, for a one-shot run's artifacts.
package records

import (
	"bufio"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
)

// Record is one request as written to records.jsonl. Times are
// milliseconds; a value the request does not have is omitted.
type Record struct {
	ID uint64 `json:"id"`
	// RequestID is the X-Request-Id the request carried: find it in the
	// server's logs and traces.
	RequestID string `json:"x_request_id,omitempty"`
	Profile   string `json:"profile"`
	Endpoint  string `json:"endpoint"`
	// Location is where the probe ran from (--probe.location).
	Location string  `json:"location,omitempty"`
	Model    string  `json:"model"`
	Level    float64 `json:"level"`
	Session  string  `json:"session_id,omitempty"`
	Turn     *int    `json:"turn,omitempty"`
	// CachePhase (cold, warm, fresh) and CacheTriple place a prefix-cache
	// probe's request in its triple.
	CachePhase    string    `json:"cache_phase,omitempty"`
	CacheTriple   *int      `json:"cache_triple,omitempty"`
	Start         time.Time `json:"start"`
	ScheduledMs   float64   `json:"scheduled_ms"`
	DispatchLagMs float64   `json:"dispatch_lag_ms"`
	Outcome       string    `json:"outcome"`
	Reason        string    `json:"reason,omitempty"`
	Error         string    `json:"error,omitempty"`
	// ServedModel and FinishReason are what the answer said; Checks the
	// answer checks' verdicts.
	ServedModel  string         `json:"served_model,omitempty"`
	FinishReason string         `json:"finish_reason,omitempty"`
	Checks       []result.Check `json:"checks,omitempty"`
	// TraceID and SpanID are the traceparent it carried; the phases its
	// connection's (absent on a kept one) and its head's.
	TraceID     string   `json:"trace_id,omitempty"`
	SpanID      string   `json:"span_id,omitempty"`
	DNSMs       *float64 `json:"dns_ms,omitempty"`
	ConnectMs   *float64 `json:"connect_ms,omitempty"`
	TLSMs       *float64 `json:"tls_ms,omitempty"`
	FirstByteMs *float64 `json:"first_byte_ms,omitempty"`
	Reused      bool     `json:"reused_connection,omitempty"`
	// Inputs, Vectors and Dimensions are an embeddings request's.
	Inputs           int       `json:"inputs,omitempty"`
	Vectors          int       `json:"vectors,omitempty"`
	Dimensions       int       `json:"dimensions,omitempty"`
	HTTPStatus       int       `json:"http_status,omitempty"`
	TTFTMs           *float64  `json:"ttft_ms,omitempty"`
	TTSTMs           *float64  `json:"ttst_ms,omitempty"`
	TTFOMs           *float64  `json:"time_to_first_output_token_ms,omitempty"`
	ITLMs            *float64  `json:"itl_ms,omitempty"`
	RequestLatencyMs *float64  `json:"request_latency_ms,omitempty"`
	InterChunkMs     []float64 `json:"inter_chunk_ms,omitempty"`
	Anomaly          string    `json:"anomaly,omitempty"`
	// Retried: sent again on a new connection, the server having closed
	// the kept one (its TTFT includes the first attempt).
	Retried             bool            `json:"retried,omitempty"`
	ContentChunks       int             `json:"content_chunks"`
	InputTokens         int             `json:"input_tokens"`
	InputSource         string          `json:"input_tokens_source"`
	CachedInputTokens   int             `json:"cached_input_tokens,omitempty"`
	IntendedInputTokens int             `json:"intended_input_tokens"`
	OutputTokens        int             `json:"output_tokens"`
	OutputSource        string          `json:"output_tokens_source,omitempty"`
	Good                bool            `json:"good"`
	SLO                 map[string]bool `json:"slo,omitempty"`
}

// NewRecord converts a measured request and its verdict.
func NewRecord(r *result.Request, v slo.Verdict) Record {
	ms := func(d time.Duration) *float64 { f := float64(d) / float64(time.Millisecond); return &f }
	rec := Record{
		ID: r.ID, RequestID: r.XRequestID(), Profile: r.Profile, Endpoint: r.Endpoint, Model: r.Model, Level: r.Level,
		Start: r.Start, ScheduledMs: *ms(r.ScheduledInStage), DispatchLagMs: *ms(r.DispatchLag()), Outcome: r.Outcome.String(), Reason: r.Reason.String(),
		Error: r.Err, HTTPStatus: r.HTTPStatus, Anomaly: r.Anomaly.String(), Retried: r.Retried, ContentChunks: r.ContentChunks,
		InputTokens: r.InputTokens, InputSource: r.InputSource.String(), IntendedInputTokens: r.IntendedInputTokens, CachedInputTokens: r.CachedInputTokens,
		OutputTokens: r.OutputTokens, Good: v.Good,
	}
	if r.Session != "" {
		rec.Session, rec.Turn = r.Session, &r.Turn
	}
	if r.CachePhase != result.NoCache {
		rec.CachePhase, rec.CacheTriple = r.CachePhase.String(), &r.CacheTriple
	}
	rec.Checks, rec.ServedModel, rec.FinishReason = r.Checks, r.ServedModel, r.FinishReason
	rec.Inputs, rec.Vectors, rec.Dimensions = r.Inputs, r.Vectors, r.Dimensions
	if r.Trace.Valid() {
		rec.TraceID, rec.SpanID = r.Trace.TraceIDString(), r.Trace.SpanIDString()
	}
	rec.Reused = r.Reused
	if !r.Reused && !r.Start.IsZero() && (r.Connect > 0 || r.DNS > 0) {
		rec.DNSMs, rec.ConnectMs, rec.TLSMs = ms(r.DNS), ms(r.Connect), ms(r.TLS)
	}
	if r.FirstByte > 0 {
		rec.FirstByteMs = ms(r.FirstByte)
	}
	if r.Measured() {
		rec.OutputSource = r.OutputSource.String()
		rec.RequestLatencyMs = ms(r.E2E)
		if r.HasTTFT() {
			rec.TTFTMs = ms(r.TTFT)
		}
		if r.HasTTST() {
			rec.TTSTMs = ms(r.TTST)
		}
		if r.HasTTFO {
			rec.TTFOMs = ms(r.TTFO)
		}
		if itl, ok := r.ITL(); ok {
			rec.ITLMs = ms(itl)
		}
		for _, g := range r.Gaps {
			rec.InterChunkMs = append(rec.InterChunkMs, *ms(g))
		}
	}
	for _, k := range slo.Kinds {
		if v.Checked[k] {
			if rec.SLO == nil {
				rec.SLO = map[string]bool{}
			}
			rec.SLO[k.String()] = v.Met[k]
		}
	}
	return rec
}

// Writer writes one JSON line per measured request; it is a probe.Sink.
type Writer struct {
	// Location is every record's location, none when empty.
	Location string

	mu  sync.Mutex
	w   *bufio.Writer
	enc *json.Encoder
	err error
}

// New writes to w; call Flush at the end.
func New(w io.Writer) *Writer {
	bw := bufio.NewWriterSize(w, 64<<10)
	return &Writer{w: bw, enc: json.NewEncoder(bw)}
}

func (s *Writer) Observe(r *result.Request, v slo.Verdict) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		rec := NewRecord(r, v)
		rec.Location = s.Location
		s.err = s.enc.Encode(rec)
	}
}

// Flush writes what is buffered and reports the first write error.
func (s *Writer) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.w.Flush(); s.err == nil {
		s.err = err
	}
	return s.err
}
