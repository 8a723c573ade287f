package bench

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenprobe/tokenprobe/exporter/otlp"
	"github.com/tokenprobe/tokenprobe/exporter/prom"
	"github.com/tokenprobe/tokenprobe/internal/runner"
	"github.com/tokenprobe/tokenprobe/internal/sim"
	"github.com/tokenprobe/tokenprobe/internal/sink"
	"github.com/tokenprobe/tokenprobe/probe"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/workload"
)

// The clients a level is measured with.
const (
	KindTokenprobe = "tokenprobe"
	KindFloor      = "floor"
	KindK6         = "k6"
	// KindOTLP is tokenprobe pushing its metrics over OTLP too, every
	// traceparent unsampled: tracing off, as a daemon with an otlp block
	// and no tracing block runs.
	KindOTLP = "tokenprobe-otlp"
	// KindTraced is KindOTLP with every request's span exported: tracing
	// on at sample 1, its cost the difference from KindOTLP.
	KindTraced = "tokenprobe-traced"
)

// isTokenprobe reports whether a kind is tokenprobe's own client.
func isTokenprobe(kind string) bool {
	return kind == KindTokenprobe || kind == KindOTLP || kind == KindTraced
}

// Load is what one client process is asked to do.
type Load struct {
	URL string // the simulator's base URL, ending in /v1
	// Streams > 0 holds that many streams (closed loop); otherwise Rate
	// requests per second arrive as a Poisson process (open loop).
	Streams  int
	Rate     float64
	Duration time.Duration
	// Tokens is each answer's length in content chunks, sent Interval
	// apart by the simulator.
	Tokens   int
	Interval time.Duration
	// OTLP is the collector the OTLP kinds push to.
	OTLP string
	// Source, when set, is the local address of the client's connections:
	// one destination takes about 28,000 connections from one source
	// address (the ephemeral ports), so the processes of a level past that
	// each use their own (any 127.x address reaches a loopback server).
	Source string `json:",omitempty"`
	// Settle is how long after the load starts its streams are taken to
	// be open (0: settleTime's default); the chunks before are startup.
	Settle time.Duration `json:",omitempty"`
}

// openStreams is how many streams an open loop holds on average (Little's
// law: arrival rate times answer time).
func (l Load) openStreams() float64 {
	return l.Rate * (time.Duration(max(l.Tokens-1, 0)) * l.Interval).Seconds()
}

func (l Load) String() string {
	if l.Streams > 0 {
		return fmt.Sprintf("%d streams", l.Streams)
	}
	return fmt.Sprintf("%g req/s", l.Rate)
}

// Quantiles are a distribution's p50, p99 and max in microseconds.
type Quantiles struct {
	P50 float64 `json:"p50_us"`
	P99 float64 `json:"p99_us"`
	Max float64 `json:"max_us"`
}

func quantilesOf(h *Histogram) *Quantiles {
	if h.Count() == 0 {
		return nil
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	return &Quantiles{P50: us(h.Quantile(0.5)), P99: us(h.Quantile(0.99)), Max: us(h.Max())}
}

// ClientResult is what a client process reports of itself when its load
// ends. CPU and memory are measured from outside by the harness.
type ClientResult struct {
	Kind     string  `json:"kind"`
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	Chunks   int64   `json:"chunks"` // content chunks received
	Seconds  float64 `json:"seconds"`
	// PeakInFlight is the most streams open at once.
	PeakInFlight int64 `json:"peak_in_flight"`
	// TimingError is receive stamp minus the simulator's send stamp, per
	// content chunk (tokenprobe only).
	TimingError *Quantiles `json:"timing_error,omitempty"`
	// Timing is TimingError's histogram, by which the harness adds up
	// the timing of a level measured in several processes.
	Timing *HistogramData `json:"timing_histogram,omitempty"`
	// StartupTimingError is the same for the chunks sent while the
	// streams were still being opened (settleTime), kept apart because a
	// thousand connections opening at once say nothing of steady timing.
	StartupTimingError *Quantiles `json:"startup_timing_error,omitempty"`
	// DispatchLag is send time minus scheduled time (open loop; tokenprobe
	// and the floor).
	DispatchLag *Quantiles `json:"dispatch_lag,omitempty"`
	// SchedWait is how long the process waited to be run (open loop,
	// tokenprobe): where its dispatch lag was spent.
	SchedWait *SchedWait `json:"sched_wait,omitempty"`
	// FirstError is tokenprobe's most frequent error and its count, so
	// that a level with errors says which.
	FirstError string `json:"first_error,omitempty"`
	// Dropped counts arrivals k6 could not start (k6), or results the
	// OTLP sink's queue dropped (the OTLP kinds).
	Dropped int64 `json:"dropped,omitempty"`
	// Held is the process's CPU and chunks while its streams were open
	// (closed loop, tokenprobe and the floor).
	Held *Held `json:"held,omitempty"`
}

// RunClient drives l with the client named by kind and reports. ready is
// called once the client is set up, just before the load starts, so that
// the harness can read the idle process's memory.
func RunClient(ctx context.Context, kind string, l Load, ready func()) (ClientResult, error) {
	switch kind {
	case KindTokenprobe, KindOTLP, KindTraced:
		return runTokenprobe(ctx, kind, l, ready)
	case KindFloor:
		return runFloor(ctx, l, ready)
	}
	return ClientResult{}, fmt.Errorf("unknown client %q", kind)
}

// runTokenprobe is the daemon's path: a probe.Run with the streaming
// client, the SLO verdict, the run summary and the Prometheus exporter,
// carried out by runner.Execute as every run is; the OTLP kinds add the
// OTLP exporter, with or without spans.
func runTokenprobe(ctx context.Context, kind string, l Load, ready func()) (ClientResult, error) {
	timing, startup := NewHistogram(), NewHistogram()
	var chunks, unstamped atomic.Int64
	var settled atomic.Int64 // unix nanos from which chunks count as steady
	settled.Store(math.MaxInt64)
	// TOKENPROBE_BENCH_NET_HTTP=1 sends through net/http (http_client:
	// net/http), to measure what probe/h1 changes.
	sample := 0.0
	if kind == KindTraced {
		// TOKENPROBE_BENCH_TRACE_SAMPLE=0.1 traces a tenth, as
		// tracing.sample does.
		sample = 1
		if v, err := strconv.ParseFloat(os.Getenv("TOKENPROBE_BENCH_TRACE_SAMPLE"), 64); err == nil && v >= 0 && v <= 1 {
			sample = v
		}
	}
	var sources []net.IP
	if l.Source != "" {
		sources = []net.IP{net.ParseIP(l.Source)}
	}
	c := client.New(client.Options{NetHTTP: os.Getenv("TOKENPROBE_BENCH_NET_HTTP") == "1", TraceSample: sample, SourceAddrs: sources, OnChunk: func(data []byte, at time.Time) {
		chunks.Add(1)
		sent, ok := sim.StampOf(data)
		switch {
		case !ok:
			unstamped.Add(1)
		case sent.UnixNano() >= settled.Load():
			timing.Observe(at.Sub(sent))
		default:
			startup.Observe(at.Sub(sent))
		}
	}})
	defer c.CloseIdle()
	ep := &client.Endpoint{Name: "bench", BaseURL: l.URL, API: openai.Chat, Model: "tokenprobe-sim", Timeout: 10 * time.Minute}
	exp, err := prom.New(prometheus.NewRegistry())
	if err != nil {
		return ClientResult{}, err
	}
	lag := &lagSink{h: NewHistogram()}
	var dropped atomicCounter
	sinks := []probe.Sink{exp, lag}
	if kind != KindTokenprobe {
		if l.OTLP == "" {
			return ClientResult{}, fmt.Errorf("%s: no collector to push to (--otlp)", kind)
		}
		// As the daemon runs it: behind its own bounded queue.
		o, err := otlp.New(ctx, otlp.Config{Endpoint: l.OTLP, Insecure: true, Traces: kind == KindTraced})
		if err != nil {
			return ClientResult{}, err
		}
		q := sink.NewQueue(o, 1<<16, &dropped)
		defer func() { q.Close(); _ = o.Shutdown(context.Background()) }()
		sinks = append(sinks, q)
	}
	st := probe.Stage{Concurrency: l.Streams, Duration: l.Duration}
	if l.Streams <= 0 {
		st = probe.Stage{Rate: l.Rate, Arrival: "poisson", Duration: l.Duration}
	}
	run := &probe.Run{
		Profile:  "bench",
		Plan:     probe.Plan{Stages: []probe.Stage{st}, Seed: 1},
		Workload: workload.NewSynthetic(workload.Lengths{Mean: 16}, workload.Lengths{Mean: l.Tokens}, true, 1),
		SLO:      slo.Set{Thresholds: []slo.Threshold{{Kind: slo.TTFT, Max: time.Second}, {Kind: slo.ITL, Max: time.Second}}, Objective: 0.9},
		Endpoint: ep,
		Client:   c,
		Sinks:    sinks,
	}
	var peak atomic.Int64
	stopPeak := watch(func() {
		if n := run.Progress().InFlight; n > peak.Load() {
			peak.Store(n)
		}
	})
	ready()
	sched := takeSchedSnapshot()
	start := time.Now()
	settled.Store(start.Add(settleTime(l)).UnixNano())
	var held *heldWindow
	if l.Streams > 0 {
		held = startHeld(settleTime(l), l.Duration, chunks.Load, func() int64 { return run.Progress().InFlight })
	}
	f := runner.Execute(ctx, run, runner.Options{})
	sum, err := f.Summary, f.Err
	secs := time.Since(start).Seconds()
	heldRes := held.result()
	wait := schedWaitSince(sched)
	stopPeak()
	if err != nil {
		return ClientResult{}, err
	}
	if n := unstamped.Load(); n > 0 {
		return ClientResult{}, fmt.Errorf("%d chunks carried no send stamp: is the simulator in bench mode?", n)
	}
	res := ClientResult{
		Kind: kind, Requests: int64(sum.Requests), Errors: int64(sum.Errors), Chunks: chunks.Load(),
		Seconds: secs, PeakInFlight: peak.Load(), TimingError: quantilesOf(timing), Timing: timing.Data(), StartupTimingError: quantilesOf(startup),
		Held: heldRes,
	}
	if l.Streams <= 0 {
		res.DispatchLag, res.SchedWait = quantilesOf(lag.h), wait
	}
	res.Dropped = dropped.Load()
	if len(sum.Failures) > 0 {
		f := sum.Failures[0]
		res.FirstError = fmt.Sprintf("%d %s errors, %d of them: %s", f.Count, f.Reason, f.MessageCount, f.Message)
	}
	return res, nil
}

// atomicCounter counts the results the OTLP sink's queue dropped.
type atomicCounter struct{ atomic.Int64 }

func (c *atomicCounter) Inc() { c.Add(1) }

// settleTime is how long after the load starts the streams are taken to
// be open: a fifth of the load, at most 3 s.
func settleTime(l Load) time.Duration {
	if l.Settle > 0 {
		return l.Settle
	}
	return min(l.Duration/5, 3*time.Second)
}

type lagSink struct{ h *Histogram }

func (s *lagSink) Observe(r *result.Request, _ slo.Verdict) { s.h.Observe(r.DispatchLag()) }

// watch calls f every 20 ms until the returned function is called.
func watch(f func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				f()
			case <-done:
				return
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
