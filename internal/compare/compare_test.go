package compare

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/sink/records"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// synthetic is a run of n requests whose TTFT is normal around mean ms,
// a share good of them good, over duration seconds.
func synthetic(seed uint64, n int, mean, good, duration float64) *Run {
	rng := rand.New(rand.NewPCG(seed, 7))
	r := &Run{Dir: "synthetic", Summary: stats.Summary{Profile: "p", Endpoint: "e", DurationSeconds: duration}}
	for i := range n {
		ttft := mean * (1 + 0.1*rng.NormFloat64())
		itl := 10 * (1 + 0.05*rng.NormFloat64())
		r.Records = append(r.Records, records.Record{ID: uint64(i + 1), Outcome: "success", TTFTMs: &ttft, ITLMs: &itl,
			Good: rng.Float64() < good})
	}
	return r
}

func row(t *testing.T, rows []Row, label string) Row {
	t.Helper()
	for _, r := range rows {
		if r.Label() == label {
			return r
		}
	}
	t.Fatalf("no row %s", label)
	return Row{}
}

// Two samples of one distribution differ by noise only; a 20% slower
// TTFT and a goodput that fell from 90% to 60% of requests are beyond it.
func TestNoiseAndKnownDifferences(t *testing.T) {
	base := synthetic(1, 400, 100, 0.9, 40)
	same := synthetic(2, 400, 100, 0.9, 40)
	rows := Compare(base, same, Options{})
	for _, label := range []string{"ttft.avg", "ttft.p50", "ttft.p95", "itl.p50", "goodput", "attainment"} {
		if r := row(t, rows, label); r.Significant || !(r.Low < 0 && r.High > 0) {
			t.Errorf("same distribution, %s: change %+.3f in [%+.3f, %+.3f] called significant", label, r.Change, r.Low, r.High)
		}
	}
	worse := synthetic(3, 400, 120, 0.6, 40)
	rows = Compare(base, worse, Options{})
	for label, want := range map[string]float64{"ttft.avg": 0.2, "ttft.p50": 0.2, "ttft.p95": 0.2, "goodput": -1.0 / 3} {
		r := row(t, rows, label)
		if !r.Significant || math.Abs(r.Change-want) > 0.06 || r.Low > want || r.High < want {
			t.Errorf("%s: change %+.3f in [%+.3f, %+.3f], want a significant %+.3f inside it", label, r.Change, r.Low, r.High, want)
		}
	}
	if r := row(t, rows, "itl.p50"); r.Significant {
		t.Errorf("ITL did not change, yet %+.3f in [%+.3f, %+.3f] is significant", r.Change, r.Low, r.High)
	}
	rules, err := ParseRules("ttft.p95>+10%, goodput<-5%, itl.p50>+1%")
	if err != nil {
		t.Fatal(err)
	}
	var broke []string
	for _, d := range failed(Check("p on e", rows, rules)) {
		broke = append(broke, d.Rule.Label)
	}
	if strings.Join(broke, " ") != "ttft.p95 goodput" {
		t.Errorf("rules failed: %v, want ttft.p95 and goodput", broke)
	}
	if d := failed(Check("p on e", Compare(base, same, Options{}), rules)); len(d) != 0 {
		t.Errorf("noise failed %v", d)
	}
	// A threshold the change does not reach passes, when the interval is
	// within it.
	if d := Check("p on e", rows, []Rule{{Label: "ttft.p95", Above: true, Threshold: 0.5}}); len(d) != 1 || d[0].Outcome != Passed {
		t.Errorf("a +20%% change against a +50%% rule: %+v", d)
	}
}

// failed are the decisions that failed.
func failed(ds []Decision) []Decision {
	var out []Decision
	for _, d := range ds {
		if d.Outcome == Failed {
			out = append(out, d)
		}
	}
	return out
}

// A change is decided only where its whole interval lies on one side of
// the threshold: a rise whose interval holds the threshold is not enough
// evidence (the README's gate failed identical runs at "+203%, interval
// [+1.7%, +585%]"), and says how many requests would decide it.
func TestGateDecidesOnlyOnTheWholeInterval(t *testing.T) {
	rule := Rule{Label: "ttft.p95", Above: true, Threshold: 0.1, text: "ttft.p95>+10%"}
	row := func(c, lo, hi float64) Row {
		return Row{Metric: Metric{Name: "ttft", Stat: "p95"}, Change: c, Low: lo, High: hi, BaseN: 40, NewN: 40}
	}
	for _, c := range []struct {
		row  Row
		want string
	}{
		{row(2.03, 0.017, 5.85), Undecided},
		{row(0.35, 0.21, 0.50), Failed},
		{row(0.01, -0.04, 0.06), Passed},
		{row(0.08, -0.05, 0.25), Undecided},
	} {
		d := decide("p on e", c.row, rule)
		if d.Outcome != c.want {
			t.Errorf("%+.0f%% in [%+.0f%%, %+.0f%%]: %s, want %s", 100*c.row.Change, 100*c.row.Low, 100*c.row.High, d.Outcome, c.want)
		}
		if d.Outcome == Undecided && (d.RequestsToDecide <= 40 || !strings.Contains(d.Line(), "requests a run would decide it")) {
			t.Errorf("undecided without a sample size: %+v: %s", d, d.Line())
		}
	}
	// The estimate: the half-width shrinks as 1/sqrt(n). +203% in
	// [+1.7%, +585%] needs its low half (201.3 points) under 193 points:
	// 40 x (201.3/193)^2 = 43.5 requests.
	if d := decide("p on e", row(2.03, 0.017, 5.85), rule); d.RequestsToDecide != 44 {
		t.Errorf("requests to decide %d, want 44", d.RequestsToDecide)
	}
	// A change on its threshold is never decided by more requests.
	if d := decide("p on e", row(0.1, 0.0, 0.2), rule); d.Outcome != Undecided || d.RequestsToDecide != -1 {
		t.Errorf("on the threshold: %+v", d)
	}
	// The probe's own delay widens the interval and does not shrink with
	// requests: a rise of +35% in [+21%, +50%] whose new run's probe was
	// stalled for a third of the baseline's p95 is not enough evidence,
	// and no number of requests decides it.
	starved := row(0.35, 0.21, 0.50)
	starved.BiasLow = 0.33
	if d := decide("p on e", starved, rule); d.Outcome != Undecided || d.RequestsToDecide != -1 || !strings.Contains(d.Why, "probe's own delay") {
		t.Errorf("a starved new run: %+v", d)
	}
	// Nor may a starved baseline pass a rise it could hide.
	hidden := row(0.01, -0.04, 0.06)
	hidden.BiasHigh = 0.2
	if d := decide("p on e", hidden, rule); d.Outcome != Undecided {
		t.Errorf("a starved baseline: %+v", d)
	}
	// A fall, for a rule on a fall.
	fall := Rule{Label: "goodput", Threshold: -0.05, text: "goodput<-5%"}
	g := Row{Metric: Metric{Name: "goodput"}, Change: -0.17, Low: -0.25, High: -0.09, BaseN: 200, NewN: 200}
	if d := decide("p on e", g, fall); d.Outcome != Failed {
		t.Errorf("goodput -17%% in [-25%%, -9%%] against <-5%%: %+v", d)
	}
}

func TestParseRules(t *testing.T) {
	for in, want := range map[string]string{
		"ttft.p96>+10%":  `no metric "ttft.p96"`,
		"ttft.p95>+10":   "relative change in percent",
		"ttft.p95=+10%":  "give METRIC>+N% or METRIC<-N%",
		"goodput<-five%": "is not a percentage",
		" , ":            "no rule",
	} {
		if _, err := ParseRules(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
	r, err := ParseRules("request_latency.p99>+12.5%,errors<-50%")
	if err != nil || len(r) != 2 || r[0].Threshold != 0.125 || !r[0].Above || r[1].Above || r[1].Threshold != -0.5 {
		t.Fatalf("%+v %v", r, err)
	}
}

// The bootstrap's order statistics, read from counts, are those of the
// resample sorted.
func TestOrderStatisticsFromCounts(t *testing.T) {
	sorted := []float64{1, 2, 3, 5, 8, 13}
	counts := []int32{0, 2, 1, 0, 3, 1}
	expanded := []float64{2, 2, 3, 8, 8, 8, 13}
	for _, st := range Stats {
		if got, want := ofCounts(sorted, counts, st), ofSorted(expanded, st); math.Abs(got-want) > 1e-12 {
			t.Errorf("%s: %v, want %v", st, got, want)
		}
	}
	var buf bytes.Buffer
	Text(&buf, "p on e", synthetic(1, 10, 100, 1, 1), synthetic(2, 10, 100, 1, 1), Compare(synthetic(1, 10, 100, 1, 1), synthetic(2, 10, 100, 1, 1), Options{Resamples: 50}))
	if !strings.Contains(buf.String(), "ttft.p95") {
		t.Errorf("table:\n%s", buf.String())
	}
}

// closedLoop is a closed-loop run of n requests at concurrency c that all
// succeed, each lasting a lognormal time around mean ms: its duration is
// what its requests' latencies add up to, as a real closed loop's is.
func closedLoop(seed uint64, n, c int, mean float64) *Run {
	rng := rand.New(rand.NewPCG(seed, 11))
	r := &Run{Dir: "closed", Summary: stats.Summary{Profile: "p", Endpoint: "e"}}
	start := time.Unix(0, 0)
	busy := 0.0
	for i := range n {
		lat := mean * math.Exp(0.5*rng.NormFloat64()-0.125)
		busy += lat
		r.Records = append(r.Records, records.Record{ID: uint64(i + 1), Outcome: "success", RequestLatencyMs: &lat, Good: true,
			Start: start.Add(time.Duration(busy / float64(c) * float64(time.Millisecond)))})
	}
	r.Summary.DurationSeconds = busy / float64(c) / 1000
	return r
}

// Two identical closed loops whose every request succeeds differ in
// throughput by how long their requests happened to take: 20 pairs fail
// no gate of 5% on it, while a 20% slower server fails it. Resampling the
// requests' outcomes alone gave such runs a zero-width interval, and
// every difference of more than 5% failed the gate.
func TestThroughputNoiseOfAClosedLoop(t *testing.T) {
	rules, err := ParseRules("throughput<-5%,goodput<-5%")
	if err != nil {
		t.Fatal(err)
	}
	wide := 0
	for i := range uint64(20) {
		a, b := closedLoop(2*i+1, 40, 2, 100), closedLoop(2*i+2, 40, 2, 100)
		rows := Compare(a, b, Options{Resamples: 500})
		if d := failed(Check("p on e", rows, rules)); len(d) != 0 {
			r := d[0].Row
			t.Errorf("pair %d: identical runs failed %s: %+.1f%% in [%+.1f%%, %+.1f%%]", i+1, d[0].Rule, 100*r.Change, 100*r.Low, 100*r.High)
		}
		if r := row(t, rows, "throughput"); r.Change < -0.05 {
			wide++
		}
	}
	if wide == 0 {
		t.Errorf("no pair differed by more than 5%%: the test would pass without resampling the runs' time")
	}
	// A 20% slower server fails the gate, or is not enough evidence
	// with a number of requests that then decides it.
	base, slower := closedLoop(100, 400, 2, 100), closedLoop(101, 400, 2, 120)
	need := 0
	for _, d := range Check("p on e", Compare(base, slower, Options{Resamples: 500}), rules) {
		switch {
		case d.Outcome == Undecided && d.RequestsToDecide > 400:
			need = max(need, d.RequestsToDecide)
			t.Logf("400 requests: %s", d.Line())
		case d.Outcome != Failed:
			t.Errorf("a 20%% slower server: %s", d.Line())
		}
	}
	if need > 0 {
		base, slower = closedLoop(102, 2*need, 2, 100), closedLoop(103, 2*need, 2, 120)
		for _, d := range Check("p on e", Compare(base, slower, Options{Resamples: 500}), rules) {
			if d.Outcome != Failed {
				t.Errorf("a 20%% slower server at %d requests, twice what was asked: %s", 2*need, d.Line())
			}
		}
	}
}

// Compare reads each run's probe delay into the rows' biases: a latency
// of the new run by its delay p99 over the baseline's value, the
// baseline's the other way; a rate by the delay's mean over the median
// request latency. A run without a reading (artifacts of an older
// tokenprobe) adds none.
func TestProbeDelayWidensTheGate(t *testing.T) {
	base, next := synthetic(1, 400, 100, 0.9, 40), synthetic(2, 400, 100, 0.9, 40)
	for _, r := range []*Run{base, next} {
		r.Summary.E2E.P50 = 1000
		for i := range r.Records {
			lat := 1000.0
			r.Records[i].RequestLatencyMs = &lat
		}
	}
	clean := Compare(base, next, Options{})
	if r := row(t, clean, "ttft.p95"); r.BiasLow != 0 || r.BiasHigh != 0 {
		t.Fatalf("no probe reading, biases %v %v", r.BiasLow, r.BiasHigh)
	}
	next.Summary.Probe = &stats.Probe{DelayP99Ms: 20, DelayMeanMs: 5}
	base.Summary.Probe = &stats.Probe{DelayP99Ms: 10, DelayMeanMs: 2}
	rows := Compare(base, next, Options{})
	p95 := row(t, rows, "ttft.p95")
	if want := 20 / p95.Base; math.Abs(p95.BiasLow-want) > 1e-9 || p95.BiasHigh <= 0 {
		t.Errorf("ttft.p95 biases %v %v, want %v low", p95.BiasLow, p95.BiasHigh, want)
	}
	tput := row(t, rows, "throughput")
	if want := (1 + tput.High) * 0.005; math.Abs(tput.BiasHigh-want) > 1e-9 {
		t.Errorf("throughput's high bias %v, want %v (the new run's mean delay over its median latency)", tput.BiasHigh, want)
	}
	// A rise of the new run's TTFT that its own delay could make is no
	// failure: 25% at the p95, with a delay a third of the baseline's p95.
	slow := synthetic(3, 400, 125, 0.9, 40)
	slow.Summary.Probe = &stats.Probe{DelayP99Ms: 40}
	rule := []Rule{{Label: "ttft.p95", Above: true, Threshold: 0.1, text: "ttft.p95>+10%"}}
	if d := Check("p on e", Compare(base, slow, Options{}), rule); len(d) != 1 || d[0].Outcome != Undecided {
		t.Errorf("a starved new run: %+v", d)
	}
	slow.Summary.Probe = nil
	if d := Check("p on e", Compare(base, slow, Options{}), rule); len(d) != 1 || d[0].Outcome != Failed {
		t.Errorf("a prompt new run: %+v", d)
	}
}
