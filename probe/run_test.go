package probe

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tokenprobe/tokenprobe/internal/sim"
	"github.com/tokenprobe/tokenprobe/internal/timingtest"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/workload"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type recorder struct {
	mu   sync.Mutex
	seen []*result.Request
	good int
}

func (r *recorder) Observe(res *result.Request, v slo.Verdict) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, res)
	if v.Good {
		r.good++
	}
}

func newRun(t *testing.T, cfg sim.Config, plan Plan, in, out int) (*Run, *sim.Server) {
	t.Helper()
	s, err := sim.Start("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(client.Options{})
	t.Cleanup(func() { c.CloseIdle(); s.Close() })
	return &Run{
		Profile:  "test",
		Plan:     plan,
		Workload: workload.NewSynthetic(workload.Lengths{Mean: in}, workload.Lengths{Mean: out}, true, 1),
		Endpoint: &client.Endpoint{Name: "sim", BaseURL: s.URL(), API: openai.Chat, Model: "sim", Timeout: 30 * time.Second, IncludeUsage: true},
		Client:   c,
	}, s
}

// The cliff tokenprobe exists to catch: past the server's slots, TTFT grows
// with the queue while ITL stays flat, and goodput at a TTFT SLO collapses
// while throughput holds. The simulator's queue puts TTFT near 15 ms at
// concurrency 1 and near 800 ms at 32, either side of the 300 ms SLO with
// room for a busy machine's pauses; the figures are still real time, so
// they are checked over up to two runs.
func TestQueueingCliff(t *testing.T) {
	cfg := sim.Config{Slots: 4, PrefillBase: 5 * time.Millisecond, PrefillPerToken: 100 * time.Microsecond,
		DecodeBase: 5 * time.Millisecond, DecodeSlowdown: 0.05, Jitter: 0.02, Seed: 1}
	ttftSLO := slo.Set{Thresholds: []slo.Threshold{{Kind: slo.TTFT, Max: 300 * time.Millisecond}}}
	timingtest.Retry(t, 2, func(a *timingtest.Attempt) {
		base, _ := newRun(t, cfg, Plan{Stages: []Stage{{Concurrency: 1, Requests: 15}}, Warmup: 1}, 100, 16)
		base.SLO = ttftSLO
		low, err := base.Execute(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		over, _ := newRun(t, cfg, Plan{Stages: []Stage{{Concurrency: 32, Requests: 96}}, Warmup: 32}, 100, 16)
		over.SLO = ttftSLO
		high, err := over.Execute(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("c=1:  TTFT p50 %.1f ms, ITL p50 %.2f ms, throughput %.1f req/s, goodput %.1f req/s, attainment %.2f", low.TTFT.P50, low.ITL.P50, low.RequestThroughput, low.Goodput, low.Attainment)
		t.Logf("c=32: TTFT p50 %.1f ms, ITL p50 %.2f ms, throughput %.1f req/s, goodput %.1f req/s, attainment %.2f", high.TTFT.P50, high.ITL.P50, high.RequestThroughput, high.Goodput, high.Attainment)
		if low.Success != 15 || high.Success != 96 {
			t.Fatalf("successes %d and %d, want 15 and 96", low.Success, high.Success)
		}
		if r := high.TTFT.P50 / low.TTFT.P50; r <= 5 {
			a.Errorf("TTFT p50 grew %.1fx, want > 5x", r)
		}
		if r := high.ITL.P50 / low.ITL.P50; r >= 1.5 {
			a.Errorf("ITL p50 grew %.2fx, want < 1.5x", r)
		}
		if high.RequestThroughput < low.RequestThroughput {
			a.Errorf("throughput fell from %.1f to %.1f req/s; the cliff is in latency, not throughput", low.RequestThroughput, high.RequestThroughput)
		}
		if low.Attainment < 0.8 {
			a.Errorf("attainment %.2f at concurrency 1, want the SLO met", low.Attainment)
		}
		if high.Goodput > 0.25*high.RequestThroughput || high.Attainment > 0.25 {
			a.Errorf("goodput %.1f of %.1f req/s, attainment %.2f at concurrency 32: did not collapse", high.Goodput, high.RequestThroughput, high.Attainment)
		}
	})
}

func TestWarmupIsNotMeasured(t *testing.T) {
	run, s := newRun(t, sim.Config{DecodeBase: time.Millisecond}, Plan{Stages: []Stage{{Concurrency: 2, Requests: 10}}, Warmup: 3}, 10, 4)
	rec := &recorder{}
	run.Sinks = []Sink{rec}
	sum, err := run.Execute(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, _, served, _ := s.Stats()
	if sum.Requests != 10 || len(rec.seen) != 10 || served != 13 {
		t.Fatalf("summary %d, sink %d, server saw %d; want 10, 10, 13", sum.Requests, len(rec.seen), served)
	}
	for _, r := range rec.seen {
		if r.Warmup {
			t.Fatal("a warmup request reached a sink")
		}
	}
	// The summary and the sink agree on every count.
	if rec.good != sum.Good || sum.Success+sum.Errors+sum.Cancelled != len(rec.seen) {
		t.Fatalf("sink good %d vs summary %d", rec.good, sum.Good)
	}
}

func TestOpenLoopRate(t *testing.T) {
	timingtest.Retry(t, 3, func(a *timingtest.Attempt) {
		run, _ := newRun(t, sim.Config{Slots: 64, DecodeBase: time.Millisecond}, Plan{Stages: []Stage{{Rate: 100, Arrival: "constant", Requests: 50}}}, 10, 5)
		start := time.Now()
		sum, err := run.Execute(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		elapsed := time.Since(start)
		// 50 requests at 100/s: the last is scheduled 490 ms after the first.
		if sum.Requests != 50 || elapsed < 490*time.Millisecond {
			t.Fatalf("%d requests in %v", sum.Requests, elapsed)
		}
		// Loose bounds: a broken schedule is late by whole gaps or more, and
		// this VM's own timers overshoot by up to 30 ms when its host is busy
		// (a 10 ms sleep: p99 13.6 ms late, max 31.6 ms, measured idle).
		if elapsed > 2*time.Second || sum.DispatchLag.P50 > 5 || sum.DispatchLag.P99 > 100 {
			a.Errorf("%v for 50 requests; dispatch lag p50 %.2f ms, p99 %.2f ms at 100 req/s", elapsed, sum.DispatchLag.P50, sum.DispatchLag.P99)
		}
	})
}

// A concurrency cap makes a too-fast open loop wait; the waiting shows as
// dispatch lag instead of being hidden.
func TestOpenLoopCapShowsAsDispatchLag(t *testing.T) {
	run, _ := newRun(t, sim.Config{Slots: 64, DecodeBase: 10 * time.Millisecond}, Plan{Stages: []Stage{{Rate: 200, Arrival: "constant", MaxConcurrency: 1, Requests: 10}}}, 10, 5)
	sum, err := run.Execute(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.DispatchLag.Max < 100 {
		t.Fatalf("dispatch lag max %.1f ms; requests of ~50 ms one at a time at 200/s must fall behind", sum.DispatchLag.Max)
	}
}

// A stage's duration ends the issuing of requests; those in flight at the
// end finish rather than being cancelled.
func TestDurationStopsIssuing(t *testing.T) {
	timingtest.Retry(t, 3, func(a *timingtest.Attempt) {
		run, _ := newRun(t, sim.Config{DecodeBase: 5 * time.Millisecond}, Plan{Stages: []Stage{{Concurrency: 2, Duration: 300 * time.Millisecond}}}, 10, 10)
		start := time.Now()
		sum, err := run.Execute(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		el := time.Since(start)
		if el < 300*time.Millisecond {
			t.Fatalf("run took %v for a 300 ms duration", el)
		}
		if sum.Cancelled != 0 || sum.Errors != 0 || sum.Success < 2 {
			t.Fatalf("success %d cancelled %d errors %d", sum.Success, sum.Cancelled, sum.Errors)
		}
		// About 12 requests of 50 ms in 300 ms on two workers; a machine
		// that stops the test for a while gets fewer, and ends later.
		if el > 1500*time.Millisecond || sum.Success < 4 {
			a.Errorf("%d requests in %v for a 300 ms duration", sum.Success, el)
		}
	})
}

// slowAfter is a workload whose prompts take a while to build after the
// first n: the open loop's dispatcher falls behind its schedule.
type slowAfter struct {
	workload.Source
	n     int
	delay time.Duration
	built int
}

func (s *slowAfter) Next() client.Prompt {
	if s.built++; s.built > s.n {
		time.Sleep(s.delay)
	}
	return s.Source.Next()
}

// An open loop with a duration sends every arrival its schedule puts
// inside the duration, even when the dispatcher reaches the last ones
// after the duration ended on the wall clock: they are late, and their
// lateness is reported, but the load asked for is the load sent.
func TestOpenLoopSendsEveryArrivalOfItsDuration(t *testing.T) {
	run, _ := newRun(t, sim.Config{Slots: 64, DecodeBase: time.Millisecond},
		Plan{Stages: []Stage{{Rate: 200, Arrival: "constant", Duration: 500 * time.Millisecond}}}, 10, 2)
	// 100 arrivals; the lookahead holds 64, the other 36 take 20 ms each
	// to build: the last leaves about 0.2 s after the stage's end.
	run.Workload = &slowAfter{Source: run.Workload, n: lookahead, delay: 20 * time.Millisecond}
	sum, err := run.Execute(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Requests != 100 {
		t.Errorf("%d requests, want the 100 scheduled in 500 ms at 200/s", sum.Requests)
	}
	if sum.DispatchLag.Max < 100 {
		t.Errorf("dispatch lag max %.1f ms; the slow prompts must show as lateness", sum.DispatchLag.Max)
	}
}

func TestCancelStopsTheRun(t *testing.T) {
	run, _ := newRun(t, sim.Config{DecodeBase: 20 * time.Millisecond}, Plan{Stages: []Stage{{Concurrency: 4, Duration: time.Minute}}}, 10, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	sum, err := run.Execute(ctx)
	if err == nil {
		t.Fatal("cancelled run returned no error")
	}
	if sum.Cancelled != 4 || sum.Errors != 0 {
		t.Fatalf("cancelled %d errors %d; the 4 in flight are cancelled, not errors", sum.Cancelled, sum.Errors)
	}
}

// Stages run in order; each result carries its stage's level, and the
// summary has one sub-summary per stage.
func TestStages(t *testing.T) {
	run, _ := newRun(t, sim.Config{Slots: 2, DecodeBase: 2 * time.Millisecond}, Plan{Stages: []Stage{
		{Concurrency: 1, Requests: 6}, {Concurrency: 8, Requests: 24}, {Rate: 200, Arrival: "constant", Requests: 10},
	}}, 10, 8)
	rec := &recorder{}
	run.Sinks = []Sink{rec}
	sum, err := run.Execute(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Requests != 40 || len(sum.Stages) != 3 {
		t.Fatalf("requests %d, stages %d", sum.Requests, len(sum.Stages))
	}
	for i, want := range []struct {
		level float64
		n     int
	}{{1, 6}, {8, 24}, {200, 10}} {
		if st := sum.Stages[i]; st.Level != want.level || st.Requests != want.n {
			t.Errorf("stage %d: level %v requests %d, want %v and %d", i, st.Level, st.Requests, want.level, want.n)
		}
	}
	levels := map[float64]int{}
	for _, r := range rec.seen {
		levels[r.Level]++
	}
	if levels[1] != 6 || levels[8] != 24 || levels[200] != 10 {
		t.Errorf("results by level: %v", levels)
	}
	// Two slots, eight users: the second stage queues.
	if sum.Stages[1].TTFT.P50 < 3*sum.Stages[0].TTFT.P50 {
		t.Errorf("TTFT p50 %.1f ms at c=8 vs %.1f ms at c=1: no queueing", sum.Stages[1].TTFT.P50, sum.Stages[0].TTFT.P50)
	}
}

// Injected cancellations end as cancelled, never as errors, and stay out
// of SLO attainment.
func TestCancellationInjection(t *testing.T) {
	run, _ := newRun(t, sim.Config{Slots: 16, DecodeBase: 10 * time.Millisecond}, Plan{Stages: []Stage{{Concurrency: 8, Requests: 60}},
		CancelFraction: 0.5, CancelAfter: 30 * time.Millisecond, Seed: 3}, 10, 10)
	run.SLO = slo.Set{Thresholds: []slo.Threshold{{Kind: slo.TTFT, Max: time.Second}}}
	sum, err := run.Execute(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// 60 draws at 1/2: 16 to 44 holds with probability above 0.9998.
	if sum.Cancelled < 16 || sum.Cancelled > 44 || sum.Errors != 0 || sum.Success+sum.Cancelled != 60 {
		t.Fatalf("success %d, cancelled %d, errors %d", sum.Success, sum.Cancelled, sum.Errors)
	}
	if sum.Attainment != 1 {
		t.Fatalf("attainment %v: cancelled requests must not count against it", sum.Attainment)
	}
}

// slowPrompts builds each prompt in 10 ms, as a tokenizer sizing long
// prompts does.
type slowPrompts struct{ workload.Source }

func (s slowPrompts) Next() client.Prompt {
	time.Sleep(10 * time.Millisecond)
	return s.Source.Next()
}

// A closed loop's prompts are ready before their send time: building one
// is in no request's dispatch lag. Before they were built ahead, each
// request was late by the 10 ms of its prompt (a tokenizer's lock made it
// 29-41 ms at concurrency 4 against a llama.cpp server).
func TestClosedLoopPromptsAreReadyBeforeTheirSendTime(t *testing.T) {
	run, _ := newRun(t, sim.Config{Slots: 4, PrefillBase: 20 * time.Millisecond, DecodeBase: 5 * time.Millisecond, Seed: 1},
		Plan{Stages: []Stage{{Concurrency: 4, Requests: 40}}}, 8, 8)
	run.Workload = slowPrompts{run.Workload}
	s, err := run.Execute(context.Background())
	if err != nil || s.Success != 40 {
		t.Fatalf("%v, %d successes", err, s.Success)
	}
	if s.DispatchLag.P50 > 2 {
		t.Fatalf("dispatch lag p50 %.2f ms, p99 %.2f ms: the prompt was built on the send path", s.DispatchLag.P50, s.DispatchLag.P99)
	}
}
