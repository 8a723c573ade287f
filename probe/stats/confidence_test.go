package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Wilson's interval against values computed by hand from its formula
// (and by statsmodels' proportion_confint(method="wilson")).
func TestWilson(t *testing.T) {
	for _, c := range []struct {
		k, n      int
		low, high float64
	}{
		{5, 5, 0.5655, 1},
		{15, 15, 0.7961, 1},
		{35, 35, 0.9011, 1},
		{8, 96, 0.0428, 0.1558},
		{0, 10, 0, 0.2775},
		{45, 50, 0.7864, 0.9565},
	} {
		iv := Wilson(c.k, c.n)
		if math.Abs(iv.Low-c.low) > 5e-4 || math.Abs(iv.High-c.high) > 5e-4 {
			t.Errorf("Wilson(%d, %d) = [%.4f, %.4f], want [%.4f, %.4f]", c.k, c.n, iv.Low, iv.High, c.low, c.high)
		}
	}
}

// The complaint that started this: five good requests "met" a 90%
// objective. They are not enough evidence, and the verdict says how many
// would be; 35 of 35 are.
func TestJudgeNeedsEvidence(t *testing.T) {
	e := Judge(5, 5, 0, 0.9)
	if e.Outcome != Undecided || e.RequestsToDecide != 35 {
		t.Errorf("5 of 5 against 90%%: %+v, want not enough evidence, 35 requests to decide", e)
	}
	if e := Judge(35, 35, 0, 0.9); e.Outcome != Met {
		t.Errorf("35 of 35 against 90%%: %+v", e)
	}
	if e := Judge(8, 96, 0, 0.9); e.Outcome != Missed {
		t.Errorf("8 of 96 against 90%%: %+v", e)
	}
	// 8 of 10 against 90%: the interval holds it; at 80% a run would need
	// more requests to show the miss.
	e = Judge(8, 10, 0, 0.9)
	if e.Outcome != Undecided || e.RequestsToDecide <= 10 {
		t.Errorf("8 of 10 against 90%%: %+v", e)
	}
	if got := Wilson(int(math.Round(0.8*float64(e.RequestsToDecide))), e.RequestsToDecide); got.High >= 0.9 {
		t.Errorf("at %d requests the interval %+v still holds 90%%", e.RequestsToDecide, got)
	}
	// An attainment on its objective is never decided.
	if e := Judge(9, 10, 0, 0.9); e.RequestsToDecide != -1 {
		t.Errorf("9 of 10 against 90%%: %+v", e)
	}
	// A miss the probe's own delay could explain is no miss: 8 of 96 good,
	// but 80 of the misses within the probe's delay.
	if e := Judge(8, 96, 80, 0.9); e.Outcome != Undecided || e.RequestsToDecide != -1 || e.Why == "" {
		t.Errorf("8 of 96 with 80 explained by the probe: %+v", e)
	}
	// ... and never turns a pass into a miss.
	if e := Judge(96, 96, 0, 0.9); e.Outcome != Met {
		t.Errorf("96 of 96: %+v", e)
	}
	if e := Judge(0, 0, 0, 0.9); e.Outcome != Undecided {
		t.Errorf("no request: %+v", e)
	}
}

func TestRequestsToShow(t *testing.T) {
	for obj, want := range map[float64]int{0.9: 35, 0.95: 73, 0.99: 381} {
		n := RequestsToShow(obj)
		if n != want || Wilson(n, n).Low < obj || Wilson(n-1, n-1).Low >= obj {
			t.Errorf("RequestsToShow(%v) = %d, want %d", obj, n, want)
		}
	}
}

// The order-statistic interval of a quantile covers the true quantile
// about 95% of the time, whatever the distribution: drawn here from an
// exponential (a latency's long right tail) at several sample sizes,
// each size's coverage over 2,000 samples.
func TestQuantileIntervalCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		n int
		p float64
	}{{40, 0.5}, {100, 0.95}, {400, 0.95}, {8000, 0.99}} {
		truth := -math.Log(1 - c.p) // the exponential's quantile
		covered, bounded := 0, 0
		const trials = 2000
		xs := make([]float64, c.n)
		for range trials {
			for i := range xs {
				xs[i] = rng.ExpFloat64()
			}
			slices.Sort(xs)
			iv, ok := QuantileInterval(xs, c.p)
			if !ok {
				continue
			}
			bounded++
			if iv.Low <= truth && truth <= iv.High {
				covered++
			}
		}
		if bounded != trials {
			t.Errorf("n=%d p=%v: bounded in %d of %d", c.n, c.p, bounded, trials)
			continue
		}
		if cov := float64(covered) / trials; cov < 0.93 || cov > 0.99 {
			t.Errorf("n=%d p=%v: coverage %.3f, want about 0.95", c.n, c.p, cov)
		}
	}
	// 40 values cannot bound a p95 from above.
	xs := make([]float64, 40)
	for i := range xs {
		xs[i] = float64(i)
	}
	if _, ok := QuantileInterval(xs, 0.95); ok {
		t.Error("40 values bound p95 from above")
	}
}
