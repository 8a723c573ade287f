package probe

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Failure is what a run does when its requests fail: a probe pointed at
// production must never make an incident worse, nor call a broken run
// green. The zero value turns every part off; DefaultFailure is what a
// profile gets when it says nothing.
type Failure struct {
	// BackoffBase is how long a closed-loop worker waits after its first
	// failed request in a row; each further failure doubles it, up to
	// BackoffMax, with jitter. A success resets it. 0: no backoff.
	BackoffBase, BackoffMax time.Duration
	// RetryAfterMax caps a server's Retry-After, which replaces the
	// backoff when sent. While one is in force an open loop drops its
	// arrivals (counted). 0: Retry-After is not obeyed.
	RetryAfterMax time.Duration
	// The run is aborted once AbortMinRequests requests (warmup
	// included) have ended and more than AbortErrorRatio of them failed,
	// or when every request for AbortUnreachable has failed to connect or
	// timed out. 0 turns each test off.
	AbortMinRequests int
	AbortErrorRatio  float64
	AbortUnreachable time.Duration
	// MaxErrorRatio makes a run whose share of failed requests is above it
	// an error, with or without SLOs; a run where no request succeeded is
	// one whatever it is. 0: only the latter.
	MaxErrorRatio float64
	// WrongAnswersFail makes a wrong answer a failure for every part of
	// the policy: backoff, abort and MaxErrorRatio. Off by default: an
	// endpoint that answers wrongly under load must still be measured,
	// not backed off from.
	WrongAnswersFail bool
}

// failed reports whether res is a failure for the policy.
func (p *Failure) failed(res *result.Request) bool {
	return res.Outcome == result.Error || p.WrongAnswersFail && res.Outcome == result.WrongAnswer
}

// DefaultFailure is the policy of a profile that sets none, documented in
// docs/CONFIGURATION.md.
func DefaultFailure() Failure {
	return Failure{
		BackoffBase: 100 * time.Millisecond, BackoffMax: 5 * time.Second,
		RetryAfterMax:    30 * time.Second,
		AbortMinRequests: 20, AbortErrorRatio: 0.5, AbortUnreachable: 30 * time.Second,
		MaxErrorRatio: 0.5,
	}
}

// RunError is why a run that was carried out is an error all the same:
// aborted because its requests failed, or ended with too many failures.
// Its text is the summary's Error.
type RunError struct {
	Why     string
	Aborted bool
	// Reason is the reason most of the run's failed requests had
	// (ReasonNone where none failed with one: wrong answers): what the
	// endpoint is failing with, which the daemon exports until an answer
	// comes (tokenprobe_endpoint_failing).
	Reason result.Reason
}

func (e *RunError) Error() string {
	if e.Aborted {
		return "aborted: " + e.Why
	}
	return e.Why
}

// backoff is one closed-loop worker's wait after failures.
type backoff struct {
	p     *Failure
	fails int
}

// after is how long to wait after res before the next request.
func (b *backoff) after(res *result.Request) time.Duration {
	if res == nil || !b.p.failed(res) {
		if res != nil && res.Measured() {
			b.fails = 0
		}
		return 0
	}
	b.fails++
	if res.RetryAfter > 0 && b.p.RetryAfterMax > 0 {
		return min(res.RetryAfter, b.p.RetryAfterMax)
	}
	if b.p.BackoffBase <= 0 {
		return 0
	}
	d := b.p.BackoffBase
	for i := 1; i < b.fails && d < b.p.BackoffMax; i++ {
		d *= 2
	}
	if b.p.BackoffMax > 0 {
		d = min(d, b.p.BackoffMax)
	}
	// Equal jitter: half fixed, half random, so workers that failed
	// together do not return together.
	return d/2 + rand.N(d/2+1)
}

// pause waits d or until stop ends, and counts the wait.
func (r *Run) pause(stop context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	began := time.Now()
	select {
	case <-t.C:
	case <-stop.Done():
	}
	r.waited.Add(int64(time.Since(began)))
}

// hold records a Retry-After on the endpoint: until then, no run against
// it sends (an open loop drops its arrivals, a closed loop waits).
func (r *Run) hold(res *result.Request) {
	if res.RetryAfter <= 0 || r.Failure.RetryAfterMax <= 0 {
		return
	}
	r.Endpoint.Hold(res.End.Add(min(res.RetryAfter, r.Failure.RetryAfterMax)))
}

// held reports whether a Retry-After is in force at t.
func (r *Run) held(t time.Time) bool { return r.Endpoint.HeldFor(t) > 0 }

// dropReasonRetryAfter is why an open loop left an arrival unsent.
const dropReasonRetryAfter = "retry_after"

// drops counts an open loop's unsent arrivals by reason.
type drops struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *drops) add(reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[string]int{}
	}
	d.n[reason]++
}

func (d *drops) snapshot() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.n) == 0 {
		return nil
	}
	out := make(map[string]int, len(d.n))
	for k, v := range d.n {
		out[k] = v
	}
	return out
}

// guard watches every ended request of a run, warmup included, and aborts
// the run when the policy says its endpoint is failing.
type guard struct {
	p      Failure
	abort  context.CancelCauseFunc
	ended  int
	failed int
	// answered is the last moment the endpoint answered anything (a
	// whole answer's end, or an error's response head), first the start
	// of the first request: the endpoint has been down since then when a
	// request fails to connect or times out without a head.
	answered time.Time
	// silent counts the requests sent since the last answer that failed
	// to connect or timed out: one alone (the last of a run, hung while
	// its neighbours had finished) is a timeout, not an outage.
	silent   int
	aborted  bool
	byReason map[result.Reason]int
	wrong    int // wrong answers, counted when the policy fails them
}

func (g *guard) add(res *result.Request) {
	if res.Outcome == result.Cancelled || g.aborted {
		return
	}
	g.ended++
	switch {
	case res.Outcome == result.WrongAnswer && g.p.WrongAnswersFail:
		g.failed++
		g.wrong++
	case res.Outcome == result.Error:
		g.failed++
		if g.byReason == nil {
			g.byReason = map[result.Reason]int{}
		}
		g.byReason[res.Reason]++
	}
	unreachable := res.Outcome == result.Error && (res.Reason == result.ReasonConnect || res.Reason == result.ReasonTimeout)
	if g.answered.IsZero() {
		g.answered = res.Start
	}
	if at, ok := answeredAt(res); ok && at.After(g.answered) {
		// Results come in the order requests end: a request that timed
		// out after 120 s says nothing of the answers its neighbours got
		// meanwhile, so the down clock runs from the last of those, not
		// from the timed-out request's start.
		g.answered, g.silent = at, 0
	}
	if unreachable && !res.Start.Before(g.answered) {
		g.silent++
	}
	p := g.p
	switch {
	case p.AbortMinRequests > 0 && p.AbortErrorRatio > 0 && g.ended >= p.AbortMinRequests &&
		float64(g.failed) > p.AbortErrorRatio*float64(g.ended):
		g.stop(fmt.Sprintf("%d of the first %d requests failed (%s), more than the policy's %.0f%%",
			g.failed, g.ended, g.reasons(), 100*p.AbortErrorRatio))
	case p.AbortUnreachable > 0 && unreachable && g.silent >= 2 && res.End.Sub(g.answered) >= p.AbortUnreachable:
		g.stop(fmt.Sprintf("the endpoint was unreachable for %s (no answer since then: every request failed to connect or timed out; limit %s)",
			res.End.Sub(g.answered).Round(time.Millisecond), p.AbortUnreachable))
	}
}

// answeredAt is when res shows the endpoint answering: the end of an
// answer (right or wrong), or the response head of a failed request (an
// HTTP error, a stream cut or timed out after its head).
func answeredAt(res *result.Request) (time.Time, bool) {
	switch {
	case res.Outcome == result.Success || res.Outcome == result.WrongAnswer:
		return res.End, true
	case res.HTTPStatus != 0 && res.FirstByte > 0:
		return res.Start.Add(res.FirstByte), true
	}
	return time.Time{}, false
}

func (g *guard) stop(why string) {
	g.aborted = true
	g.abort(&RunError{Why: why, Aborted: true, Reason: g.dominant()})
}

// dominant is the reason count says the most failures had (of equals,
// the first in label order), or ReasonNone.
func dominant(count func(result.Reason) int) result.Reason {
	best, most := result.ReasonNone, 0
	for _, r := range result.Reasons {
		if c := count(r); c > most {
			best, most = r, c
		}
	}
	return best
}

func (g *guard) dominant() result.Reason {
	return dominant(func(r result.Reason) int { return g.byReason[r] })
}

func summaryDominant(s *stats.Summary) result.Reason {
	return dominant(func(r result.Reason) int { return s.ByReason[r.String()] })
}

// reasons lists the failures by reason, in label order.
func (g *guard) reasons() string {
	var s string
	for _, r := range result.Reasons {
		if n := g.byReason[r]; n > 0 {
			if s != "" {
				s += ", "
			}
			s += fmt.Sprintf("%s %d", r, n)
		}
	}
	if g.wrong > 0 {
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("wrong_answer %d", g.wrong)
	}
	return s
}

// broken is why a run that ended with s is an error although it was not
// aborted, or nil.
func (p Failure) broken(s *stats.Summary) error {
	failed, what := s.Errors, ""
	if p.WrongAnswersFail {
		failed += s.WrongAnswers
		if s.WrongAnswers > 0 {
			what = fmt.Sprintf(" (%d of them wrong answers)", s.WrongAnswers)
		}
	}
	counted := s.Success + failed
	switch {
	case counted == 0:
		return nil
	case s.Success == 0:
		return &RunError{Why: fmt.Sprintf("no request succeeded: all %d failed%s", failed, what), Reason: summaryDominant(s)}
	case p.MaxErrorRatio > 0 && float64(failed) > p.MaxErrorRatio*float64(counted):
		return &RunError{Why: fmt.Sprintf("%d of %d requests failed%s, more than the policy's %.0f%%", failed, counted, what, 100*p.MaxErrorRatio), Reason: summaryDominant(s)}
	}
	return nil
}
