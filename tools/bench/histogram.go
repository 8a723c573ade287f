// Package bench is the harness behind `make bench`: it measures what
// tokenprobe's client costs against a simulator in its own process, beside
// a floor client that only reads and counts, and k6.
package bench

import (
	"math"
	"sync/atomic"
	"time"
)

// Histogram records durations from many goroutines without locks or
// allocation: 1 µs buckets up to 1 ms, 10 µs buckets up to 10 ms, 100 µs
// buckets up to 100 ms, 1 ms buckets up to 10 s. Quantiles are read as the
// upper edge of their bucket, so they are never optimistic.
type Histogram struct {
	buckets [1000 + 900 + 900 + 9900 + 1]atomic.Uint64
	count   atomic.Uint64
	max     atomic.Int64
	min     atomic.Int64
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	h := &Histogram{}
	h.min.Store(math.MaxInt64)
	return h
}

func bucketOf(us int64) int {
	switch {
	case us < 0:
		return 0
	case us < 1000:
		return int(us)
	case us < 10_000:
		return 1000 + int(us-1000)/10
	case us < 100_000:
		return 1900 + int(us-10_000)/100
	case us < 10_000_000:
		return 2800 + int(us-100_000)/1000
	}
	return 12700
}

// upperOf is the largest duration bucket i holds.
func upperOf(i int) time.Duration {
	var us int64
	switch {
	case i < 1000:
		us = int64(i) + 1
	case i < 1900:
		us = 1000 + int64(i-1000+1)*10
	case i < 2800:
		us = 10_000 + int64(i-1900+1)*100
	case i < 12700:
		us = 100_000 + int64(i-2800+1)*1000
	default:
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(us) * time.Microsecond
}

// Observe records d. Negative durations (a clock step) count in the
// lowest bucket and in Min, where they show.
func (h *Histogram) Observe(d time.Duration) {
	h.buckets[bucketOf(d.Microseconds())].Add(1)
	h.count.Add(1)
	for v := h.max.Load(); int64(d) > v; v = h.max.Load() {
		if h.max.CompareAndSwap(v, int64(d)) {
			break
		}
	}
	for v := h.min.Load(); int64(d) < v; v = h.min.Load() {
		if h.min.CompareAndSwap(v, int64(d)) {
			break
		}
	}
}

// Count is the number of observations.
func (h *Histogram) Count() uint64 { return h.count.Load() }

// Max is the largest observation, 0 when there is none.
func (h *Histogram) Max() time.Duration {
	if h.count.Load() == 0 {
		return 0
	}
	return time.Duration(h.max.Load())
}

// Min is the smallest observation, 0 when there is none.
func (h *Histogram) Min() time.Duration {
	if h.count.Load() == 0 {
		return 0
	}
	return time.Duration(h.min.Load())
}

// Quantile returns the upper edge of the bucket holding quantile q, capped
// at Max; 0 when the histogram is empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	n := h.count.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	rank = max(rank, 1)
	var seen uint64
	for i := range h.buckets {
		seen += h.buckets[i].Load()
		if seen >= rank {
			return min(upperOf(i), h.Max())
		}
	}
	return h.Max()
}

// HistogramData is a histogram's counts, its non-empty buckets by index,
// as a client process reports them so that the harness can add up the
// histograms of a level's several processes (Add) and read quantiles of
// the whole, never of one process.
type HistogramData struct {
	Counts map[int]uint64 `json:"counts"`
	Min    int64          `json:"min_ns"`
	Max    int64          `json:"max_ns"`
}

// Data is h's counts.
func (h *Histogram) Data() *HistogramData {
	if h.Count() == 0 {
		return nil
	}
	d := &HistogramData{Counts: map[int]uint64{}, Min: h.min.Load(), Max: h.max.Load()}
	for i := range h.buckets {
		if n := h.buckets[i].Load(); n > 0 {
			d.Counts[i] = n
		}
	}
	return d
}

// Add adds another histogram's counts to h; nil adds nothing.
func (h *Histogram) Add(d *HistogramData) {
	if d == nil {
		return
	}
	for i, n := range d.Counts {
		if i >= 0 && i < len(h.buckets) {
			h.buckets[i].Add(n)
			h.count.Add(n)
		}
	}
	if d.Max > h.max.Load() {
		h.max.Store(d.Max)
	}
	if d.Min < h.min.Load() {
		h.min.Store(d.Min)
	}
}
