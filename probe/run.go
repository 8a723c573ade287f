// Package probe runs workload profiles against endpoints: it turns a plan
// of load into scheduled requests, measures each one through the streaming
// client, and hands every result to the summary and the sinks.
package probe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/probehealth"
	"github.com/tokenprobe/tokenprobe/probe/check"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/stats"
	"github.com/tokenprobe/tokenprobe/probe/workload"
)

// Run is one run of one profile against one endpoint.
type Run struct {
	Profile  string
	Plan     Plan
	Workload workload.Source
	// Sessions, when set, replaces Workload with multi-turn sessions: each
	// request of the plan becomes a session whose turns are sent in order,
	// each with the conversation before it.
	Sessions workload.SessionSource
	// PrefixCache, when set, replaces Workload with a prefix-cache probe's
	// triples: each request of the plan becomes a triple, its three
	// requests sent one after the other (cold, warm, fresh).
	PrefixCache *workload.PrefixCache
	// Identity, when set, collects a model-identity probe's answers (the
	// prompts' IdentityPrompt) and judges them at the run's end.
	Identity *stats.IdentityRun
	SLO      slo.Set
	// Checks judge every answer; the zero Set checks that the answer's
	// model is the one asked for.
	Checks check.Set
	// Extra are fields the profile adds to every request body, beside the
	// endpoint's (the response_format of a json_schema check).
	Extra map[string]any
	// Failure is what the run does when requests fail (DefaultFailure
	// unless the profile says otherwise).
	Failure  Failure
	Endpoint *client.Endpoint
	Client   *client.Client
	Sinks    []Sink
	// IDBase is added to every request's number in the run (1, 2, ...):
	// the daemon makes request ids unique across runs with it, so an
	// exemplar's request_id finds its record.
	IDBase uint64
	// Stop, when set and done, ends the run gracefully: nothing more is
	// sent, the requests in flight run on until they end or the context
	// given to Execute ends, and the summary is marked interrupted.
	Stop context.Context
	// OSL is where output lengths come from; CountTokens, when set, counts
	// an answer's tokens for it (a tokenizer).
	OSL         OSL
	CountTokens func(text string) (int, error)
	// MaxWrongRatio is the share of wrong answers the run tolerates before
	// its verdict fails, with or without an SLO (0: none; setup's default
	// is DefaultMaxWrongRatio).
	MaxWrongRatio float64
	// OnPhase, when set, is called as the warmup and each stage begin,
	// before their first request: the runner reads the server's metrics
	// there, so that each stage's figures come from its own window.
	OnPhase func()

	nextID    atomic.Uint64
	seq       atomic.Uint64 // Seq, once asked
	cancelMu  sync.Mutex
	cancelRng *rand.Rand
	stage     atomic.Int64 // index of the stage running now
	inFlight  atomic.Int64
	done      atomic.Int64
	errors    atomic.Int64
	// warmDone and warmErrors are the warmup's, shown while it runs.
	warmDone, warmErrors atomic.Int64
	started              atomic.Int64 // unix nanos of the measured phase's start
	// stageStart is the running stage's (or warmup's) start, in nanos
	// after monoEpoch: on the monotonic clock, as the schedule is, so that
	// a request's place in its stage is the schedule's own (a wall clock
	// stepped during the stage moves neither).
	stageStart atomic.Int64
	waited     atomic.Int64 // nanos workers waited after failures
	dropped    drops
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
	// Elapsed is time in the measured phase, or in the warmup while
	// Warmup is set.
	Elapsed time.Duration
	// Warmup is set while the warmup runs: Done and Errors are then its
	// own, out of Plan.Warmup.
	Warmup bool
}

// Progress reads the run's counters; safe to call while it runs.
func (r *Run) Progress() Progress {
	p := Progress{Done: r.done.Load(), Errors: r.errors.Load(), InFlight: r.inFlight.Load(), StageIndex: int(r.stage.Load())}
	if p.StageIndex < len(r.Plan.Stages) {
		p.Stage = r.Plan.Stages[p.StageIndex]
		p.Level = p.Stage.LevelAt(time.Since(r.stageAt()))
	}
	switch s := r.started.Load(); {
	case s > 0:
		p.Elapsed = time.Since(time.Unix(0, s))
	case r.Plan.Warmup > 0:
		// A long warmup showed "0.0s" and nothing done for minutes.
		p.Warmup, p.Done, p.Errors = true, r.warmDone.Load(), r.warmErrors.Load()
		if r.stageStart.Load() != 0 {
			p.Elapsed = time.Since(r.stageAt())
		}
	}
	return p
}

// monoEpoch anchors stageStart: a time.Time with a monotonic reading,
// which an atomic cannot hold.
var monoEpoch = time.Now()

// markStage records t, read from time.Now, as the running stage's start.
func (r *Run) markStage(t time.Time) { r.stageStart.Store(int64(t.Sub(monoEpoch))) }

// stageAt is the running stage's start, with its monotonic reading.
func (r *Run) stageAt() time.Time { return monoEpoch.Add(time.Duration(r.stageStart.Load())) }

// runSeqs numbers the runs of the process.
var runSeqs atomic.Uint64

// Seq is the run's number, unique among the runs of this process and
// never 0: every request of the run carries it (result.Request.RunSeq).
func (r *Run) Seq() uint64 {
	if s := r.seq.Load(); s != 0 {
		return s
	}
	r.seq.CompareAndSwap(0, runSeqs.Add(1))
	return r.seq.Load()
}

// Execute runs the plan and returns the summary of the measured phase,
// with one summary per stage when there are several. Cancelling ctx stops
// the run and cancels requests in flight (counted as cancelled); the
// summary of what was measured is still returned with the context's error.
func (r *Run) Execute(parent context.Context) (stats.Summary, error) {
	ctx, abort := context.WithCancelCause(parent)
	defer abort(nil)
	if r.Checks.Served == nil && r.Endpoint != nil {
		// The model check learns what the endpoint serves, for as long as
		// the endpoint lasts: across this run and the next.
		r.Checks.Served = &r.Endpoint.Served
	}
	g := &guard{p: r.Failure, abort: abort}
	// How promptly this process runs while the run goes: the delay any of
	// its timestamps could have had, which the verdicts discount.
	health := probehealth.Begin()
	defer health.End()
	all := stats.NewAggregator(r.Profile, r.Endpoint.Name, r.Endpoint.Model, r.Plan.Level(), r.SLO.Objective)
	all.SetMaxWrongRatio(r.MaxWrongRatio)
	if r.PrefixCache != nil {
		all.SetPrefixCache(r.PrefixCache.MinSpeedup)
	}
	levels := newLevelGroups(r)
	results := make(chan *result.Request, 1024)
	collected := make(chan struct{})
	counted := make(chan struct{}) // answers a barrier: every result before it is counted
	var warm stats.Warmup
	go func() {
		defer close(collected)
		for res := range results {
			if res == barrier {
				counted <- struct{}{}
				continue
			}
			g.add(res)
			if res.Warmup {
				warm.Add(res)
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

	// send ends what is sent; ctx, the requests in flight too.
	send, stopSending := context.WithCancel(ctx)
	defer stopSending()
	if r.Stop != nil {
		defer context.AfterFunc(r.Stop, stopSending)()
	}
	var err error
	if r.Plan.Warmup > 0 && len(r.Plan.Stages) > 0 {
		warm := r.Plan.Stages[0]
		warm.Duration, warm.Requests, warm.RampTo = 0, r.Plan.Warmup, 0
		r.onPhase()
		err = r.phase(send, ctx, 0, warm, true, results)
	}
	r.started.Store(time.Now().UnixNano())
	var found *stats.Search
	if r.Plan.Search != nil && err == nil {
		var res stats.Search
		res, err = r.search(send, ctx, results, counted, levels)
		found = &res
	}
	for i, st := range r.Plan.Stages {
		if found != nil || err != nil || send.Err() != nil {
			break
		}
		r.stage.Store(int64(i))
		r.onPhase()
		w := probehealth.Begin()
		err = r.phase(send, ctx, i, st, false, results)
		levels.setProbe(i, w.End())
	}
	close(results)
	<-collected
	all.SetProbe(probeOf(health.End()))
	var stopped *RunError
	if err == nil && errors.As(context.Cause(ctx), &stopped) {
		err = stopped
	}
	if err == nil {
		err = parent.Err()
	}
	interrupted := r.Stop != nil && r.Stop.Err() != nil
	if err == nil && interrupted {
		err = ErrInterrupted
	}
	s := all.Summary()
	s.Interrupted = interrupted
	s.FailureWaitSeconds = time.Duration(r.waited.Load()).Seconds()
	s.Dropped = r.dropped.snapshot()
	if warm.Requests > 0 {
		s.Warmup = &warm
	}
	if err == nil {
		err = r.Failure.broken(&s)
	}
	if errors.As(err, &stopped) {
		s.Error, s.Aborted = stopped.Error(), stopped.Aborted
	}
	if per := levels.summaries(); len(per) > 1 || found != nil {
		s.Stages = per
		if found != nil {
			// A search's steps, read against load like a sweep's levels.
			slices.SortStableFunc(s.Stages, func(a, b stats.Summary) int { return cmp.Compare(a.Level, b.Level) })
		}
		if r.Plan.OneKind() {
			k := stats.FindKnee(s.Stages, r.SLO.Objective)
			if found != nil {
				k.CapacityAtSLO = found.Capacity
			}
			s.Knee = &k
		}
	}
	s.Search = found
	if found != nil && s.Objective > 0 {
		// A search's steps overshoot the capacity on purpose: its verdict
		// is whether a level within its bounds met the objective, not the
		// attainment pooled over every step.
		s.Passed = found.Capacity > 0 && !s.WrongAnswersOver()
		// No capacity because its lowest level had not enough evidence
		// either way is no failure: more requests a step may show it.
		s.Undecided = found.Capacity == 0 && !s.WrongAnswersOver() && len(found.Tried) > 0 && found.Tried[0].Evidence.Outcome == stats.Undecided
	}
	if name, _ := r.Checks.Served.Name(); name != "" && name != s.Model {
		s.ServedModel = stats.ServerText(name)
	}
	s.SLOThresholds = r.SLO.Values()
	if r.Identity != nil {
		// Only a run carried out in full teaches the reference.
		s.ModelIdentity = r.Identity.Finish(err == nil && !interrupted)
	}
	for i := range s.Stages {
		s.Stages[i].SLOThresholds = s.SLOThresholds
	}
	if len(s.Stages) > 1 {
		// A staged run has no one level: its range says what it covered.
		lo, hi := s.Stages[0].Level, s.Stages[0].Level
		for _, st := range s.Stages {
			lo, hi = min(lo, st.Level), max(hi, st.Level)
		}
		s.Level, s.LevelRange = 0, []float64{lo, hi}
	}
	if err != nil {
		// A run that could not be carried out passes nothing, whatever
		// the requests it did make attained.
		s.Passed, s.Undecided = false, false
		if s.Error == "" && !s.Interrupted {
			s.Error = err.Error()
		}
	}
	s.Verdict = s.VerdictLine()
	return s, err
}

func (r *Run) onPhase() {
	if r.OnPhase != nil {
		r.OnPhase()
	}
}

// ErrInterrupted is Execute's error for a run its Stop ended: a
// cancellation, so its verdict is cancelled.
var ErrInterrupted = fmt.Errorf("interrupted: %w", context.Canceled)

// phase issues a stage's requests until its duration ends, its request
// limit is reached or send is cancelled. Requests in flight when the
// duration ends run to completion (their own timeout bounds them); only
// ctx cancels them.
func (r *Run) phase(send, ctx context.Context, index int, st Stage, warmup bool, out chan<- *result.Request) error {
	r.markStage(time.Now())
	if st.Rate > 0 || st.Offsets != nil {
		return r.openLoop(send, ctx, index, st, warmup, out)
	}
	// Prompts are built and encoded ahead, as the open loop's are, so that
	// building one (a tokenizer's work, a long prompt) never counts in a
	// request's dispatch lag or latency; the stage's clock starts once
	// the first are ready. A session's later turns wait for its answers:
	// nothing to prepare.
	var prompts <-chan client.Prompt
	if r.Sessions == nil && r.PrefixCache == nil {
		var stopPrompts func()
		prompts, stopPrompts = r.prepare(send, st.Requests)
		defer stopPrompts()
		r.markStage(time.Now())
	}
	stop := send
	if st.Duration > 0 {
		var cancel context.CancelFunc
		stop, cancel = context.WithTimeout(send, st.Duration)
		defer cancel()
	}
	reqs, endReqs := r.drain(ctx, stop.Done())
	defer endReqs()
	r.closedLoop(stop, reqs, index, st, warmup, out, prompts)
	return nil
}

// drain is the context of a stage's requests: ctx itself without a
// Plan.Grace; with one, a child cancelled Grace after every one of ends
// has closed (the stage stopped sending), so that requests still in
// flight then end as cancelled, counted, as aiperf's grace period ends
// them. The returned func releases it once the stage's requests are over.
func (r *Run) drain(ctx context.Context, ends ...<-chan struct{}) (context.Context, func()) {
	if r.Plan.Grace <= 0 {
		return ctx, func() {}
	}
	reqs, cancel := context.WithCancel(ctx)
	go func() {
		for _, end := range ends {
			select {
			case <-end:
			case <-reqs.Done():
				return
			}
		}
		t := time.NewTimer(r.Plan.Grace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-reqs.Done():
		}
	}()
	return reqs, cancel
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
			p.Extra = r.Extra
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
	inStage := scheduled.Sub(r.stageAt())
	res := &result.Request{
		ID: r.IDBase + r.nextID.Add(1), RunSeq: r.Seq(), Profile: r.Profile, Stage: index, Warmup: warmup,
		Scheduled: scheduled, ScheduledInStage: inStage, Level: st.reportedLevel(inStage),
	}
	judging := ctx // the run's: an impatient user's timer ends the request, not its judging
	if r.injectCancel() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, r.Plan.CancelAfter, errInjectedCancel)
		defer cancel()
	}
	p.KeepText = r.keepText() || r.Checks.NeedsText() || p.Expect != nil || p.IdentityPrompt > 0
	p.KeepLimit = r.Checks.AnswerLimit()
	if p.Extra == nil {
		p.Extra = r.Extra
	}
	r.inFlight.Add(1)
	r.Client.Do(ctx, r.Endpoint, p, res)
	r.inFlight.Add(-1)
	// Off the request's clock: its length, then its answer's checks.
	r.settleOSL(res)
	r.Checks.Run(judging, res, func() openai.Answer { return openai.ParseAnswer(openai.API(res.API), res.Answer) }, p.Expect)
	if p.IdentityPrompt > 0 && r.Identity != nil && res.Measured() && !warmup {
		a := openai.ParseAnswer(openai.API(res.API), res.Answer)
		r.Identity.Answer(p.IdentityPrompt-1, a.Text, a.Logprobs)
	}
	res.Answer = nil
	r.hold(res)
	done, errs := &r.done, &r.errors
	if warmup {
		done, errs = &r.warmDone, &r.warmErrors
	}
	done.Add(1)
	if res.Outcome == result.Error {
		errs.Add(1)
	}
	return res
}
