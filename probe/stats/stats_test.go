package stats

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// Expected values are numpy's: np.percentile(x, p) and np.std(x).
func TestComputeMatchesNumpy(t *testing.T) {
	d := Compute([]float64{40, 15, 50, 20, 35})
	if !near(Percentile([]float64{15, 20, 35, 40, 50}, 40), 29) || !near(d.P50, 35) || !near(d.P90, 46) || !near(d.P99, 49.6) {
		t.Errorf("percentiles: %+v", d)
	}
	if !near(Compute([]float64{2, 4, 4, 4, 5, 5, 7, 9}).Std, 2) {
		t.Error("std is not the population std")
	}
	if d := Compute([]float64{1, 2, 3, 4}); !near(d.P90, 3.7) || !near(d.P75, 3.25) || !near(d.Avg, 2.5) || d.Min != 1 || d.Max != 4 {
		t.Errorf("1..4: %+v", d)
	}
	if d := Compute([]float64{7}); d.P99 != 7 || d.Std != 0 || d.Count != 1 {
		t.Errorf("single value: %+v", d)
	}
	if d := Compute(nil); d.Count != 0 {
		t.Errorf("empty: %+v", d)
	}
}

func TestSummaryArithmetic(t *testing.T) {
	set := slo.Set{Thresholds: []slo.Threshold{{Kind: slo.TTFT, Max: 100 * time.Millisecond}}, Objective: 0.5}
	agg := NewAggregator("p", "e", "m", 4, set.Objective)
	t0 := time.Now()
	add := func(r result.Request) {
		r.Streaming = true
		v := set.Evaluate(&r)
		agg.Add(&r, v)
	}
	req := func(startMs, ttftMs, e2eMs, osl int) result.Request {
		start := t0.Add(time.Duration(startMs) * time.Millisecond)
		return result.Request{
			Scheduled: start.Add(-time.Millisecond), Start: start, End: start.Add(time.Duration(e2eMs) * time.Millisecond),
			Outcome: result.Success, ContentChunks: osl, OutputTokens: osl, InputTokens: 10, InputSource: result.SourceUsage, IntendedInputTokens: 8,
			TTFT: time.Duration(ttftMs) * time.Millisecond, E2E: time.Duration(e2eMs) * time.Millisecond,
		}
	}
	add(req(0, 50, 1050, 11))   // good: ITL = 100 ms
	add(req(100, 80, 580, 6))   // good
	add(req(200, 300, 800, 6))  // misses TTFT
	add(req(300, 20, 2000, 21)) // good; ends last at 2300 ms
	fail := req(400, 0, 0, 0)
	fail.Outcome, fail.Reason, fail.ContentChunks = result.Error, result.ReasonServerError, 0
	fail.End = fail.Start.Add(time.Millisecond)
	add(fail)
	cancel := req(500, 10, 100, 2)
	cancel.Outcome = result.Cancelled
	add(cancel)

	s := agg.Summary()
	if s.Requests != 6 || s.Success != 4 || s.Errors != 1 || s.Cancelled != 1 || s.ByReason["server_error"] != 1 {
		t.Fatalf("counts: %+v", s)
	}
	// Attainment: 3 good of 5 counted (the cancelled request is in
	// neither): over the 50% objective, but five requests cannot show it.
	if s.Good != 3 || !near(s.Attainment, 0.6) || !near(s.PerSLO["ttft"], 0.6) || s.Passed || !s.Undecided {
		t.Errorf("attainment %v per-SLO %v good %d passed %v undecided %v", s.Attainment, s.PerSLO, s.Good, s.Passed, s.Undecided)
	}
	if e := s.Evidence; e == nil || e.Counted != 5 || e.RequestsToDecide <= 5 || !strings.HasPrefix(s.VerdictLine(), "NOT ENOUGH EVIDENCE: SLO attainment 60.0% of 5 requests (95% interval 23.1% to 88.2%) holds the 50.0% objective: about ") {
		t.Errorf("evidence %+v: %s", e, s.VerdictLine())
	}
	// Duration is max(end) - min(start) = 2300 ms.
	if !near(s.DurationSeconds, 2.3) || !near(s.RequestThroughput, 4/2.3) || !near(s.Goodput, 3/2.3) || !near(s.OutputTokenThroughput, 44/2.3) {
		t.Errorf("duration %v throughput %v goodput %v tokens/s %v", s.DurationSeconds, s.RequestThroughput, s.Goodput, s.OutputTokenThroughput)
	}
	if s.TTFT.Count != 4 || !near(s.TTFT.Max, 300) || !near(s.ITL.Max, 100) || !near(s.InputLengthError.Avg, 2) || !near(s.DispatchLag.Max, 1) {
		t.Errorf("distributions: TTFT %+v ITL %+v inErr %+v lag %+v", s.TTFT, s.ITL, s.InputLengthError, s.DispatchLag)
	}
	agg2 := NewAggregator("p", "e", "m", 0, 0.9)
	r := req(0, 500, 600, 2)
	agg2.Add(&r, set.Evaluate(&r))
	if agg2.Summary().Passed {
		t.Error("attainment 0 passed an objective of 0.9")
	}
}

// A miss the probe's own delay could account for is not the server's:
// forty requests that missed a 100 ms TTFT by 5 ms fail the run when the
// probe ran promptly, and are not enough evidence when it was stalled
// for 20 ms at p99. Forty that missed by 200 ms fail it either way.
func TestProbeDelayExcusesOnlyItsOwnMisses(t *testing.T) {
	set := slo.Set{Thresholds: []slo.Threshold{{Kind: slo.TTFT, Max: 100 * time.Millisecond}}, Objective: 0.9}
	run := func(ttft time.Duration, delay float64) Summary {
		agg := NewAggregator("p", "e", "m", 1, set.Objective)
		t0 := time.Now()
		for i := range 40 {
			r := result.Request{Start: t0.Add(time.Duration(i) * time.Second), Outcome: result.Success, Streaming: true,
				ContentChunks: 4, OutputTokens: 4, TTFT: ttft, E2E: ttft + 30*time.Millisecond}
			r.End = r.Start.Add(r.E2E)
			agg.Add(&r, set.Evaluate(&r))
		}
		agg.SetProbe(Probe{DelayP50Ms: 1, DelayP99Ms: delay, DelayMaxMs: delay, Samples: 4000, StealPercent: 0})
		return agg.Summary()
	}
	if s := run(105*time.Millisecond, 0.5); s.Passed || s.Undecided || s.Probe.Starved {
		t.Errorf("5 ms misses, a prompt probe: %s (probe %+v)", s.VerdictLine(), s.Probe)
	}
	s := run(105*time.Millisecond, 20)
	if s.Passed || !s.Undecided || s.Evidence.ProbeExplains != 40 || !s.Probe.Starved {
		t.Errorf("5 ms misses, a probe stalled 20 ms: %s (evidence %+v, probe %+v)", s.VerdictLine(), s.Evidence, s.Probe)
	}
	if !strings.Contains(s.VerdictLine(), "40 of the misses are within the probe's own delay (p99 20 ms; the probe was starved: its own delay p99 20 ms is 19% of the median TTFT 105 ms)") {
		t.Errorf("verdict: %s", s.VerdictLine())
	}
	if s := run(300*time.Millisecond, 20); s.Passed || s.Undecided {
		t.Errorf("200 ms misses, a probe stalled 20 ms: %s", s.VerdictLine())
	}
}

// Resets from connections on different local ports are one message: the
// most frequent one, its count theirs together.
func TestFailureMessagesMaskEphemeralPorts(t *testing.T) {
	a := NewAggregator("p", "e", "m", 1, 0)
	for i, port := range []int{51234, 51235, 51236} {
		a.Add(&result.Request{ID: uint64(i), Outcome: result.Error, Reason: result.ReasonStream,
			Err: fmt.Sprintf("read tcp 127.0.0.1:%d->10.0.0.7:8000: read: connection reset by peer", port)}, slo.Verdict{})
	}
	a.Add(&result.Request{Outcome: result.Error, Reason: result.ReasonStream, Err: "malformed JSON chunk"}, slo.Verdict{})
	f := a.Summary().Failures
	if len(f) != 1 || f[0].MessageCount != 3 || f[0].Message != "read tcp 127.0.0.1:*->10.0.0.7:8000: read: connection reset by peer" {
		t.Fatalf("%+v", f)
	}
}

// Without a cliff the knee says what did happen at its peak: TTFT x13
// with ITL x2 is a queue and a slower decode together, not "never
// reached x3".
func TestKneeReadingWithoutACliff(t *testing.T) {
	stage := func(level, ttft, itl float64) Summary {
		return Summary{Level: level, Requests: 10, TTFT: Dist{Count: 10, P50: ttft}, ITL: Dist{Count: 10, P50: itl}}
	}
	k := FindKnee([]Summary{stage(1, 223, 10), stage(50, 2900, 20)}, 0)
	if k.CliffLevel != 0 || !strings.Contains(k.Reading(), "at 50 TTFT p50 x13.0 with ITL p50 x2.0: a queue and a slower decode together") {
		t.Fatalf("%+v: %s", k, k.Reading())
	}
	if k := FindKnee([]Summary{stage(1, 200, 10), stage(2, 300, 10)}, 0); !strings.Contains(k.Reading(), "TTFT p50 at most x1.5") {
		t.Fatalf("%s", k.Reading())
	}
}

// A server's text reaches terminals and pages with its control
// characters as escapes: no forged log line, no cleared screen.
func TestFailureMessagesEscapeControlCharacters(t *testing.T) {
	a := NewAggregator("p", "e", "m", 1, 0)
	a.Add(&result.Request{Outcome: result.Error, Reason: result.ReasonServerError, HTTPStatus: 500,
		Err: "HTTP 500: oops\nlevel=error msg=forged\r\x1b[2J"}, slo.Verdict{})
	f := a.Summary().Failures
	if len(f) != 1 || f[0].Message != `HTTP 500: oops\nlevel=error msg=forged\r\x1b[2J` {
		t.Fatalf("%+v", f)
	}
}

// A check's first failure is its own message, not the first failing
// check's of the request that failed it.
func TestEachCheckKeepsItsOwnFirstFailure(t *testing.T) {
	a := NewAggregator("p", "e", "m", 1, 0)
	a.Add(&result.Request{Outcome: result.WrongAnswer, Err: "finish_reason: finish_reason \"length\", want one of stop", Checks: []result.Check{
		{Name: "finish_reason", Message: `finish_reason "length", want one of stop`},
		{Name: "expect", Message: `the answer does not match /paris/: " Lyon."`},
	}}, slo.Verdict{})
	got := map[string]string{}
	for _, c := range a.Summary().Checks {
		got[c.Name] = c.FirstFailure
	}
	if got["expect"] != `the answer does not match /paris/: " Lyon."` || got["finish_reason"] != `finish_reason "length", want one of stop` {
		t.Errorf("first failures %q", got)
	}
}
