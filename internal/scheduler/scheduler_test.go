package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func newFake() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{c.now.Add(d), ch})
	return ch
}

// advanceTo moves time to t and fires the timers that are due.
func (c *fakeClock) advanceTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(t) {
			w.ch <- t
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

// nextDue is the earliest pending timer, once n timers are pending.
func (c *fakeClock) nextDue(t *testing.T, n int) time.Time {
	t.Helper()
	var due time.Time
	eventually(t, fmt.Sprintf("%d pending timers", n), func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.waiters) < n {
			return false
		}
		due = c.waiters[0].at
		for _, w := range c.waiters {
			if w.at.Before(due) {
				due = w.at
			}
		}
		return true
	})
	return due
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

type counts struct {
	mu    sync.Mutex
	skips map[string]map[string]int
}

func (c *counts) hooks() Hooks {
	c.skips = map[string]map[string]int{}
	return Hooks{Skipped: func(key, reason string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.skips[key] == nil {
			c.skips[key] = map[string]int{}
		}
		c.skips[key][reason]++
	}}
}

func (c *counts) get(key, reason string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.skips[key][reason]
}

// blocking is a run that holds until released.
type blocking struct {
	started  atomic.Int64
	finished atomic.Int64
	release  chan struct{}
	usage    Usage
	aborted  atomic.Bool
	triggers chan Trigger
}

func newBlocking() *blocking {
	return &blocking{release: make(chan struct{}, 100), triggers: make(chan Trigger, 100)}
}

func (b *blocking) run(ctx context.Context, t Trigger) Ran {
	select {
	case b.triggers <- t:
	default:
	}
	b.started.Add(1)
	defer b.finished.Add(1)
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return Ran{Usage: b.usage, Aborted: b.aborted.Load()}
}

func TestTicksOffsetsAndJitter(t *testing.T) {
	every := 5 * time.Minute
	now := time.Unix(1_700_000_123, 456)
	offsets := map[time.Duration]bool{}
	for i := range 1000 {
		key := fmt.Sprintf("profile-%d/endpoint", i)
		off := Offset(key, every)
		if off < 0 || off >= every || Offset(key, every) != off {
			t.Fatalf("offset %v of %s is not a stable place in %v", off, key, every)
		}
		offsets[off/time.Minute] = true
		next := NextTick(now, every, off)
		if !next.After(now) || next.Sub(now) > every || (next.Sub(time.Unix(0, 0))-off)%every != 0 {
			t.Fatalf("next tick %v after %v (offset %v)", next, now, off)
		}
	}
	if len(offsets) != 5 {
		t.Errorf("1000 jobs fell into %d of the 5 minutes of the interval", len(offsets))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		if j := JitterFor(rng, 10*time.Second); j < 0 || j >= 10*time.Second {
			t.Fatalf("jitter %v outside [0, 10s)", j)
		}
	}
}

func TestWindow(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	w := &Window{Start: 22 * time.Hour, End: 6 * time.Hour, Loc: berlin} // "22:00-06:00", Europe/Berlin
	at := func(h, m int) time.Time { return time.Date(2026, 1, 15, h, m, 0, 0, berlin) }
	for _, c := range []struct {
		t    time.Time
		want bool
	}{{at(23, 0), true}, {at(5, 59), true}, {at(6, 0), false}, {at(12, 0), false}, {at(22, 0), true}} {
		if w.Contains(c.t) != c.want {
			t.Errorf("%v: %v", c.t, !c.want)
		}
	}
}

func TestNoOverlapAndSkipsCounted(t *testing.T) {
	clk, c := newFake(), &counts{}
	s := New(clk, 0, c.hooks())
	defer s.Stop()
	b := newBlocking()
	s.Add(Job{Key: "p/e", Endpoint: "e", Spec: Spec{Every: 10 * time.Second}, Run: b.run})

	clk.advanceTo(clk.nextDue(t, 1))
	eventually(t, "first run", func() bool { return b.started.Load() == 1 })
	st, _ := s.State("p/e")
	if !st.Running {
		t.Fatal("state does not say running")
	}
	// The next tick finds the run still going: skipped, counted.
	clk.advanceTo(clk.nextDue(t, 1))
	eventually(t, "overlap skip", func() bool { return c.get("p/e", SkipOverlap) == 1 })
	if b.started.Load() != 1 {
		t.Fatal("a second run started on top of the first")
	}
	if err := s.RunNow("p/e", 0); !errors.Is(err, ErrBusy) {
		t.Fatalf("RunNow while running: %v", err)
	}
	b.release <- struct{}{}
	eventually(t, "first run to end", func() bool { return b.finished.Load() == 1 })
	clk.advanceTo(clk.nextDue(t, 1))
	eventually(t, "second run", func() bool { return b.started.Load() == 2 })
	b.release <- struct{}{}
}

func TestBudgetPausesAndResumes(t *testing.T) {
	clk, c := newFake(), &counts{}
	s := New(clk, 0, c.hooks())
	defer s.Stop()
	b := newBlocking()
	b.usage = Usage{Requests: 60}
	for range 20 {
		b.release <- struct{}{}
	}
	s.Add(Job{Key: "p/e", Endpoint: "e", Spec: Spec{Every: 10 * time.Minute, RequestsPerHour: 100}, Run: b.run})

	tick := func() {
		clk.advanceTo(clk.nextDue(t, 1))
	}
	tick()
	eventually(t, "run 1", func() bool { return b.finished.Load() == 1 })
	first := clk.Now()
	tick()
	eventually(t, "run 2", func() bool { return b.finished.Load() == 2 })
	// 120 requests in the last hour: paused until the first run is an
	// hour old.
	for clk.Now().Before(first.Add(50 * time.Minute)) {
		tick()
	}
	eventually(t, "budget skips", func() bool { return c.get("p/e", SkipBudget) == 4 })
	if st, _ := s.State("p/e"); st.Paused == "" || b.started.Load() != 2 {
		t.Fatalf("not paused: %+v, %d runs", st, b.started.Load())
	}
	tick() // an hour after the first run: 60 requests in the window
	eventually(t, "run 3 after the budget recovers", func() bool { return b.started.Load() == 3 })
	if st, _ := s.State("p/e"); st.Paused != "" {
		t.Fatalf("still paused: %+v", st)
	}
}

// TestCostBudgetPausesForADay: runs of 0.6 against a budget of 1
// a day: two run, the third tick is skipped, and the job runs again once
// the first run is a day old, not an hour.
func TestCostBudgetPausesForADay(t *testing.T) {
	clk, c := newFake(), &counts{}
	s := New(clk, 0, c.hooks())
	defer s.Stop()
	b := newBlocking()
	b.usage = Usage{Requests: 1, Cost: 0.6}
	for range 20 {
		b.release <- struct{}{}
	}
	s.Add(Job{Key: "p/e", Endpoint: "e", Spec: Spec{Every: 6 * time.Hour, MaxCostPerDay: 1}, Run: b.run})
	tick := func() { clk.advanceTo(clk.nextDue(t, 1)) }
	tick()
	eventually(t, "run 1", func() bool { return b.finished.Load() == 1 })
	first := clk.Now()
	tick()
	eventually(t, "run 2", func() bool { return b.finished.Load() == 2 })
	// 1.2 spent in the last day: paused until the first run is a day old,
	// far past the hour an hourly budget looks back.
	for clk.Now().Before(first.Add(23 * time.Hour)) {
		tick()
	}
	eventually(t, "cost budget skips", func() bool { return c.get("p/e", SkipBudget) == 2 })
	if st, _ := s.State("p/e"); st.Paused != "daily cost budget spent" || b.started.Load() != 2 {
		t.Fatalf("not paused: %+v, %d runs", st, b.started.Load())
	}
	tick() // a day after the first run: 0.6 in the window
	eventually(t, "run 3 after the day", func() bool { return b.started.Load() == 3 })
}

func TestMaxConcurrentRuns(t *testing.T) {
	clk, c := newFake(), &counts{}
	s := New(clk, 1, c.hooks())
	defer s.Stop()
	a, b := newBlocking(), newBlocking()
	spec := Spec{Every: time.Minute}
	s.Add(Job{Key: "a/e1", Endpoint: "e1", Spec: spec, Run: a.run})
	s.Add(Job{Key: "b/e2", Endpoint: "e2", Spec: spec, Run: b.run})
	clk.advanceTo(clk.nextDue(t, 2).Add(time.Minute - time.Nanosecond)) // past both ticks
	eventually(t, "one start and one skip", func() bool {
		return a.started.Load()+b.started.Load() == 1 && c.get("a/e1", SkipMaxConcurrent)+c.get("b/e2", SkipMaxConcurrent) == 1
	})
	a.release <- struct{}{}
	b.release <- struct{}{}
}

func TestExclusiveRunsAlone(t *testing.T) {
	clk, c := newFake(), &counts{}
	s := New(clk, 0, c.hooks())
	defer s.Stop()
	light, heavy := newBlocking(), newBlocking()
	s.Add(Job{Key: "light/e", Endpoint: "e", Spec: Spec{Every: time.Minute}, Run: light.run})
	s.Add(Job{Key: "heavy/e", Endpoint: "e", Spec: Spec{Every: time.Minute, Exclusive: true}, Run: heavy.run})
	s.Add(Job{Key: "other/f", Endpoint: "f", Spec: Spec{Every: time.Minute}, Run: newBlocking().run})
	clk.advanceTo(clk.nextDue(t, 3).Add(time.Minute - time.Nanosecond))
	eventually(t, "exactly one of the two on endpoint e", func() bool {
		return light.started.Load()+heavy.started.Load() == 1 && c.get("light/e", SkipExclusive)+c.get("heavy/e", SkipExclusive) == 1
	})
	light.release <- struct{}{}
	heavy.release <- struct{}{}
}

// Jobs that find their endpoint held wait in line for it: when the run
// holding it ends the first in line runs at once, and a job that ticks
// again meanwhile goes behind those already waiting, so that one that
// runs long and often (the demo's staircase) starves no other.
func TestExclusiveJobsTakeTurns(t *testing.T) {
	clk, c := newFake(), &counts{}
	s := New(clk, 0, c.hooks())
	defer s.Stop()
	runs := map[string]*blocking{"a/e": newBlocking(), "b/e": newBlocking(), "c/e": newBlocking()}
	for key, b := range runs {
		s.Add(Job{Key: key, Endpoint: "e", Spec: Spec{Every: time.Minute, Exclusive: true}, Run: b.run})
	}
	started := func(want int64) (keys []string) {
		for key, b := range runs {
			if b.started.Load() == want {
				keys = append(keys, key)
			}
		}
		return keys
	}
	total := func() (n int64) {
		for _, b := range runs {
			n += b.started.Load()
		}
		return n
	}
	// Every job ticks once: one runs, two wait.
	clk.advanceTo(clk.nextDue(t, 3).Add(time.Minute - time.Nanosecond))
	eventually(t, "one run and two skipped ticks", func() bool {
		return total() == 1 && c.get("a/e", SkipExclusive)+c.get("b/e", SkipExclusive)+c.get("c/e", SkipExclusive) == 2
	})
	x := started(1)[0]
	// Its run ends: the first in line runs without waiting for a tick.
	runs[x].release <- struct{}{}
	eventually(t, "the first waiting job to run when the endpoint frees", func() bool { return total() == 2 })
	var y, z string
	for key, b := range runs {
		switch {
		case key != x && b.started.Load() == 1:
			y = key
		case key != x:
			z = key
		}
	}
	// Every job ticks again while y runs: x goes behind z.
	xSkips := c.get(x, SkipExclusive)
	clk.advanceTo(clk.nextDue(t, 3).Add(time.Minute - time.Nanosecond))
	eventually(t, x+"'s tick to be skipped", func() bool { return c.get(x, SkipExclusive) == xSkips+1 })
	runs[y].release <- struct{}{}
	eventually(t, z+", which waited longest, to run", func() bool { return runs[z].started.Load() == 1 })
	if n := runs[x].started.Load(); n != 1 {
		t.Fatalf("%s ran %d times before %s ran once", x, n, z)
	}
	runs[z].release <- struct{}{}
	eventually(t, x+" to run once "+z+" is done", func() bool { return runs[x].started.Load() == 2 })
	runs[x].release <- struct{}{}
}

// A job woken for the run it was owed, which then runs on its own tick
// instead, keeps no wake-up for later: it would start a second run out
// of schedule.
func TestAWakeUpIsNotKeptPastItsRun(t *testing.T) {
	clk := newFake()
	s := New(clk, 0, Hooks{})
	defer s.Stop()
	b := newBlocking()
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	jb := &job{Job: Job{Key: "x/e", Endpoint: "e", Spec: Spec{Every: time.Minute, Exclusive: true}, Run: b.run}, ctx: ctx, owed: make(chan struct{}, 1)}
	s.mu.Lock()
	s.endpoints["e"] = &sync.RWMutex{}
	s.wait(jb)
	s.mu.Unlock()
	s.handOn("e") // the endpoint freed: x is owed a run
	done, skipped := s.tick(jb, clk.Now(), Trigger{})
	if done == nil {
		t.Fatalf("the tick did not run: %s", skipped)
	}
	if n := len(jb.owed); n != 0 {
		t.Errorf("%d wake-ups kept after the run started", n)
	}
	b.release <- struct{}{}
	<-done
}

// A job first in line that will not run for a reason of its own (its
// window has closed) holds back no other.
func TestAWaitingJobThatCannotRunStepsAside(t *testing.T) {
	clk, c := newFake(), &counts{}
	s := New(clk, 0, c.hooks())
	defer s.Stop()
	now := clk.Now().UTC()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	start := now.Sub(day) - time.Minute
	window := &Window{Start: start, End: start + 3*time.Minute, Loc: time.UTC}
	holder, closing, other := newBlocking(), newBlocking(), newBlocking()
	s.Add(Job{Key: "holder/e", Endpoint: "e", Spec: Spec{Manual: true, Exclusive: true}, Run: holder.run})
	if err := s.RunNow("holder/e", 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the holder's run", func() bool { return holder.started.Load() == 1 })
	// closing ticks first and waits first in line, then other.
	s.Add(Job{Key: "closing/e", Endpoint: "e", Spec: Spec{Every: time.Minute, Exclusive: true, Window: window}, Run: closing.run})
	clk.advanceTo(clk.nextDue(t, 1))
	eventually(t, "closing to wait", func() bool { return c.get("closing/e", SkipExclusive) == 1 })
	s.Add(Job{Key: "other/e", Endpoint: "e", Spec: Spec{Every: time.Minute, Exclusive: true}, Run: other.run})
	clk.advanceTo(clk.nextDue(t, 2).Add(time.Minute - time.Nanosecond))
	eventually(t, "other to wait", func() bool { return c.get("other/e", SkipExclusive) >= 1 })
	// closing's window closes; the endpoint frees: other runs.
	clk.advanceTo(clk.Now().Add(5 * time.Minute))
	holder.release <- struct{}{}
	eventually(t, "other to run", func() bool { return other.started.Load() == 1 })
	if n := closing.started.Load(); n != 0 {
		t.Errorf("closing ran %d times outside its window", n)
	}
	other.release <- struct{}{}
}

// An exclusive job alone on its endpoint runs, and runs again: its hold on
// the endpoint ends with each run.
func TestExclusiveJobAloneRunsRepeatedly(t *testing.T) {
	clk, c := newFake(), &counts{}
	s := New(clk, 0, c.hooks())
	defer s.Stop()
	b := newBlocking()
	s.Add(Job{Key: "heavy/e", Endpoint: "e", Spec: Spec{Every: time.Minute, Exclusive: true}, Run: b.run})
	for i := int64(1); i <= 3; i++ {
		clk.advanceTo(clk.nextDue(t, 1))
		eventually(t, fmt.Sprintf("run %d", i), func() bool { return b.started.Load() == i })
		b.release <- struct{}{}
		eventually(t, fmt.Sprintf("run %d to end", i), func() bool { return b.finished.Load() == i })
	}
	if n := c.get("heavy/e", SkipExclusive); n != 0 {
		t.Fatalf("%d exclusive skips with nothing else on the endpoint", n)
	}
	// And a shared job can use the endpoint once the exclusive one is idle.
	shared := newBlocking()
	s.Add(Job{Key: "light/e", Endpoint: "e", Spec: Spec{Every: time.Minute}, Run: shared.run})
	_ = s.RunNow("light/e", 0)
	eventually(t, "the shared job", func() bool { return shared.started.Load() == 1 })
	shared.release <- struct{}{}
}

// On the real clock, continuous jobs run back to back, Remove stops one
// and cancels its run, and Stop leaves no goroutine behind.
func TestContinuousAndRemove(t *testing.T) {
	s := New(Real, 0, Hooks{})
	var runs atomic.Int64
	s.Add(Job{Key: "c/e", Endpoint: "e", Spec: Spec{Continuous: true}, Run: func(ctx context.Context, _ Trigger) Ran {
		runs.Add(1)
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
		}
		return Ran{}
	}})
	eventually(t, "several back-to-back runs", func() bool { return runs.Load() >= 5 })
	s.Remove("c/e")
	n := runs.Load()
	time.Sleep(20 * time.Millisecond)
	if runs.Load() != n {
		t.Fatal("runs continued after Remove")
	}
	if _, ok := s.State("c/e"); ok {
		t.Fatal("removed job still has a state")
	}
	s.Stop()
}

// RunNow answers only once the run has started, or with why it did not:
// here, an exclusive job holding the endpoint. The caller's reference
// reaches the run.
func TestRunNowSaysWhyNot(t *testing.T) {
	clk, c := newFake(), &counts{}
	s := New(clk, 0, c.hooks())
	defer s.Stop()
	heavy, light := newBlocking(), newBlocking()
	s.Add(Job{Key: "heavy/e", Endpoint: "e", Spec: Spec{Every: time.Hour, Exclusive: true}, Run: heavy.run})
	s.Add(Job{Key: "light/e", Endpoint: "e", Spec: Spec{Every: time.Hour}, Run: light.run})
	if err := s.RunNow("heavy/e", 7); err != nil {
		t.Fatalf("RunNow of an idle job: %v", err)
	}
	if st, _ := s.State("heavy/e"); !st.Running {
		t.Fatal("RunNow returned before the run started")
	}
	if tr := <-heavy.triggers; !tr.Manual || tr.Ref != 7 {
		t.Fatalf("trigger %+v, want manual with ref 7", tr)
	}
	// Beside an exclusive run, a run asked for waits its turn (the
	// finding: 17 tries over 33 s to get one through), then starts with
	// its ref once the exclusive run ends.
	if err := s.RunNow("light/e", 8); !errors.Is(err, ErrQueued) || light.started.Load() != 0 {
		t.Fatalf("RunNow beside an exclusive run: %v, %d started", err, light.started.Load())
	}
	if err := s.RunNow("light/e", 10); !errors.Is(err, ErrBusy) {
		t.Fatalf("a second RunNow of a queued job: %v, want it refused (the first's id was promised)", err)
	}
	if err := s.RunNow("heavy/e", 9); !errors.Is(err, ErrBusy) {
		t.Fatalf("RunNow of a running job: %v", err)
	}
	if err := s.RunNow("nothing/e", 1); !errors.Is(err, ErrUnknown) {
		t.Fatalf("RunNow of no job: %v", err)
	}
	heavy.release <- struct{}{}
	select {
	case tr := <-light.triggers:
		if !tr.Manual || tr.Ref != 8 {
			t.Fatalf("the queued run started as %+v, want manual with ref 8", tr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the queued run did not start once the exclusive run ended")
	}
	light.release <- struct{}{}
}

// Aborted runs in a row double an interval job's interval, up to the cap;
// skipped ticks are counted as backoff; a good run restores the schedule.
func TestAbortedRunsBackOff(t *testing.T) {
	clk, c := newFake(), &counts{}
	s := New(clk, 0, c.hooks())
	defer s.Stop()
	b := newBlocking()
	b.aborted.Store(true)
	for range 50 {
		b.release <- struct{}{}
	}
	s.Add(Job{Key: "p/e", Endpoint: "e", Spec: Spec{Every: time.Minute, BackoffMax: 5 * time.Minute}, Run: b.run})
	var ran []int // tick numbers that started a run
	for tick := 1; tick <= 24; tick++ {
		if tick == 16 {
			b.aborted.Store(false) // the endpoint recovers
		}
		before := b.finished.Load()
		clk.advanceTo(clk.nextDue(t, 1))
		// A tick either starts a run, which ends at once, or is skipped.
		eventually(t, fmt.Sprintf("tick %d decided", tick), func() bool {
			return b.finished.Load() > before || c.get("p/e", SkipBackoff) == tick-len(ran)
		})
		if b.finished.Load() > before {
			ran = append(ran, tick)
			eventually(t, "the run's end to be recorded", func() bool { st, _ := s.State("p/e"); return !st.Running })
		}
		if tick == 4 {
			if st, _ := s.State("p/e"); st.Aborts != 2 || st.BackoffUntil.IsZero() {
				t.Fatalf("after two aborted runs: %+v", st)
			}
		}
	}
	// Skips after the n-th aborted run: 1, 3, then the cap of 5.
	want := []int{1, 3, 7, 13, 19, 20, 21, 22, 23, 24}
	if fmt.Sprint(ran) != fmt.Sprint(want) {
		t.Fatalf("runs at ticks %v, want %v", ran, want)
	}
	if st, _ := s.State("p/e"); st.Aborts != 0 || !st.BackoffUntil.IsZero() {
		t.Fatalf("a good run left the backoff in place: %+v", st)
	}
}

func TestManualJobRunsOnlyWhenAsked(t *testing.T) {
	clk, c := newFake(), &counts{}
	var nexts atomic.Int32
	h := c.hooks()
	h.Next = func(string, time.Time) { nexts.Add(1) }
	s := New(clk, 0, h)
	defer s.Stop()
	b := newBlocking()
	s.Add(Job{Key: "p/e", Endpoint: "e", Spec: Spec{Manual: true}, Run: b.run})

	eventually(t, "the job to wait", func() bool { return nexts.Load() == 1 })
	clk.advanceTo(clk.Now().Add(30 * 24 * time.Hour))
	time.Sleep(20 * time.Millisecond) // time for a wrong tick to start a run
	if n := b.started.Load(); n != 0 {
		t.Fatalf("a manual job ran %d times on its own", n)
	}
	if st, _ := s.State("p/e"); !st.Next.IsZero() {
		t.Fatalf("a manual job has a next run: %v", st.Next)
	}
	if err := s.RunNow("p/e", 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the asked-for run", func() bool { return b.started.Load() == 1 })
	b.release <- struct{}{}
	eventually(t, "the run to end", func() bool { return b.finished.Load() == 1 })
	eventually(t, "the job to wait again", func() bool { return nexts.Load() == 2 })
	clk.advanceTo(clk.Now().Add(30 * 24 * time.Hour))
	time.Sleep(20 * time.Millisecond)
	if n := b.started.Load(); n != 1 {
		t.Fatalf("%d runs after one asked for", n)
	}
}
