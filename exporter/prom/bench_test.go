package prom

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenprobe/tokenprobe/probe/result"
)

// BenchmarkObserve is one successful streamed request of 64 tokens (63
// inter-chunk gaps) through the Prometheus exporter.
func BenchmarkObserve(b *testing.B) {
	e, err := New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	r := result.Request{Profile: "p", Endpoint: "e", Model: "m", Level: 8, Streaming: true, Outcome: result.Success,
		ContentChunks: 64, OutputTokens: 64, InputTokens: 512, TTFT: 80 * time.Millisecond, TTST: 10 * time.Millisecond, E2E: 700 * time.Millisecond,
		Checks: []result.Check{{Name: "model", Pass: true}}} // the default check, on every request
	for range 63 {
		r.Gaps = append(r.Gaps, 10*time.Millisecond)
	}
	v := testSLO.Evaluate(&r)
	e.Observe(&r, v) // the first observation creates the series
	b.ReportAllocs()
	for b.Loop() {
		e.Observe(&r, v)
	}
}
