// Package scheduler runs jobs (one profile against one endpoint each) on
// their schedules: every interval at a deterministic offset plus jitter,
// or continuously; inside an optional time-of-day window; never two runs
// of one job at once; at most N runs at a time; exclusive jobs alone on
// their endpoint; and paused while an hourly budget is spent. Every tick
// that does not start a run is counted with its reason.
package scheduler

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// Skip reasons, as exported in tokenprobe_runs_skipped_total.
const (
	SkipOverlap       = "overlap"
	SkipMaxConcurrent = "max_concurrent"
	SkipExclusive     = "exclusive"
	SkipBudget        = "budget"
)

// Usage is what one run consumed, for budgets.
type Usage struct{ Requests, Tokens int }

// Job is one profile against one endpoint.
type Job struct {
	// Key identifies the job (profile/endpoint); it seeds the offset.
	Key      string
	Endpoint string
	Spec     Spec
	// Run carries out one run; it must return when ctx is cancelled.
	// manual is true for a run started by RunNow.
	Run func(ctx context.Context, manual bool) Usage
}

// Hooks are told what the scheduler decides; any may be nil.
type Hooks struct {
	Skipped func(key, reason string)
	Next    func(key string, at time.Time)
}

// ErrBusy is returned by RunNow when the job is already running.
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
}

type job struct {
	Job
	ctx     context.Context
	cancel  context.CancelFunc
	loop    chan struct{} // closed when the loop has ended
	trigger chan struct{}

	mu      sync.Mutex
	running bool
	runDone chan struct{}
	next    time.Time
	paused  string
	used    []usedAt
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
}

// New returns a scheduler that runs at most maxConcurrent runs at once
// (0: no limit).
func New(clock Clock, maxConcurrent int, hooks Hooks) *Scheduler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Scheduler{clock: clock, hooks: hooks, ctx: ctx, cancel: cancel, jobs: map[string]*job{}, endpoints: map[string]*sync.RWMutex{}}
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
	jb := &job{Job: j, ctx: ctx, cancel: cancel, loop: make(chan struct{}), trigger: make(chan struct{}, 1)}
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

// RunNow starts a job at once, outside its schedule and window. The other
// limits hold: a job already running answers ErrBusy.
func (s *Scheduler) RunNow(key string) error {
	s.mu.Lock()
	jb := s.jobs[key]
	s.mu.Unlock()
	if jb == nil {
		return ErrUnknown
	}
	jb.mu.Lock()
	running := jb.running
	jb.mu.Unlock()
	if running {
		return ErrBusy
	}
	select {
	case jb.trigger <- struct{}{}:
	default:
	}
	return nil
}

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
	return State{Running: jb.running, Next: jb.next, Paused: jb.paused}, true
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
		var next time.Time
		if sp.Continuous {
			next = now
		} else {
			next = NextTick(now, sp.Every, offset).Add(JitterFor(rng, sp.Jitter))
		}
		jb.setNext(next)
		if s.hooks.Next != nil {
			s.hooks.Next(jb.Key, next)
		}
		manual := false
		if wait := next.Sub(now); wait > 0 || !sp.Continuous {
			select {
			case <-s.clock.After(wait):
			case <-jb.trigger:
				manual = true
			case <-jb.ctx.Done():
				return
			}
		} else {
			select {
			case <-jb.ctx.Done():
				return
			case <-jb.trigger:
				manual = true
			default:
			}
		}
		done := s.tick(jb, s.clock.Now(), manual)
		if sp.Continuous {
			if done == nil {
				// Not started (window, budget, limits): try again shortly
				// rather than spinning.
				select {
				case <-s.clock.After(time.Second):
				case <-jb.ctx.Done():
					return
				}
				continue
			}
			select {
			case <-done:
			case <-jb.ctx.Done():
				return
			}
		}
	}
}

// tick decides whether the job starts now; it returns the started run's
// done channel, or nil.
func (s *Scheduler) tick(jb *job, now time.Time, manual bool) <-chan struct{} {
	sp := jb.Spec
	jb.mu.Lock()
	defer jb.mu.Unlock()
	if jb.running {
		s.skip(jb.Key, SkipOverlap)
		return nil
	}
	if !manual && !sp.Window.Contains(now) {
		return nil // outside the window: not a tick at all
	}
	if reqs, toks := jb.usedSince(now.Add(-time.Hour)); sp.RequestsPerHour > 0 && reqs >= sp.RequestsPerHour ||
		sp.TokensPerHour > 0 && toks >= sp.TokensPerHour {
		jb.paused = "hourly budget spent"
		s.skip(jb.Key, SkipBudget)
		return nil
	}
	jb.paused = ""
	if s.slots != nil {
		select {
		case s.slots <- struct{}{}:
		default:
			s.skip(jb.Key, SkipMaxConcurrent)
			return nil
		}
	}
	s.mu.Lock()
	lock := s.endpoints[jb.Endpoint]
	s.mu.Unlock()
	// Shared runs hold the endpoint's lock for reading; an exclusive run
	// holds it alone.
	var acquired bool
	var unlock func()
	if sp.Exclusive {
		acquired, unlock = lock.TryLock(), lock.Unlock
	} else {
		acquired, unlock = lock.TryRLock(), lock.RUnlock
	}
	if !acquired {
		if s.slots != nil {
			<-s.slots
		}
		s.skip(jb.Key, SkipExclusive)
		return nil
	}
	jb.running = true
	done := make(chan struct{})
	jb.runDone = done
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(done)
		u := jb.Run(jb.ctx, manual)
		unlock()
		if s.slots != nil {
			<-s.slots
		}
		jb.mu.Lock()
		jb.running = false
		jb.used = append(jb.used, usedAt{s.clock.Now(), u})
		jb.mu.Unlock()
	}()
	return done
}

func (jb *job) setNext(t time.Time) {
	jb.mu.Lock()
	jb.next = t
	jb.mu.Unlock()
}

// usedSince sums usage after t and forgets older entries. Callers hold jb.mu.
func (jb *job) usedSince(t time.Time) (reqs, toks int) {
	kept := jb.used[:0]
	for _, u := range jb.used {
		if u.at.After(t) {
			kept = append(kept, u)
			reqs += u.Requests
			toks += u.Tokens
		}
	}
	jb.used = kept
	return reqs, toks
}

func (s *Scheduler) skip(key, reason string) {
	if s.hooks.Skipped != nil {
		s.hooks.Skipped(key, reason)
	}
}
