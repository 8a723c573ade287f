// Package probe runs workload profiles against endpoints: it turns a plan
// of load into scheduled requests, measures each one through the streaming
// client, and hands every result to the summary and the sinks.
package probe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/load"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/stats"
	"github.com/tokenprobe/tokenprobe/probe/workload"
)

// Sink receives every measured request of a run, warmup excluded, in the
// order requests finish. Observe is called from one goroutine and must not
// block for long: sinks that do I/O queue the work.
type Sink interface {
	Observe(r *result.Request, v slo.Verdict)
}

// Stage is one level of load held for a duration or a number of requests,
// whichever ends first.
type Stage struct {
	// Concurrency > 0 runs a closed loop: that many requests in flight.
	Concurrency int
	// Rate > 0 runs an open loop with Arrival gaps, capped at
	// MaxConcurrency in flight when that is set.
	Rate    float64
	Arrival string
	// Smoothness is the gamma arrival process's shape.
	Smoothness     float64
	MaxConcurrency int
	Duration       time.Duration
	Requests       int
	// Offsets, when set, are the send times from the stage's start (a
	// trace's schedule), in place of an arrival process.
	Offsets []time.Duration
	// RampTo, when set, moves the level (concurrency or rate) in a
	// straight line from its value at the start of the stage to RampTo at
	// the end of Duration.
	RampTo float64
}

// rampSteps is how many steps a ramp's reported level takes: results and
// the load_level label show the level in force at the start of each tenth
// of the ramp, so that a ramp adds at most eleven label values.
const rampSteps = 10

// LevelAt is the level in force at elapsed into the stage: Level, or a
// point on the ramp (whole requests in flight for a concurrency ramp).
func (s Stage) LevelAt(elapsed time.Duration) float64 {
	if s.RampTo == 0 || s.Duration <= 0 {
		return s.Level()
	}
	f := min(max(elapsed.Seconds()/s.Duration.Seconds(), 0), 1)
	v := s.Level() + (s.RampTo-s.Level())*f
	if s.Rate == 0 {
		return math.Round(v) // whole requests in flight
	}
	return math.Round(v*100) / 100 // a rate to the hundredth: labels and reports stay readable
}

// reportedLevel is the level a result carries: LevelAt at the start of
// the ramp step that elapsed falls in.
func (s Stage) reportedLevel(elapsed time.Duration) float64 {
	if s.RampTo == 0 || s.Duration <= 0 {
		return s.Level()
	}
	step := s.Duration / rampSteps
	return s.LevelAt(min(elapsed/step, rampSteps) * step)
}

// Level is the load the stage asks for: concurrency or rate.
func (s Stage) Level() float64 {
	if s.Rate > 0 {
		return s.Rate
	}
	return float64(s.Concurrency)
}

// LevelName says what the stage's level counts: concurrency or rate.
func (s Stage) LevelName() string {
	if s.Offsets != nil {
		return "trace rate"
	}
	if s.Rate > 0 {
		return "rate"
	}
	return "concurrency"
}

// String says what the stage does, in a phrase.
func (s Stage) String() string {
	out := fmt.Sprintf("%s %g", s.LevelName(), s.Level())
	if s.RampTo != 0 {
		out += fmt.Sprintf(" ramping to %g", s.RampTo)
	}
	switch {
	case s.Requests > 0 && s.Duration > 0:
		out += fmt.Sprintf(" for %d requests or %s", s.Requests, s.Duration)
	case s.Requests > 0:
		out += fmt.Sprintf(" for %d requests", s.Requests)
	case s.Duration > 0:
		out += " for " + s.Duration.String()
	}
	return out
}

// Plan is how hard and how long a run pushes: one stage, or several run
// one after the other (a step up in concurrency shows where TTFT breaks).
type Plan struct {
	Stages []Stage
	// Warmup requests run first at the first stage's load, in their own
	// phase, and are not measured.
	Warmup int
	Seed   uint64
	// CancelFraction of requests are cancelled by the workload after
	// CancelAfter, as impatient users do; they count as cancelled.
	CancelFraction float64
	CancelAfter    time.Duration
}

// String says what the plan does, in a line.
func (p Plan) String() string {
	parts := make([]string, len(p.Stages))
	for i, st := range p.Stages {
		parts[i] = st.String()
	}
	return strings.Join(parts, ", then ")
}

// OneKind reports whether every stage's level counts the same thing
// (concurrency, or rate): only then can levels be read as one scale for
// capacity and the cliff.
func (p Plan) OneKind() bool {
	for _, st := range p.Stages {
		if st.LevelName() != p.Stages[0].LevelName() {
			return false
		}
	}
	return true
}

// Level is the first stage's load, the run's nominal level.
func (p Plan) Level() float64 {
	if len(p.Stages) == 0 {
		return 0
	}
	return p.Stages[0].Level()
}

// Run is one run of one profile against one endpoint.
type Run struct {
	Profile  string
	Plan     Plan
	Workload workload.Source
	// Sessions, when set, replaces Workload with multi-turn sessions: each
	// request of the plan becomes a session whose turns are sent in order,
	// each with the conversation before it.
	Sessions workload.SessionSource
	SLO      slo.Set
	Endpoint *client.Endpoint
	Client   *client.Client
	Sinks    []Sink

	nextID    atomic.Uint64
	cancelMu  sync.Mutex
	cancelRng *rand.Rand
	stage     atomic.Int64 // index of the stage running now
	inFlight  atomic.Int64
	done      atomic.Int64
	errors    atomic.Int64
	started   atomic.Int64 // unix nanos of the measured phase's start
	// stageStart is unix nanos of the running stage's (or warmup's) start.
	stageStart atomic.Int64
}

// Progress is a snapshot of a run in progress.
type Progress struct {
	Done, Errors, InFlight int64
	// Stage is the stage running now.
	Stage Stage
	// Level is the stage's level in force now (a ramp's current point).
	Level float64
	// StageIndex counts from 0.
	StageIndex int
	// Elapsed is time in the measured phase (0 during warmup).
	Elapsed time.Duration
}

// Progress reads the run's counters; safe to call while it runs.
func (r *Run) Progress() Progress {
	p := Progress{Done: r.done.Load(), Errors: r.errors.Load(), InFlight: r.inFlight.Load(), StageIndex: int(r.stage.Load())}
	if p.StageIndex < len(r.Plan.Stages) {
		p.Stage = r.Plan.Stages[p.StageIndex]
		p.Level = p.Stage.LevelAt(time.Since(time.Unix(0, r.stageStart.Load())))
	}
	if s := r.started.Load(); s > 0 {
		p.Elapsed = time.Since(time.Unix(0, s))
	}
	return p
}

// Execute runs the plan and returns the summary of the measured phase,
// with one summary per stage when there are several. Cancelling ctx stops
// the run and cancels requests in flight (counted as cancelled); the
// summary of what was measured is still returned with the context's error.
func (r *Run) Execute(ctx context.Context) (stats.Summary, error) {
	all := stats.NewAggregator(r.Profile, r.Endpoint.Name, r.Endpoint.Model, r.Plan.Level(), r.SLO.Objective)
	levels := newLevelGroups(r)
	results := make(chan *result.Request, 1024)
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for res := range results {
			if res.Warmup {
				continue
			}
			v := r.SLO.Evaluate(res)
			all.Add(res, v)
			levels.add(res, v)
			for _, s := range r.Sinks {
				s.Observe(res, v)
			}
		}
	}()

	var err error
	if r.Plan.Warmup > 0 && len(r.Plan.Stages) > 0 {
		warm := r.Plan.Stages[0]
		warm.Duration, warm.Requests, warm.RampTo = 0, r.Plan.Warmup, 0
		err = r.phase(ctx, 0, warm, true, results)
	}
	r.started.Store(time.Now().UnixNano())
	for i, st := range r.Plan.Stages {
		if err != nil || ctx.Err() != nil {
			break
		}
		r.stage.Store(int64(i))
		err = r.phase(ctx, i, st, false, results)
	}
	close(results)
	<-collected
	if err == nil {
		err = ctx.Err()
	}
	s := all.Summary()
	if per := levels.summaries(); len(per) > 1 {
		s.Stages = per
		if r.Plan.OneKind() {
			k := stats.FindKnee(s.Stages, r.SLO.Objective)
			s.Knee = &k
		}
	}
	return s, err
}

// phase issues a stage's requests until its duration ends, its request
// limit is reached or ctx is cancelled. Requests in flight when the
// duration ends run to completion (their own timeout bounds them); only
// ctx cancels them.
func (r *Run) phase(ctx context.Context, index int, st Stage, warmup bool, out chan<- *result.Request) error {
	r.stageStart.Store(time.Now().UnixNano())
	if st.Rate > 0 || st.Offsets != nil {
		return r.openLoop(ctx, index, st, warmup, out)
	}
	stop := ctx
	if st.Duration > 0 {
		var cancel context.CancelFunc
		stop, cancel = context.WithTimeout(ctx, st.Duration)
		defer cancel()
	}
	r.closedLoop(stop, ctx, index, st, warmup, out)
	return nil
}

// closedLoop keeps the stage's concurrency in flight. A concurrency ramp
// has one worker per request of its highest level, worker k sending only
// while the level in force is above k; without a ramp that is every worker
// all the time.
func (r *Run) closedLoop(stop, reqCtx context.Context, index int, st Stage, warmup bool, out chan<- *result.Request) {
	limit := st.Requests
	var issued atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	workers := int(math.Round(max(st.Level(), st.RampTo)))
	for k := range workers {
		wg.Go(func() {
			var idle *time.Ticker // made only for a worker the ramp has not reached
			defer func() {
				if idle != nil {
					idle.Stop()
				}
			}()
			for stop.Err() == nil {
				if st.RampTo != 0 && st.LevelAt(time.Since(start)) <= float64(k) {
					if idle == nil {
						idle = time.NewTicker(rampPoll)
					}
					select {
					case <-idle.C:
					case <-stop.Done():
					}
					continue
				}
				if limit > 0 && issued.Add(1) > int64(limit) {
					return
				}
				r.next(stop, reqCtx, index, st, time.Now(), warmup, out)
			}
		})
	}
	wg.Wait()
}

// next sends the workload's next request, or its next whole session.
func (r *Run) next(stop, ctx context.Context, index int, st Stage, scheduled time.Time, warmup bool, out chan<- *result.Request) {
	if r.Sessions != nil {
		r.session(stop, ctx, index, st, scheduled, r.Sessions.NextSession(), warmup, out)
		return
	}
	out <- r.one(ctx, index, st, scheduled, r.Workload.Next(), warmup)
}

// session sends a session's turns one after the other, each after its
// delay and with the conversation so far: the user's earlier turns and,
// as the assistant's, text of the length each answer had (the probe keeps
// facts, not answers). A turn that fails ends the session, as it would a
// user's; so does the end of the stage, between turns.
func (r *Run) session(stop, ctx context.Context, index int, st Stage, scheduled time.Time, s workload.Session, warmup bool, out chan<- *result.Request) {
	var history []openai.Message
	var words int
	for i, t := range s.Turns {
		if i > 0 {
			scheduled = time.Now().Add(t.Delay)
			if t.Delay > 0 {
				timer := time.NewTimer(t.Delay)
				select {
				case <-timer.C:
				case <-stop.Done():
				}
				timer.Stop()
			}
			if stop.Err() != nil {
				return
			}
		}
		n := len(strings.Fields(t.Text))
		p := client.Prompt{Text: t.Text, History: history, InputTokens: words + n, MaxTokens: t.OutputTokens, Stream: r.Sessions.Streaming()}
		res := r.one(ctx, index, st, scheduled, p, warmup)
		res.Session, res.Turn = s.ID, i
		out <- res
		if res.Outcome != result.Success {
			return
		}
		history = append(history,
			openai.Message{Role: "user", Content: t.Text},
			openai.Message{Role: "assistant", Content: workload.Words(uint64(res.ID), res.OutputTokens)})
		words += n + res.OutputTokens
	}
}

// levelGroups summarises a run by load level: one group per stage, and
// for a ramp one per step of the ramp (the level its results carry), so
// that a ramp's report reads latency against load like a sweep's.
type levelGroups struct {
	r      *Run
	groups []*levelGroup
}

type levelGroup struct {
	stage int
	level float64
	first time.Time // the earliest scheduled request, for the ramp's order
	agg   *stats.Aggregator
}

func newLevelGroups(r *Run) *levelGroups {
	g := &levelGroups{r: r}
	for i, st := range r.Plan.Stages {
		if st.RampTo == 0 { // a fixed level: its group exists even if no request finished
			g.groups = append(g.groups, &levelGroup{stage: i, level: st.Level(), agg: g.newAgg(st.Level())})
		}
	}
	return g
}

func (g *levelGroups) newAgg(level float64) *stats.Aggregator {
	return stats.NewAggregator(g.r.Profile, g.r.Endpoint.Name, g.r.Endpoint.Model, level, g.r.SLO.Objective)
}

func (g *levelGroups) add(res *result.Request, v slo.Verdict) {
	var grp *levelGroup
	for _, c := range g.groups {
		if c.stage == res.Stage && (c.level == res.Level || g.r.Plan.Stages[res.Stage].RampTo == 0) {
			grp = c
			break
		}
	}
	if grp == nil {
		grp = &levelGroup{stage: res.Stage, level: res.Level, first: res.Scheduled, agg: g.newAgg(res.Level)}
		g.groups = append(g.groups, grp)
	}
	if res.Scheduled.Before(grp.first) || grp.first.IsZero() {
		grp.first = res.Scheduled
	}
	grp.agg.Add(res, v)
}

// summaries returns one summary per group, in the order of the plan and,
// within a ramp, of time.
func (g *levelGroups) summaries() []stats.Summary {
	slices.SortStableFunc(g.groups, func(a, b *levelGroup) int {
		if a.stage != b.stage {
			return a.stage - b.stage
		}
		return a.first.Compare(b.first)
	})
	out := make([]stats.Summary, len(g.groups))
	for i, grp := range g.groups {
		out[i] = grp.agg.Summary()
	}
	return out
}

// rampPoll is how often an idle worker of a concurrency ramp looks whether
// the ramp has reached it.
const rampPoll = 10 * time.Millisecond

// openLoop sends every arrival its schedule puts inside the stage's
// duration, however late the dispatcher reaches it: the duration is kept
// on the schedule's clock, not the wall clock's, so a busy moment makes
// requests late (dispatch lag) but never drops the last of them. Only a
// concurrency cap's wait, and ctx, end the stage early.
func (r *Run) openLoop(ctx context.Context, index int, st Stage, warmup bool, out chan<- *result.Request) error {
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
		prompts, stopPrompts = r.prepare(ctx, limit)
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
	r.stageStart.Store(start.UnixNano())
	// stop is the stage's end for what may wait past it: a concurrency
	// cap's slot and a session's later turns.
	stop := ctx
	if st.Duration > 0 {
		var cancel context.CancelFunc
		stop, cancel = context.WithDeadline(ctx, start.Add(st.Duration))
		defer cancel()
	}
	var wg sync.WaitGroup
	defer wg.Wait() // before cancel: sessions end at the deadline, not when the last arrival was sent
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
			case <-ctx.Done():
				return nil
			}
		}
		if !waitUntil(ctx, timer, wake, next) {
			return nil
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

// lookahead is how many prompts are prepared before their send time: deep
// enough for the bursts of a trace (rows that share a timestamp).
const lookahead = 64

// prepare builds and encodes up to limit prompts (0: without end) ahead of
// their send times on its own goroutine, so that neither building a long
// prompt nor encoding it ever makes a request late. It returns once the
// first prompts are ready, so the schedule's clock starts with a full
// buffer.
func (r *Run) prepare(stop context.Context, limit int) (<-chan client.Prompt, func()) {
	out := make(chan client.Prompt, lookahead)
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; limit == 0 || i < limit; i++ {
			p := r.Workload.Next()
			if client.Encode(r.Endpoint, &p) == nil {
				// The body holds the text now; a long trace prompt need
				// not be kept twice while it waits in the lookahead.
				p.Text = ""
			} // on error Do encodes again and reports it
			select {
			case out <- p:
			case <-quit:
				return
			}
		}
	}()
	want := lookahead
	if limit > 0 {
		want = min(limit, lookahead)
	}
	for len(out) < want && stop.Err() == nil {
		select {
		case <-done:
			want = 0
		case <-time.After(time.Millisecond):
		}
	}
	return out, func() { close(quit); <-done }
}

var errInjectedCancel = errors.New("cancelled by the workload (cancellation injection)")

// injectCancel draws whether the next request is one the workload cancels.
func (r *Run) injectCancel() bool {
	if r.Plan.CancelFraction <= 0 {
		return false
	}
	r.cancelMu.Lock()
	defer r.cancelMu.Unlock()
	if r.cancelRng == nil {
		r.cancelRng = rand.New(rand.NewPCG(r.Plan.Seed, 0xcace1))
	}
	return r.cancelRng.Float64() < r.Plan.CancelFraction
}

func (r *Run) one(ctx context.Context, index int, st Stage, scheduled time.Time, p client.Prompt, warmup bool) *result.Request {
	res := &result.Request{
		ID: r.nextID.Add(1), Profile: r.Profile, Stage: index, Warmup: warmup, Scheduled: scheduled,
		Level: st.reportedLevel(scheduled.Sub(time.Unix(0, r.stageStart.Load()))),
	}
	if r.injectCancel() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, r.Plan.CancelAfter, errInjectedCancel)
		defer cancel()
	}
	r.inFlight.Add(1)
	r.Client.Do(ctx, r.Endpoint, p, res)
	r.inFlight.Add(-1)
	if !warmup {
		r.done.Add(1)
		if res.Outcome == result.Error {
			r.errors.Add(1)
		}
	}
	return res
}
