package bench

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// The quantiles of a runtime histogram are bucket upper bounds: never
// below the true figure, and the unbounded last bucket reads as its lower
// bound.
func TestHistogramQuantilesReadRuntimeBuckets(t *testing.T) {
	buckets := []float64{0, 1e-6, 1e-5, 1e-4, 1e-3, math.Inf(1)} // seconds
	cases := []struct {
		counts []uint64
		want   *Quantiles
	}{
		{[]uint64{0, 0, 0, 0, 0}, nil},
		{[]uint64{98, 1, 1, 0, 0}, &Quantiles{P50: 1, P99: 10, Max: 100}},
		{[]uint64{0, 50, 49, 0, 1}, &Quantiles{P50: 10, P99: 100, Max: 1000}},
		{[]uint64{0, 0, 0, 0, 7}, &Quantiles{P50: 1000, P99: 1000, Max: 1000}},
	}
	for _, c := range cases {
		got := histogramQuantiles(c.counts, buckets)
		if (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
			t.Errorf("histogramQuantiles(%v) = %+v, want %+v", c.counts, got, c.want)
		}
	}
}

// threadRunDelay sums the second and third schedstat fields of every task
// and skips what it cannot read.
func TestThreadRunDelaySumsEveryThread(t *testing.T) {
	dir := t.TempDir()
	for name, stat := range map[string]string{"101": "5000 300 7\n", "102": "1 2000 3\n", "103": "garbage\n"} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "schedstat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "104"), 0o755); err != nil { // a thread that ended
		t.Fatal(err)
	}
	if d, n := threadRunDelay(dir); d != 2300 || n != 10 {
		t.Errorf("threadRunDelay = %d ns over %d slices, want 2300 over 10", d, n)
	}
	if d, n := threadRunDelay(filepath.Join(dir, "none")); d != 0 || n != 0 {
		t.Errorf("a missing directory gave %d, %d", d, n)
	}
}
