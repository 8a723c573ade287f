package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenprobe/tokenprobe/exporter/prom"
	"github.com/tokenprobe/tokenprobe/probe"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/load"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/workload"
	"github.com/tokenprobe/tokenprobe/sim"
)

// The clients a level is measured with.
const (
	KindTokenprobe = "tokenprobe"
	KindFloor      = "floor"
	KindK6         = "k6"
)

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
	// StartupTimingError is the same for the chunks sent while the
	// streams were still being opened (settleTime), kept apart because a
	// thousand connections opening at once say nothing of steady timing.
	StartupTimingError *Quantiles `json:"startup_timing_error,omitempty"`
	// DispatchLag is send time minus scheduled time (open loop, tokenprobe).
	DispatchLag *Quantiles `json:"dispatch_lag,omitempty"`
	// Dropped counts arrivals k6 could not start (k6 only).
	Dropped int64 `json:"dropped,omitempty"`
}

// RunClient drives l with the client named by kind and reports. ready is
// called once the client is set up, just before the load starts, so that
// the harness can read the idle process's memory.
func RunClient(ctx context.Context, kind string, l Load, ready func()) (ClientResult, error) {
	switch kind {
	case KindTokenprobe:
		return runTokenprobe(ctx, l, ready)
	case KindFloor:
		return runFloor(ctx, l, ready)
	}
	return ClientResult{}, fmt.Errorf("unknown client %q", kind)
}

// runTokenprobe is the daemon's path: a probe.Run with the streaming
// client, the SLO verdict, the run summary and the Prometheus exporter.
func runTokenprobe(ctx context.Context, l Load, ready func()) (ClientResult, error) {
	timing, startup := NewHistogram(), NewHistogram()
	var chunks, unstamped atomic.Int64
	var settled atomic.Int64 // unix nanos from which chunks count as steady
	settled.Store(math.MaxInt64)
	c := client.New(client.Options{OnChunk: func(data []byte, at time.Time) {
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
		Sinks:    []probe.Sink{exp, lag},
	}
	var peak atomic.Int64
	stopPeak := watch(func() {
		if n := run.Progress().InFlight; n > peak.Load() {
			peak.Store(n)
		}
	})
	ready()
	start := time.Now()
	settled.Store(start.Add(settleTime(l)).UnixNano())
	sum, err := run.Execute(ctx)
	secs := time.Since(start).Seconds()
	stopPeak()
	if err != nil {
		return ClientResult{}, err
	}
	if n := unstamped.Load(); n > 0 {
		return ClientResult{}, fmt.Errorf("%d chunks carried no send stamp: is the simulator in bench mode?", n)
	}
	res := ClientResult{
		Kind: KindTokenprobe, Requests: int64(sum.Requests), Errors: int64(sum.Errors), Chunks: chunks.Load(),
		Seconds: secs, PeakInFlight: peak.Load(), TimingError: quantilesOf(timing), StartupTimingError: quantilesOf(startup),
	}
	if l.Streams <= 0 {
		res.DispatchLag = quantilesOf(lag.h)
	}
	return res, nil
}

// settleTime is how long after the load starts the streams are taken to
// be open: a fifth of the load, at most 3 s.
func settleTime(l Load) time.Duration { return min(l.Duration/5, 3*time.Second) }

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

// runFloor is the cost no real client can beat: the standard library's
// HTTP client, a 4 KiB read loop, and a count of SSE events. It parses
// nothing, stamps nothing and keeps nothing.
func runFloor(ctx context.Context, l Load, ready func()) (ClientResult, error) {
	hc := &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: 16384, DisableCompression: true, ReadBufferSize: 4096, WriteBufferSize: 4096,
	}}
	defer hc.CloseIdleConnections()
	body := []byte(fmt.Sprintf(`{"model":"tokenprobe-sim","messages":[{"role":"user","content":%q}],"max_tokens":%d,"stream":true}`,
		strings.TrimSpace(workload.Words(1, 16)), l.Tokens))
	url := strings.TrimSuffix(l.URL, "/") + "/chat/completions"
	var requests, errs, events, inFlight, peak atomic.Int64
	one := func() {
		if n := inFlight.Add(1); n > peak.Load() {
			peak.Store(n) // racy maximum, close enough for a peak
		}
		defer inFlight.Add(-1)
		requests.Add(1)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			errs.Add(1)
			return
		}
		defer resp.Body.Close()
		n, err := countEvents(resp.Body)
		events.Add(n)
		if err != nil || resp.StatusCode != http.StatusOK {
			errs.Add(1)
		}
	}
	ready()
	start := time.Now()
	stop, cancel := context.WithTimeout(ctx, l.Duration)
	defer cancel()
	var wg sync.WaitGroup
	if l.Streams > 0 {
		for range l.Streams {
			wg.Go(func() {
				for stop.Err() == nil {
					one()
				}
			})
		}
	} else {
		gaps, err := load.NewArrivals("poisson", l.Rate, 0, 1)
		if err != nil {
			return ClientResult{}, err
		}
		next := time.Now()
		for stop.Err() == nil {
			next = next.Add(gaps.Next())
			if d := time.Until(next); d > 0 {
				select {
				case <-time.After(d):
				case <-stop.Done():
				}
			}
			if stop.Err() == nil {
				wg.Go(one)
			}
		}
	}
	wg.Wait()
	// Every answer is Tokens content chunks, one finishing chunk and [DONE].
	done := requests.Load() - errs.Load()
	return ClientResult{
		Kind: KindFloor, Requests: requests.Load(), Errors: errs.Load(), Chunks: events.Load() - 2*done,
		Seconds: time.Since(start).Seconds(), PeakInFlight: peak.Load(),
	}, ctx.Err()
}

// countEvents reads r to its end and counts the blank lines that end SSE
// events ("\n\n"), including one split across two reads.
func countEvents(r io.Reader) (int64, error) {
	buf := make([]byte, 4096)
	var n int64
	prevNL := false
	for {
		k, err := r.Read(buf)
		if k > 0 {
			b := buf[:k]
			if prevNL && b[0] == '\n' {
				n++
			}
			n += int64(bytes.Count(b, []byte("\n\n")))
			prevNL = b[k-1] == '\n'
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
