package result

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
)

// Trace is the W3C trace context a request carries: a fresh trace id and
// the id of the request's own span, which the server's span (vLLM reads
// traceparent) takes as its parent.
type Trace struct {
	TraceID [16]byte
	SpanID  [8]byte
	// Sampled is the traceparent's sampled flag: the probe exports this
	// request's span.
	Sampled bool
}

// NewTrace returns fresh ids, sampled at ratio (0 to 1) by the trace
// id, as OpenTelemetry's TraceIDRatioBased sampler decides, so that a
// server sampling by the same rule keeps the same requests.
func NewTrace(ratio float64) Trace {
	var t Trace
	binary.BigEndian.PutUint64(t.TraceID[:8], rand.Uint64())
	binary.BigEndian.PutUint64(t.TraceID[8:], rand.Uint64()|1) // never all zero
	binary.BigEndian.PutUint64(t.SpanID[:], rand.Uint64()|1)
	x := binary.BigEndian.Uint64(t.TraceID[8:]) >> 1
	t.Sampled = ratio >= 1 || float64(x) < ratio*(1<<63)
	return t
}

// Valid reports whether the ids are set (all zero is invalid in W3C).
func (t *Trace) Valid() bool { return t.TraceID != [16]byte{} }

// TraceParentLen is the length of a version 00 traceparent.
const TraceParentLen = 55

// AppendTraceParent appends the traceparent header's value:
// 00-<trace id>-<span id>-<flags>.
func (t *Trace) AppendTraceParent(b []byte) []byte {
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, t.TraceID[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, t.SpanID[:])
	if t.Sampled {
		return append(b, "-01"...)
	}
	return append(b, "-00"...)
}

// TraceIDString and SpanIDString are the ids in lower-case hex, as
// records, exemplars and trace backends write them.
func (t *Trace) TraceIDString() string { return hex.EncodeToString(t.TraceID[:]) }
func (t *Trace) SpanIDString() string  { return hex.EncodeToString(t.SpanID[:]) }
