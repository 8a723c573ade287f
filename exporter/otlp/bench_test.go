package otlp

import (
	"context"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/exporter/otlp/otlptest"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
)

// BenchmarkObserve is one successful streamed request of 64 tokens (63
// gaps) through the OTLP exporter, with tracing off and with every
// request's span exported: what a span costs, on the sink's goroutine,
// after the request was measured.
func BenchmarkObserve(b *testing.B) {
	for _, traces := range []bool{false, true} {
		name := "metrics"
		if traces {
			name = "metrics+span"
		}
		b.Run(name, func(b *testing.B) {
			rc := otlptest.Start()
			defer rc.Close()
			e, err := New(context.Background(), Config{Endpoint: rc.URL, Interval: time.Hour, Traces: traces})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = e.Shutdown(context.Background()) }()
			t0 := time.Now()
			r := result.Request{Profile: "p", Endpoint: "e", Model: "m", API: "chat", URL: "http://vllm:8000/v1", Level: 8, Streaming: true,
				Outcome: result.Success, ContentChunks: 64, OutputTokens: 64, InputTokens: 512, HTTPStatus: 200, Start: t0, End: t0.Add(700 * time.Millisecond),
				TTFT: 80 * time.Millisecond, TTST: 10 * time.Millisecond, E2E: 700 * time.Millisecond, Trace: result.NewTrace(1)}
			for range 63 {
				r.Gaps = append(r.Gaps, 10*time.Millisecond)
			}
			v := slo.Verdict{Counted: true, Good: true}
			e.Observe(&r, v)
			b.ReportAllocs()
			for b.Loop() {
				e.Observe(&r, v)
			}
		})
	}
}
