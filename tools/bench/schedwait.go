package bench

import (
	"math"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// SchedWait is how long a client process waited to be run during a level,
// on both sides of the runtime: its goroutines waiting runnable for one of
// the runtime's processors (Go's /sched/latencies:seconds), and its threads
// waiting runnable for a CPU (the kernel's schedstat run delay, a mean per
// time slice, as the kernel keeps no distribution of it). Set beside the
// open loop's dispatch lag, it says where a late send waited: a dispatch
// lag far above the goroutines' wait points to the time before the
// dispatcher was runnable, on the operating system's side.
type SchedWait struct {
	Goroutines *Quantiles `json:"goroutine_runnable"`
	// ThreadMeanUS is the threads' run-queue wait per time slice, in µs,
	// over ThreadSlices time slices.
	ThreadMeanUS float64 `json:"thread_run_delay_mean_us"`
	ThreadSlices int64   `json:"thread_slices"`
}

const schedLatencies = "/sched/latencies:seconds"

// schedSnapshot is what SchedWait is the difference of.
type schedSnapshot struct {
	counts  []uint64
	buckets []float64
	delayNS int64
	slices  int64
}

func takeSchedSnapshot() schedSnapshot {
	s := []metrics.Sample{{Name: schedLatencies}}
	metrics.Read(s)
	var snap schedSnapshot
	if s[0].Value.Kind() == metrics.KindFloat64Histogram {
		h := s[0].Value.Float64Histogram()
		snap.counts, snap.buckets = append([]uint64(nil), h.Counts...), h.Buckets
	}
	snap.delayNS, snap.slices = threadRunDelay("/proc/self/task")
	return snap
}

// schedWaitSince is the SchedWait between then and now.
func schedWaitSince(then schedSnapshot) *SchedWait {
	now := takeSchedSnapshot()
	w := &SchedWait{ThreadSlices: now.slices - then.slices}
	if w.ThreadSlices > 0 {
		w.ThreadMeanUS = float64(now.delayNS-then.delayNS) / float64(w.ThreadSlices) / 1e3
	}
	if len(now.counts) == len(then.counts) {
		diff := make([]uint64, len(now.counts))
		for i := range diff {
			diff[i] = now.counts[i] - then.counts[i]
		}
		w.Goroutines = histogramQuantiles(diff, now.buckets)
	}
	return w
}

// histogramQuantiles reads p50, p99 and max off a runtime/metrics
// histogram (counts[i] between buckets[i] and buckets[i+1]), each as the
// upper bound of its bucket (its lower bound for the last, unbounded one):
// never less than the true figure, by at most the bucket's width.
func histogramQuantiles(counts []uint64, buckets []float64) *Quantiles {
	var total uint64
	for _, c := range counts {
		total += c
	}
	if total == 0 {
		return nil
	}
	bound := func(i int) float64 {
		b := buckets[i+1]
		if math.IsInf(b, 1) {
			b = buckets[i]
		}
		return b * float64(time.Second/time.Microsecond)
	}
	at := func(q float64) float64 {
		need := uint64(math.Ceil(q * float64(total)))
		var seen uint64
		for i, c := range counts {
			if seen += c; seen >= need {
				return bound(i)
			}
		}
		return bound(len(counts) - 1)
	}
	last := len(counts) - 1
	for counts[last] == 0 {
		last--
	}
	return &Quantiles{P50: at(0.5), P99: at(0.99), Max: bound(last)}
}

// threadRunDelay sums the run-queue wait (ns) and the time slices of every
// thread under dir (a /proc/<pid>/task). Threads that ended are not
// counted; Go's rarely end. Zeros where schedstat is not available.
func threadRunDelay(dir string) (delayNS, slices int64) {
	tasks, _ := os.ReadDir(dir)
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 3 {
			continue
		}
		d, err1 := strconv.ParseInt(f[1], 10, 64)
		n, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 == nil && err2 == nil {
			delayNS, slices = delayNS+d, slices+n
		}
	}
	return delayNS, slices
}
