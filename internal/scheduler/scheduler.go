// Package scheduler runs jobs (one profile against one endpoint each) on
// their schedules: every interval at a deterministic offset plus jitter,
// or continuously; inside an optional time-of-day window; never two runs
// of one job at once; at most N runs at a time; exclusive jobs alone on
// their endpoint; paused while an hourly or daily budget is spent; and backed off
// after aborted runs in a row. Every tick that does not start a run is
// counted with its reason.
package scheduler

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Skip reasons, as exported in tokenprobe_runs_skipped_total.
const (
	SkipOverlap       = "overlap"
	SkipMaxConcurrent = "max_concurrent"
	SkipExclusive     = "exclusive"
	SkipBudget        = "budget"
	SkipBackoff       = "backoff"
)

// SkipReasons lists every skip reason, so a counter by reason can start at 0.
var SkipReasons = []string{SkipOverlap, SkipMaxConcurrent, SkipExclusive, SkipBudget, SkipBackoff}

// SkipError is why a run asked for at once did not start.
type SkipError struct {
	Reason string
	// Detail says more where the reason has parts: which budget is spent.
	Detail string
}

func (e *SkipError) Error() string {
	switch e.Reason {
	case SkipOverlap:
		return "a run of this job is in progress"
	case SkipMaxConcurrent:
		return "the daemon runs as many runs at once as --runs.max-concurrent allows"
	case SkipExclusive:
		return "its endpoint is held by an exclusive run, or it is exclusive and the endpoint is in use"
	case SkipBudget:
		if e.Detail != "" {
			return "its budget is spent: " + e.Detail // "daily cost budget spent"
		}
		return "its budget is spent"
	}
	return e.Reason
}

// Is makes every SkipError of the overlap reason ErrBusy.
func (e *SkipError) Is(target error) bool { return target == ErrBusy && e.Reason == SkipOverlap }

// Usage is what one run consumed, for budgets.
type Usage struct {
	Requests, Tokens int
	// Cost is the run's spend at its endpoint's price.
	Cost float64
}

// Ran is how one run went, for budgets and backoff.
type Ran struct {
	Usage
	// Aborted is true when the run stopped early because its endpoint was
	// failing: the job's schedule backs off.
	Aborted bool
}

// Trigger is why a run starts: its schedule, or RunNow with the caller's
// reference for the run (such as the id it will be shown under).
type Trigger struct {
	Manual bool
	Ref    int64
}

// Job is one profile against one endpoint.
type Job struct {
	// Key identifies the job (profile/endpoint); it seeds the offset.
	Key      string
	Endpoint string
	Spec     Spec
	// Run carries out one run; it must return when ctx is cancelled.
	Run func(ctx context.Context, t Trigger) Ran
}

// Hooks are told what the scheduler decides; any may be nil.
type Hooks struct {
	Skipped func(key, reason string)
	Next    func(key string, at time.Time)
	// Backoff is told after every run how many aborted runs in a row
	// the job has had (0 after a run that was not aborted).
	Backoff func(key string, aborts int)
}

// ErrBusy matches RunNow's error when the job is already running.
var ErrBusy = errors.New("a run of this job is in progress")

// ErrUnknown is returned for a key that is not scheduled.
var ErrUnknown = errors.New("no such job")

// Scheduler runs jobs. The zero value is not usable; use New.
type Scheduler struct {
	clock Clock
	hooks Hooks
	slots chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	jobs      map[string]*job
	endpoints map[string]*sync.RWMutex
	// waiting are, per endpoint, the jobs whose tick found it held by
	// another run, first come first: the first is woken (owed) when a
	// run on the endpoint ends, and no other tick takes the endpoint
	// before it, so that a job that runs long and often cannot starve
	// the others.
	waiting map[string][]*job
	// manual are the waiting jobs queued by RunNow: ahead of the ticks,
	// in the order asked.
	manual map[*job]bool
}

type job struct {
	Job
	ctx     context.Context
	cancel  context.CancelFunc
	loop    chan struct{} // closed when the loop has ended
	trigger chan manualRun
	// owed wakes the loop for the run its skipped tick is owed: the
	// endpoint it waited for is free.
	owed chan struct{}

	mu      sync.Mutex
	running bool
	runDone chan struct{}
	next    time.Time
	paused  string
	used    []usedAt
	// aborts counts aborted runs in a row; an interval job skips its
	// next skipTicks ticks, a continuous one waits until heldUntil.
	aborts    int
	skipTicks int
	heldUntil time.Time
	// queued is a manual run (RunNow) that waits in the endpoint's queue
	// for the run holding it to end; it starts on the job's next turn.
	queued *Trigger
}

// manualRun is a RunNow waiting for the loop's decision.
type manualRun struct {
	ref   int64
	reply chan error
}

type usedAt struct {
	at time.Time
	Usage
}

// State is a job's state for the status page.
type State struct {
	Running bool
	Next    time.Time
	// Paused says why the job is held back (budget), or "".
	Paused string
	// Aborts counts its aborted runs in a row; while it backs off,
	// BackoffUntil is about when it runs again.
	Aborts       int
	BackoffUntil time.Time
}

// New returns a scheduler that runs at most maxConcurrent runs at once
// (0: no limit).
func New(clock Clock, maxConcurrent int, hooks Hooks) *Scheduler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Scheduler{clock: clock, hooks: hooks, ctx: ctx, cancel: cancel, jobs: map[string]*job{}, endpoints: map[string]*sync.RWMutex{},
		waiting: map[string][]*job{}, manual: map[*job]bool{}}
	if maxConcurrent > 0 {
		s.slots = make(chan struct{}, maxConcurrent)
	}
	return s
}

// Add schedules a job. A job with the same key is replaced (its running
// run cancelled).
func (s *Scheduler) Add(j Job) {
	s.Remove(j.Key)
	ctx, cancel := context.WithCancel(s.ctx)
	jb := &job{Job: j, ctx: ctx, cancel: cancel, loop: make(chan struct{}), trigger: make(chan manualRun), owed: make(chan struct{}, 1)}
	s.mu.Lock()
	s.jobs[j.Key] = jb
	if s.endpoints[j.Endpoint] == nil {
		s.endpoints[j.Endpoint] = &sync.RWMutex{}
	}
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(jb.loop)
		s.loop(jb)
	}()
}

// Remove unschedules a job, cancels its run and waits for it to end.
func (s *Scheduler) Remove(key string) {
	s.mu.Lock()
	jb := s.jobs[key]
	delete(s.jobs, key)
	if jb != nil {
		s.unwait(jb)
	}
	s.mu.Unlock()
	if jb == nil {
		return
	}
	jb.cancel()
	<-jb.loop
	jb.mu.Lock()
	done := jb.runDone
	jb.mu.Unlock()
	if done != nil {
		<-done
	}
}

// RunNow starts a job at once, outside its schedule, window and backoff,
// and returns once the run has started (nil), was queued behind the run
// holding its endpoint (ErrQueued), or was refused: a *SkipError with the
// reason (a job already running matches ErrBusy), ErrUnknown, or
// ErrStopped. ref reaches the job's Run in its Trigger.
func (s *Scheduler) RunNow(key string, ref int64) error {
	s.mu.Lock()
	jb := s.jobs[key]
	s.mu.Unlock()
	if jb == nil {
		return ErrUnknown
	}
	m := manualRun{ref: ref, reply: make(chan error, 1)}
	for {
		jb.mu.Lock()
		running := jb.running
		jb.mu.Unlock()
		if running {
			return &SkipError{Reason: SkipOverlap}
		}
		// The loop takes the request when it waits for its next tick;
		// while it waits for a continuous run to end, the run is
		// running, which is looked at again here.
		select {
		case jb.trigger <- m:
			select {
			case err := <-m.reply:
				return err
			case <-jb.loop:
				return ErrStopped
			}
		case <-jb.loop:
			return ErrStopped
		case <-time.After(10 * time.Millisecond): // a real pause, whatever the clock
		}
	}
}

// ErrQueued is RunNow's answer when the endpoint is held (an exclusive
// run, or this job is exclusive and the endpoint is in use): the run
// waits in the endpoint's queue and starts, with its ref, once the
// endpoint is free.
var ErrQueued = errors.New("queued until its endpoint is free")

// ErrStopped is RunNow's error for a job removed while it asked.
var ErrStopped = errors.New("the job was removed or the daemon is stopping")

// State reports a job's state.
func (s *Scheduler) State(key string) (State, bool) {
	s.mu.Lock()
	jb := s.jobs[key]
	s.mu.Unlock()
	if jb == nil {
		return State{}, false
	}
	jb.mu.Lock()
	defer jb.mu.Unlock()
	st := State{Running: jb.running, Next: jb.next, Paused: jb.paused, Aborts: jb.aborts, BackoffUntil: jb.heldUntil}
	if jb.skipTicks > 0 {
		st.BackoffUntil = jb.next.Add(time.Duration(jb.skipTicks) * jb.Spec.Every)
	}
	return st, true
}

// Stop stops scheduling, cancels every run and waits for them to end.
func (s *Scheduler) Stop() {
	s.cancel()
	s.wg.Wait()
}

func (s *Scheduler) loop(jb *job) {
	rng := rand.New(rand.NewPCG(uint64(Offset(jb.Key, time.Hour)), uint64(s.clock.Now().UnixNano())))
	sp := jb.Spec
	offset := Offset(jb.Key, sp.Every)
	for {
		now := s.clock.Now()
		var next time.Time // zero for a manual job: no tick at all
		switch {
		case sp.Continuous:
			next = now
		case !sp.Manual:
			next = NextTick(now, sp.Every, offset).Add(JitterFor(rng, sp.Jitter))
		}
		jb.setNext(next)
		if s.hooks.Next != nil {
			s.hooks.Next(jb.Key, next)
		}
		var m *manualRun
		if wait := next.Sub(now); wait > 0 || !sp.Continuous {
			var tick <-chan time.Time // nil, never ready, for a manual job
			if !sp.Manual {
				tick = s.clock.After(wait)
			}
			select {
			case <-tick:
			case <-jb.owed: // the endpoint a skipped tick waited for is free
			case r := <-jb.trigger:
				m = &r
			case <-jb.ctx.Done():
				return
			}
		} else {
			select {
			case <-jb.ctx.Done():
				return
			case r := <-jb.trigger:
				m = &r
			default:
			}
		}
		t := Trigger{Manual: m != nil}
		if m != nil {
			t.Ref = m.ref
		}
		done, skipped := s.tick(jb, s.clock.Now(), t)
		if m != nil {
			m.reply <- jb.replyOf(skipped)
		}
		if sp.Continuous {
			if done == nil {
				// Not started (window, budget, limits, backoff): try
				// again shortly rather than spinning.
				if !s.pause(jb, time.Second) {
					return
				}
				continue
			}
			select {
			case <-done:
			case <-jb.ctx.Done():
				return
			}
			if !s.pause(jb, jb.holdLeft(s.clock.Now())) {
				return
			}
		}
	}
}

// pause waits d, or less when RunNow asks for a run (which it then starts
// on the loop's next turn, the request handed back); false when the job ends.
func (s *Scheduler) pause(jb *job, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	select {
	case <-s.clock.After(d):
	case <-jb.owed:
	case r := <-jb.trigger:
		done, skipped := s.tick(jb, s.clock.Now(), Trigger{Manual: true, Ref: r.ref})
		r.reply <- jb.replyOf(skipped)
		if skipped != "" {
			return true
		}
		select {
		case <-done:
		case <-jb.ctx.Done():
			return false
		}
	case <-jb.ctx.Done():
		return false
	}
	return true
}

// queuedReason is tick's answer for a manual run queued behind the run
// holding its endpoint.
const queuedReason = "queued"

func (jb *job) replyOf(skipped string) error {
	switch skipped {
	case "":
		return nil
	case queuedReason:
		return ErrQueued
	}
	e := &SkipError{Reason: skipped}
	if skipped == SkipBudget {
		jb.mu.Lock()
		e.Detail = jb.paused // "daily cost budget spent", "hourly budget spent"
		jb.mu.Unlock()
	}
	return e
}

// tick decides whether the job starts now; it returns the started run's
// done channel, or why it did not start ("" for outside its window, which
// is not a tick at all).
func (s *Scheduler) tick(jb *job, now time.Time, t Trigger) (<-chan struct{}, string) {
	sp := jb.Spec
	jb.mu.Lock()
	defer jb.mu.Unlock()
	if jb.running {
		s.skip(jb.Key, SkipOverlap)
		return nil, SkipOverlap
	}
	if jb.queued != nil && t.Manual && t.Ref != jb.queued.Ref {
		// One run of a job waits at a time: a second request would
		// replace the first, whose id was promised.
		s.skip(jb.Key, SkipOverlap)
		return nil, SkipOverlap
	}
	if q := jb.queued; q != nil && !t.Manual {
		// The turn a queued manual run waited for: it runs in the tick's
		// place, as asked (outside window, backoff and queue order).
		t = *q
	}
	if !t.Manual && !sp.Window.Contains(now) {
		s.giveUpWait(jb)
		return nil, "" // outside the window: not a tick at all
	}
	if !t.Manual && jb.skipTicks > 0 {
		jb.skipTicks--
		s.giveUpWait(jb)
		s.skip(jb.Key, SkipBackoff)
		return nil, SkipBackoff
	}
	reqs, toks, cost := jb.usedSince(now)
	if sp.MaxCostPerDay > 0 && cost >= sp.MaxCostPerDay {
		jb.paused = "daily cost budget spent"
		s.giveUpWait(jb)
		s.skip(jb.Key, SkipBudget)
		return nil, SkipBudget
	}
	if sp.RequestsPerHour > 0 && reqs >= sp.RequestsPerHour || sp.TokensPerHour > 0 && toks >= sp.TokensPerHour {
		jb.paused = "hourly budget spent"
		s.giveUpWait(jb)
		s.skip(jb.Key, SkipBudget)
		return nil, SkipBudget
	}
	jb.paused = ""
	if s.slots != nil {
		select {
		case s.slots <- struct{}{}:
		default:
			s.giveUpWait(jb)
			s.skip(jb.Key, SkipMaxConcurrent)
			return nil, SkipMaxConcurrent
		}
	}
	s.mu.Lock()
	lock := s.endpoints[jb.Endpoint]
	// A tick waits behind the jobs already waiting for the endpoint; a
	// manual run does not: the operator asked for it.
	queued := !t.Manual && len(s.waiting[jb.Endpoint]) > 0 && s.waiting[jb.Endpoint][0] != jb
	// Shared runs hold the endpoint's lock for reading; an exclusive run
	// holds it alone.
	var acquired bool
	var unlock func()
	switch {
	case queued:
	case sp.Exclusive:
		acquired, unlock = lock.TryLock(), lock.Unlock
	default:
		acquired, unlock = lock.TryRLock(), lock.RUnlock
	}
	switch {
	case acquired:
		s.unwait(jb)
		drain(jb.owed) // a wake-up it no longer needs: no second run for it
		jb.queued = nil
	case t.Manual:
		// Asked for by an operator: it waits its turn rather than being
		// refused (a refusal only says "try again", which the operator
		// then does in a loop), ahead of the ticks already waiting.
		if q := s.waiting[jb.Endpoint]; !slices.Contains(q, jb) {
			// Behind the runs asked for before it, which start in the
			// order asked (first to last, not last to first).
			at := 0
			for at < len(q) && s.manual[q[at]] {
				at++
			}
			s.waiting[jb.Endpoint] = slices.Insert(q, at, jb)
			s.manual[jb] = true
		}
		tq := t
		jb.queued = &tq
	default:
		s.wait(jb)
	}
	s.mu.Unlock()
	if !acquired {
		if s.slots != nil {
			<-s.slots
		}
		if t.Manual {
			return nil, queuedReason
		}
		s.skip(jb.Key, SkipExclusive)
		return nil, SkipExclusive
	}
	jb.running = true
	done := make(chan struct{})
	jb.runDone = done
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(done)
		ran := jb.Run(jb.ctx, t)
		unlock()
		if s.slots != nil {
			<-s.slots
		}
		s.handOn(jb.Endpoint) // with its slot free too
		end := s.clock.Now()
		jb.mu.Lock()
		jb.running = false
		jb.used = append(jb.used, usedAt{end, ran.Usage})
		if ran.Aborted {
			jb.aborts++
			if sp.Continuous {
				jb.heldUntil = end.Add(sp.pauseAfter(jb.aborts))
			} else {
				jb.skipTicks = sp.ticksToSkip(jb.aborts)
			}
		} else {
			jb.aborts, jb.skipTicks, jb.heldUntil = 0, 0, time.Time{}
		}
		aborts := jb.aborts
		jb.mu.Unlock()
		if s.hooks.Backoff != nil {
			s.hooks.Backoff(jb.Key, aborts)
		}
	}()
	return done, ""
}

// wait puts jb in its endpoint's queue, unless it is there. Callers hold
// s.mu.
func (s *Scheduler) wait(jb *job) {
	if !slices.Contains(s.waiting[jb.Endpoint], jb) {
		s.waiting[jb.Endpoint] = append(s.waiting[jb.Endpoint], jb)
	}
}

// unwait takes jb out of its endpoint's queue. Callers hold s.mu.
func (s *Scheduler) unwait(jb *job) {
	delete(s.manual, jb)
	q := slices.DeleteFunc(s.waiting[jb.Endpoint], func(w *job) bool { return w == jb })
	if len(q) == 0 {
		delete(s.waiting, jb.Endpoint)
		return
	}
	s.waiting[jb.Endpoint] = q
}

// giveUpWait takes jb out of its endpoint's queue when it will not run
// for a reason of its own (window, backoff, budget, the run limit), so
// that it holds back no other job, and wakes the next in line.
func (s *Scheduler) giveUpWait(jb *job) {
	s.mu.Lock()
	was := slices.Contains(s.waiting[jb.Endpoint], jb)
	s.unwait(jb)
	drain(jb.owed)
	s.mu.Unlock()
	if was {
		s.handOn(jb.Endpoint)
	}
}

// drain takes a pending wake-up out of owed, if there is one.
func drain(owed chan struct{}) {
	select {
	case <-owed:
	default:
	}
}

// handOn wakes the first job waiting for endpoint, now that a run on it
// has ended.
func (s *Scheduler) handOn(endpoint string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.waiting[endpoint]; len(q) > 0 {
		select {
		case q[0].owed <- struct{}{}:
		default: // already owed
		}
	}
}

// holdLeft is how long the job's backoff still holds at now.
func (jb *job) holdLeft(now time.Time) time.Duration {
	jb.mu.Lock()
	defer jb.mu.Unlock()
	return jb.heldUntil.Sub(now)
}

func (jb *job) setNext(t time.Time) {
	jb.mu.Lock()
	jb.next = t
	jb.mu.Unlock()
}

// usedSince sums the requests and tokens of the hour before now and the
// cost of the day before it, and forgets older entries (a run a tick
// keeps a day's runs: 1,440 at a minute's interval). Callers hold jb.mu.
func (jb *job) usedSince(now time.Time) (reqs, toks int, cost float64) {
	hour, day := now.Add(-time.Hour), now.Add(-24*time.Hour)
	kept := jb.used[:0]
	for _, u := range jb.used {
		if !u.at.After(day) {
			continue
		}
		kept = append(kept, u)
		cost += u.Cost
		if u.at.After(hour) {
			reqs += u.Requests
			toks += u.Tokens
		}
	}
	jb.used = kept
	return reqs, toks, cost
}

func (s *Scheduler) skip(key, reason string) {
	if s.hooks.Skipped != nil {
		s.hooks.Skipped(key, reason)
	}
}
