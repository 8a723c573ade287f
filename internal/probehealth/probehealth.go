// Package probehealth measures how promptly the probe's own process runs,
// so that a verdict can tell a slow server from a starved probe.
//
// Every timestamp the probe takes is taken by a goroutine that had to be
// scheduled first: when the host is busy (other processes at the same
// priority, a noisy neighbour, a throttled cgroup, a hypervisor taking
// the CPU), a chunk that arrived on time is stamped late, and the server
// is blamed for the probe's wait. A goroutine here sleeps a Tick at a
// time while any run goes and records how late each wake-up came: the
// delay any other timestamp of the process could have had at that
// moment. A run reads the distribution of that delay over its own
// window (Begin, End); /metrics exports it whole (Collector).
package probehealth

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/steal"
)

// Tick is how often the monitor wakes while a run goes: 100 wake-ups a
// second, a few microseconds of CPU each. A stall of the process longer
// than a Tick is always seen; a shorter one in proportion to its length.
const Tick = 10 * time.Millisecond

// The delay's buckets: logarithmic, 2% wide, from 10 µs to past 100 s,
// so that a quantile read from them is within 2% of the delay's.
const (
	minDelay = 10 * time.Microsecond
	growth   = 1.02
	nBuckets = 820 // log(1e7) / log(1.02) = 814: 100 s and beyond in the last
)

var logGrowth = math.Log(growth)

// bucket is the index of a delay: 0 holds every delay under minDelay.
func bucket(d time.Duration) int {
	if d <= minDelay {
		return 0
	}
	i := 1 + int(math.Log(float64(d)/float64(minDelay))/logGrowth)
	return min(i, nBuckets-1)
}

// upper is the largest delay bucket i holds.
func upper(i int) time.Duration {
	return time.Duration(float64(minDelay) * math.Pow(growth, float64(i)))
}

// monitor is the process's one: its counts only grow.
var monitor struct {
	mu     sync.Mutex
	users  int
	stop   chan struct{}
	done   chan struct{}
	counts [nBuckets]atomic.Uint64
	sum    atomic.Int64 // nanoseconds
}

// acquire starts the monitor's goroutine for its first user.
func acquire() {
	monitor.mu.Lock()
	defer monitor.mu.Unlock()
	monitor.users++
	if monitor.users > 1 {
		return
	}
	monitor.stop, monitor.done = make(chan struct{}), make(chan struct{})
	go watch(monitor.stop, monitor.done)
}

// release stops it after its last.
func release() {
	monitor.mu.Lock()
	defer monitor.mu.Unlock()
	monitor.users--
	if monitor.users > 0 {
		return
	}
	close(monitor.stop)
	<-monitor.done
}

func watch(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTimer(Tick)
	defer t.Stop()
	due := time.Now().Add(Tick)
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		now := time.Now()
		late := max(now.Sub(due), 0)
		monitor.counts[bucket(late)].Add(1)
		monitor.sum.Add(int64(late))
		due = now.Add(Tick)
		t.Reset(Tick)
	}
}

// snapshot is the monitor's counts at one moment, and the sum of the
// delays (ns) they count.
type snapshot struct {
	counts [nBuckets]uint64
	sum    int64
}

func take() *snapshot {
	var s snapshot
	for i := range s.counts {
		s.counts[i] = monitor.counts[i].Load()
	}
	s.sum = monitor.sum.Load()
	return &s
}

// Window is the monitor's view of one run: Begin it when the run starts,
// End it when the run ends. Windows overlap freely.
type Window struct {
	from  *snapshot
	steal steal.Meter
	once  sync.Once
}

// Begin starts a window, and the monitor with it if no other window is
// open.
func Begin() *Window {
	acquire()
	return &Window{from: take(), steal: steal.Start()}
}

// Reading is the probe's delay over a window.
type Reading struct {
	// Samples is the wake-ups the window saw: about one a Tick.
	Samples int
	// P50, P99 and Max are the delay's, each the upper end of its 2%
	// bucket (never under the truth); Mean is its average.
	P50, P99, Max, Mean time.Duration
	// StealPercent is the share of the machine's CPU the hypervisor gave
	// other tenants over the window; -1 where the kernel does not say.
	StealPercent float64
}

// End closes the window and reads it; it stops the monitor if no other
// window is open. A second End reads nothing.
func (w *Window) End() Reading {
	var r Reading
	w.once.Do(func() {
		to := take()
		release()
		r = read(w.from, to)
		r.StealPercent = w.steal.Percent()
	})
	return r
}

func read(from, to *snapshot) Reading {
	var d [nBuckets]uint64
	total := uint64(0)
	for i := range d {
		d[i] = to.counts[i] - from.counts[i]
		total += d[i]
	}
	r := Reading{Samples: int(total)}
	if total == 0 {
		return r
	}
	r.Mean = time.Duration((to.sum - from.sum) / int64(total))
	quantile := func(q float64) time.Duration {
		rank := uint64(math.Ceil(q * float64(total)))
		seen := uint64(0)
		for i, c := range d {
			seen += c
			if seen >= rank && c > 0 {
				return upper(i)
			}
		}
		return upper(nBuckets - 1)
	}
	r.P50, r.P99 = quantile(0.5), quantile(0.99)
	for i := nBuckets - 1; i >= 0; i-- {
		if d[i] > 0 {
			r.Max = upper(i)
			break
		}
	}
	return r
}

// Cumulative is every delay the monitor has seen since the process
// started, as a Prometheus histogram's: the count, the sum in seconds and
// the count at or under each of bounds (seconds). A delay is counted
// under a bound only when its whole 2% bucket is, so the histogram never
// shows a delay as shorter than it was.
func Cumulative(bounds []float64) (count uint64, sum float64, buckets map[float64]uint64) {
	s := take()
	buckets = make(map[float64]uint64, len(bounds))
	for i, c := range s.counts {
		count += c
		up := upper(i).Seconds()
		for _, b := range bounds {
			if up <= b {
				buckets[b] += c
			}
		}
	}
	return count, time.Duration(s.sum).Seconds(), buckets
}
