package probe

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/load"
	"github.com/tokenprobe/tokenprobe/probe/result"
)

// rampPoll is how often an idle worker of a concurrency ramp looks whether
// the ramp has reached it.
const rampPoll = 10 * time.Millisecond

// openLoop sends every arrival its schedule puts inside the stage's
// duration, however late the dispatcher reaches it: the duration is kept
// on the schedule's clock, not the wall clock's, so a busy moment makes
// requests late (dispatch lag) but never drops the last of them. Only a
// concurrency cap's wait, and send, end the stage early; ctx is the
// requests' own.
func (r *Run) openLoop(send, ctx context.Context, index int, st Stage, warmup bool, out chan<- *result.Request) error {
	limit := st.Requests
	var gaps load.Arrivals
	if st.Offsets != nil {
		if limit == 0 || limit > len(st.Offsets) {
			limit = len(st.Offsets)
		}
	} else {
		var err error
		rate := st.Rate
		if st.RampTo != 0 {
			rate = 1 // arrivals of a unit-rate process, stretched by rampTime
		}
		if gaps, err = load.NewArrivals(st.Arrival, rate, st.Smoothness, r.Plan.Seed+uint64(index)); err != nil {
			return err
		}
	}
	var sem chan struct{}
	if st.MaxConcurrency > 0 {
		sem = make(chan struct{}, st.MaxConcurrency)
	}
	var prompts <-chan client.Prompt
	if r.Sessions == nil { // a session's later turns wait for its answers: nothing to prepare
		var stopPrompts func()
		prompts, stopPrompts = r.prepare(send, limit)
		defer stopPrompts()
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	wake := newWaker()
	if wake != nil {
		defer wake.close()
	}
	start := time.Now()
	r.markStage(start)
	// stop is the stage's end for what may wait past it: a concurrency
	// cap's slot and a session's later turns.
	stop := send
	if st.Duration > 0 {
		var cancel context.CancelFunc
		stop, cancel = context.WithDeadline(send, start.Add(st.Duration))
		defer cancel()
	}
	// The grace period runs from the later of the stage's end and the
	// last arrival sent: a late dispatcher's last arrivals get all of it.
	sent := make(chan struct{})
	reqs, endReqs := r.drain(ctx, stop.Done(), sent)
	defer endReqs()
	ctx = reqs
	var wg sync.WaitGroup
	defer wg.Wait() // before cancel: sessions end at the deadline, not when the last arrival was sent
	defer close(sent)
	next := start
	var unit float64 // a ramp's arrivals, counted in the unit-rate process
	for i := 0; limit == 0 || i < limit; i++ {
		switch {
		case st.Offsets != nil:
			next = start.Add(st.Offsets[i])
		case st.RampTo != 0:
			if i > 0 {
				unit += gaps.Next().Seconds()
			}
			at, ok := rampTime(st, unit)
			if !ok {
				return nil // the ramp's last arrival has been sent
			}
			next = start.Add(at)
		case i > 0:
			next = next.Add(gaps.Next())
		}
		if st.Duration > 0 && next.Sub(start) >= st.Duration {
			return nil
		}
		var p client.Prompt
		if prompts != nil {
			select {
			case p = <-prompts:
			case <-send.Done():
				return nil
			}
		}
		if !waitUntil(send, timer, wake, next) {
			return nil
		}
		if r.held(next) {
			// The server asked for a pause: the arrival is not sent, and
			// counted as dropped, never lost without a trace.
			r.dropped.add(dropReasonRetryAfter)
			continue
		}
		if sem != nil {
			// Waiting here delays the send past its schedule: that shows
			// as dispatch lag, never hidden (coordinated omission).
			select {
			case sem <- struct{}{}:
			case <-stop.Done():
				return nil
			}
		}
		scheduled := next
		wg.Go(func() {
			if r.Sessions != nil {
				r.session(stop, ctx, index, st, scheduled, r.Sessions.NextSession(), warmup, out)
				if sem != nil {
					<-sem
				}
				return
			}
			res := r.one(ctx, index, st, scheduled, p, warmup)
			if sem != nil {
				<-sem
			}
			out <- res
		})
	}
	return nil
}

// fineWait is the last stretch before a send that waitUntil waits with
// the waker rather than the runtime timer alone.
const fineWait = 2 * time.Millisecond

// waitUntil waits for t, or reports false when stop ends first. It waits
// on timer until fineWait before t, where it can still be stopped, and the
// rest with w when there is one: the dispatch lag an open loop adds is
// then the kernel's wake-up, not the runtime timer's millisecond.
func waitUntil(stop context.Context, timer *time.Timer, w *waker, t time.Time) bool {
	coarse := time.Until(t)
	if w != nil {
		coarse -= fineWait
	}
	if coarse > 0 {
		timer.Reset(coarse)
		select {
		case <-timer.C:
		case <-stop.Done():
			return false
		}
	}
	if d := time.Until(t); d > 0 {
		if w != nil {
			w.wait(timer, d)
		} else {
			timer.Reset(d)
			<-timer.C
		}
	}
	return stop.Err() == nil
}

// rampTime maps the u-th unit of a unit-rate arrival process onto a rate
// ramp: the time t at which the ramp's expected arrivals, the integral of
// rate(t) = r0 + (r1-r0) t/D, reach u. The arrival process keeps its shape
// (constant, Poisson, gamma) with the rate changing under it. ok is false
// past the end of the ramp.
func rampTime(st Stage, u float64) (time.Duration, bool) {
	r0, r1, d := st.Rate, st.RampTo, st.Duration.Seconds()
	a := (r1 - r0) / (2 * d) // the integral is a t^2 + r0 t
	var t float64
	switch {
	case math.Abs(a) < 1e-12:
		t = u / r0
	default:
		disc := r0*r0 + 4*a*u
		if disc < 0 {
			return 0, false // a ramp down that ends before u arrivals
		}
		t = (-r0 + math.Sqrt(disc)) / (2 * a)
	}
	if t > d || math.IsNaN(t) {
		return 0, false
	}
	return time.Duration(t * float64(time.Second)), true
}
