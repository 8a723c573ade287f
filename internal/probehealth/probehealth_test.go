package probehealth

import (
	"testing"
	"time"
)

// The buckets' bounds hold every delay: each bucket's upper end is at or
// above every delay put in it, and within 2% of the smallest one that
// goes to the next.
func TestBuckets(t *testing.T) {
	for _, d := range []time.Duration{0, time.Microsecond, minDelay, 11 * time.Microsecond, time.Millisecond, 7 * time.Millisecond, 211 * time.Millisecond, time.Second, time.Hour} {
		i := bucket(d)
		if upper(i) < d && i != nBuckets-1 {
			t.Errorf("%v in bucket %d, whose upper end is %v", d, i, upper(i))
		}
		if i > 0 && float64(upper(i-1)) > float64(d) {
			t.Errorf("%v in bucket %d, but bucket %d reaches %v", d, i, i-1, upper(i-1))
		}
		if i > 0 && i < nBuckets-1 && float64(upper(i)) > 1.0201*float64(d) {
			t.Errorf("%v: its bucket's upper end %v is over 2%% above it", d, upper(i))
		}
	}
}

// A window reads the delays recorded while it was open: quantiles from
// known counts, never under the delays put in.
func TestRead(t *testing.T) {
	var from, to snapshot
	for range 98 {
		to.counts[bucket(time.Millisecond)]++
	}
	to.counts[bucket(50*time.Millisecond)]++
	to.counts[bucket(200*time.Millisecond)]++
	from.counts[bucket(time.Millisecond)] = 10 // seen before the window
	to.counts[bucket(time.Millisecond)] += 10
	from.sum, to.sum = int64(10*time.Millisecond), int64(10*time.Millisecond+348*time.Millisecond)
	r := read(&from, &to)
	if r.Samples != 100 {
		t.Fatalf("samples %d, want 100", r.Samples)
	}
	within := func(got, want time.Duration) bool { return got >= want && float64(got) <= 1.0201*float64(want) }
	if !within(r.P50, time.Millisecond) || !within(r.P99, 50*time.Millisecond) || !within(r.Max, 200*time.Millisecond) || r.Mean != 3480*time.Microsecond {
		t.Errorf("p50 %v, p99 %v, max %v, mean %v: want 1 ms, 50 ms, 200 ms, 3.48 ms", r.P50, r.P99, r.Max, r.Mean)
	}
	if r := read(&to, &to); r.Samples != 0 || r.P99 != 0 {
		t.Errorf("an empty window: %+v", r)
	}
}

// The monitor runs while a window is open and sees about one wake-up a
// Tick; it stops with the last window, and a window opened after it saw
// nothing of the time between.
func TestWindowSeesItsWakeUps(t *testing.T) {
	w := Begin()
	inner := Begin() // windows overlap
	// Bounded by what is seen: wait until the monitor has woken a few
	// times, however slowly a busy machine schedules it.
	for sum(take())-sum(inner.from) < 1 {
		time.Sleep(Tick)
	}
	r := inner.End()
	if r.Samples < 1 {
		t.Errorf("the inner window saw %d wake-ups", r.Samples)
	}
	for sum(take())-sum(w.from) < 10 {
		time.Sleep(Tick)
	}
	r = w.End()
	if r.Samples < 10 || r.P99 < r.P50 || r.Max < r.P99 {
		t.Errorf("reading %+v", r)
	}
	if again := w.End(); again.Samples != 0 {
		t.Errorf("a second End read %+v", again)
	}
	monitor.mu.Lock()
	users := monitor.users
	monitor.mu.Unlock()
	if users != 0 {
		t.Errorf("%d users after every window ended", users)
	}
	before := sum(take())
	time.Sleep(3 * Tick)
	if after := sum(take()); after != before {
		t.Errorf("the monitor woke %d times with no window open", after-before)
	}
}

func sum(s *snapshot) uint64 {
	n := uint64(0)
	for _, c := range s.counts {
		n += c
	}
	return n
}

// A stall of the process shows as the delay of the wake-up it held back.
func TestStallShows(t *testing.T) {
	w := Begin()
	defer w.End()
	for sum(take())-sum(w.from) < 2 {
		time.Sleep(Tick)
	}
	stall(t, 100*time.Millisecond)
	for sum(take())-sum(w.from) < 4 {
		time.Sleep(Tick)
	}
	r := w.End()
	if r.Max < 50*time.Millisecond {
		t.Errorf("a 100 ms stall: max delay %v", r.Max)
	}
}

func TestCumulative(t *testing.T) {
	w := Begin()
	for sum(take())-sum(w.from) < 3 {
		time.Sleep(Tick)
	}
	w.End()
	n, s, b := Cumulative([]float64{0.001, 1000})
	if n < 3 || s < 0 || b[1000] != n || b[0.001] > n {
		t.Errorf("count %d, sum %v, buckets %v", n, s, b)
	}
}
