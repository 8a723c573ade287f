package sink_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenprobe/tokenprobe/exporter/otlp"
	"github.com/tokenprobe/tokenprobe/exporter/prom"
	"github.com/tokenprobe/tokenprobe/internal/sink"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
)

// BenchmarkFanOut is the cost to the run's collector of one 64-token
// request: the Prometheus exporter inline, the OTLP exporter behind its
// queue (as the daemon wires them). It includes the queue's hand-off, not
// the OTLP recording, which runs on the queue's goroutine.
func BenchmarkFanOut(b *testing.B) {
	collector := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer collector.Close()
	p, err := prom.New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	o, err := otlp.New(context.Background(), otlp.Config{Endpoint: collector.URL, Interval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = o.Shutdown(context.Background()) }()
	q := sink.NewQueue(o, 1<<16, nil)
	defer q.Close()
	r := result.Request{Profile: "p", Endpoint: "e", Model: "m", API: "chat", URL: "http://127.0.0.1:8000/v1", Level: 8,
		Streaming: true, Outcome: result.Success, ContentChunks: 64, OutputTokens: 64, InputTokens: 512,
		TTFT: 80 * time.Millisecond, TTST: 10 * time.Millisecond, E2E: 700 * time.Millisecond}
	for range 63 {
		r.Gaps = append(r.Gaps, 10*time.Millisecond)
	}
	set := slo.Set{Thresholds: []slo.Threshold{{Kind: slo.TTFT, Max: time.Second}, {Kind: slo.ITL, Max: 50 * time.Millisecond}}}
	v := set.Evaluate(&r)
	p.Observe(&r, v)
	o.Observe(&r, v)
	b.ReportAllocs()
	for b.Loop() {
		p.Observe(&r, v)
		q.Observe(&r, v)
	}
}

// BenchmarkOTLPObserve is the OTLP recording itself, on its own goroutine.
func BenchmarkOTLPObserve(b *testing.B) {
	collector := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer collector.Close()
	o, err := otlp.New(context.Background(), otlp.Config{Endpoint: collector.URL, Interval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = o.Shutdown(context.Background()) }()
	r := result.Request{Profile: "p", Endpoint: "e", Model: "m", API: "chat", URL: "http://127.0.0.1:8000/v1", Level: 8,
		Streaming: true, Outcome: result.Success, ContentChunks: 64, OutputTokens: 64, InputTokens: 512,
		TTFT: 80 * time.Millisecond, E2E: 700 * time.Millisecond}
	for range 63 {
		r.Gaps = append(r.Gaps, 10*time.Millisecond)
	}
	v := slo.Verdict{Counted: true, Good: true}
	o.Observe(&r, v)
	b.ReportAllocs()
	for b.Loop() {
		o.Observe(&r, v)
	}
}
