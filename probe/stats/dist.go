// Package stats summarises a run from its exact per-request values, as
// docs/METRICS.md section 4 requires: percentiles are computed from every
// value, never from histogram buckets, and with the same interpolation as
// NVIDIA AIPerf (numpy's default, linear), so figures compare one to one.
package stats

import (
	"math"
	"slices"
)

// Dist summarises one metric's values.
type Dist struct {
	Count int     `json:"count"`
	Avg   float64 `json:"avg"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
	Std   float64 `json:"std"`
	P50   float64 `json:"p50"`
	P75   float64 `json:"p75"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	// P50Interval and P95Interval are the 95% intervals of P50 and P95,
	// from the values' order statistics (QuantileInterval); absent where
	// too few values bound one (a p95's upper end needs 72).
	P50Interval Interval `json:"p50_interval,omitzero"`
	P95Interval Interval `json:"p95_interval,omitzero"`
}

// Compute summarises values; it sorts them in place.
func Compute(values []float64) Dist {
	n := len(values)
	if n == 0 {
		return Dist{}
	}
	slices.Sort(values)
	var sum float64
	for _, v := range values {
		sum += v
	}
	mean := sum / float64(n)
	var sq float64
	for _, v := range values {
		sq += (v - mean) * (v - mean)
	}
	d := Dist{
		Count: n, Avg: mean, Min: values[0], Max: values[n-1],
		Std: math.Sqrt(sq / float64(n)), // population std, as numpy.std
		P50: Percentile(values, 50), P75: Percentile(values, 75), P90: Percentile(values, 90),
		P95: Percentile(values, 95), P99: Percentile(values, 99),
	}
	if iv, ok := QuantileInterval(values, 0.5); ok {
		d.P50Interval = iv
	}
	if iv, ok := QuantileInterval(values, 0.95); ok {
		d.P95Interval = iv
	}
	return d
}

// Percentile returns the p-th percentile of sorted values with linear
// interpolation between closest ranks (numpy.percentile's default).
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	rank := p / 100 * float64(n-1)
	lo := int(math.Floor(rank))
	hi := int(math.Ceil(rank))
	return sorted[lo] + (sorted[hi]-sorted[lo])*(rank-float64(lo))
}
