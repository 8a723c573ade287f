package bench

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistogramQuantilesAreNeverOptimistic(t *testing.T) {
	h := NewHistogram()
	rng := rand.New(rand.NewPCG(1, 2))
	var all []time.Duration
	for range 100_000 {
		d := time.Duration(rng.ExpFloat64() * float64(2*time.Millisecond))
		all = append(all, d)
		h.Observe(d)
	}
	slices.Sort(all)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := all[int(q*float64(len(all)))-1]
		got := h.Quantile(q)
		// At most one bucket above: 1 µs under 1 ms, 10 µs under 10 ms, 100 µs under 100 ms.
		width := time.Microsecond
		switch {
		case exact >= 10*time.Millisecond:
			width = 100 * time.Microsecond
		case exact >= time.Millisecond:
			width = 10 * time.Microsecond
		}
		if got < exact || got > exact+width {
			t.Errorf("q%v = %v, exact %v (bucket width %v)", q, got, exact, width)
		}
	}
	if h.Max() != all[len(all)-1] || h.Min() != all[0] || h.Count() != uint64(len(all)) {
		t.Errorf("max %v min %v count %d, want %v %v %d", h.Max(), h.Min(), h.Count(), all[len(all)-1], all[0], len(all))
	}
}

func TestHistogramEdges(t *testing.T) {
	h := NewHistogram()
	if h.Quantile(0.99) != 0 || h.Max() != 0 || h.Min() != 0 {
		t.Fatal("an empty histogram must read 0")
	}
	for _, d := range []time.Duration{-time.Millisecond, 999 * time.Microsecond, time.Millisecond, 20 * time.Second} {
		h.Observe(d)
	}
	if h.Min() != -time.Millisecond || h.Max() != 20*time.Second {
		t.Errorf("min %v max %v", h.Min(), h.Max())
	}
	if got := h.Quantile(1); got != 20*time.Second {
		t.Errorf("q1 = %v, want the max", got)
	}
	if got := h.Quantile(0.5); got != time.Millisecond {
		t.Errorf("q0.5 = %v, want 1ms (the upper edge of 999us's bucket)", got)
	}
}

// A level measured in several processes reads its quantiles from their
// histograms added up: the same as one histogram of every observation,
// after a round trip through JSON as the client processes report them.
func TestHistogramsAddUp(t *testing.T) {
	whole, parts := NewHistogram(), []*Histogram{NewHistogram(), NewHistogram(), NewHistogram()}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 30_000 {
		// Each part its own distribution, so that no part alone is the whole.
		d := time.Duration(rng.ExpFloat64() * float64(time.Duration(i%3+1)*time.Millisecond))
		whole.Observe(d)
		parts[i%3].Observe(d)
	}
	sum := NewHistogram()
	for _, p := range parts {
		b, err := json.Marshal(p.Data())
		if err != nil {
			t.Fatal(err)
		}
		var d HistogramData
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		sum.Add(&d)
	}
	for _, q := range []float64{0.5, 0.99, 0.999} {
		if sum.Quantile(q) != whole.Quantile(q) {
			t.Errorf("q%v: added %v, whole %v", q, sum.Quantile(q), whole.Quantile(q))
		}
	}
	if sum.Count() != whole.Count() || sum.Max() != whole.Max() || sum.Min() != whole.Min() {
		t.Errorf("added: %d, %v..%v; whole: %d, %v..%v", sum.Count(), sum.Min(), sum.Max(), whole.Count(), whole.Min(), whole.Max())
	}
	if parts[0].Quantile(0.99) == whole.Quantile(0.99) {
		t.Error("one part's p99 is the whole's: the test cannot tell adding from taking one")
	}
	sum.Add(nil)
	if NewHistogram().Data() != nil {
		t.Error("an empty histogram's data is not nil")
	}
}
