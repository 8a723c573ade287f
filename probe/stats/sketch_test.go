package stats

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// On a normal run's gaps (a floor of 10 ms with a long tail and some
// stalls), the sketch's percentiles are within 1% of the exact ones, and
// count, mean, extremes and deviation are exact.
func TestGapSketchAgreesWithExactPercentiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var g gapSketch
	var exact []float64
	for range 50000 {
		v := 10 + rng.ExpFloat64()*2
		if rng.IntN(200) == 0 {
			v += 300 * rng.Float64() // a stall
		}
		g.add(v)
		exact = append(exact, v)
	}
	got, want := g.dist(), Compute(exact)
	if got.Count != want.Count || math.Abs(got.Avg-want.Avg) > 1e-9*want.Avg || got.Min != want.Min || got.Max != want.Max ||
		math.Abs(got.Std-want.Std) > 1e-6*want.Std {
		t.Errorf("exact figures: %+v, want %+v", got, want)
	}
	for name, pair := range map[string][2]float64{"p50": {got.P50, want.P50}, "p75": {got.P75, want.P75}, "p90": {got.P90, want.P90},
		"p95": {got.P95, want.P95}, "p99": {got.P99, want.P99}} {
		if rel := math.Abs(pair[0]-pair[1]) / pair[1]; rel > 0.01 {
			t.Errorf("%s %.4f, exact %.4f: %.2f%% off", name, pair[0], pair[1], rel*100)
		}
	}
}

// Memory stays bounded whatever the number of gaps: two million of them
// (a server streaming a byte per chunk) cost the sketch its bins alone.
func TestGapSketchMemoryIsBounded(t *testing.T) {
	var g gapSketch
	g.add(1)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 2_000_000 {
		g.add(0.01 + float64(i%1000))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 1<<20 || g.n != 2_000_001 {
		t.Fatalf("the heap grew %d bytes for two million gaps (%d counted)", grew, g.n)
	}
}
