package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/hostile"
	"github.com/tokenprobe/tokenprobe/internal/sim"
	"github.com/tokenprobe/tokenprobe/probe/check"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/workload"
)

// closedPort is a local address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	addr, err := hostile.ClosedAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func runAgainst(t *testing.T, baseURL string, plan Plan, p Failure) *Run {
	t.Helper()
	c := client.New(client.Options{})
	t.Cleanup(c.CloseIdle)
	return &Run{
		Profile: "test", Plan: plan, Failure: p,
		Workload: workload.NewSynthetic(workload.Lengths{Mean: 10}, workload.Lengths{Mean: 10}, true, 1),
		Endpoint: &client.Endpoint{Name: "e", BaseURL: baseURL, API: openai.Chat, Model: "m", Timeout: 5 * time.Second},
		Client:   c,
	}
}

// Against a port where nothing listens, eight workers for 3 s sent 84,204
// requests before the failure policy; now they back off and the run is
// aborted early, as an error that says why.
func TestUnreachableEndpointIsNotFlooded(t *testing.T) {
	rec := &recorder{}
	run := runAgainst(t, "http://"+closedPort(t)+"/v1", Plan{Stages: []Stage{{Concurrency: 8, Duration: 3 * time.Second}}}, DefaultFailure())
	run.Sinks = []Sink{rec}
	began := time.Now()
	s, err := run.Execute(context.Background())
	var re *RunError
	if !errors.As(err, &re) || !re.Aborted || !s.Aborted || !strings.Contains(s.Error, "connect") || re.Reason != result.ReasonConnect {
		t.Fatalf("err %v (%+v), summary error %q aborted %v; want an abort naming connect failures", err, re, s.Error, s.Aborted)
	}
	if n := len(rec.seen); n >= 100 || s.Errors < DefaultFailure().AbortMinRequests {
		t.Fatalf("%d requests sent (%d errors); want fewer than 100 and at least the abort's minimum", n, s.Errors)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("the abort took %s", took)
	}
	if s.FailureWaitSeconds <= 0 {
		t.Error("no backoff wait recorded")
	}
	if VerdictOf(&s, err) != Errored {
		t.Errorf("verdict %s, want error", VerdictOf(&s, err))
	}
}

// A server answering 429 with Retry-After: 1 gets no request in the
// second after any 429 (but those already on their way when it came),
// from any worker, and the run is aborted.
func TestRetryAfterIsObeyed(t *testing.T) {
	run, _ := newRun(t, sim.Config{Slots: 8, DecodeBase: time.Millisecond, Faults: sim.Faults{Error429: 1, RetryAfter: time.Second}},
		Plan{Stages: []Stage{{Concurrency: 4, Duration: 10 * time.Second}}}, 10, 4)
	run.Failure = DefaultFailure()
	run.Failure.AbortMinRequests = 8
	rec := &recorder{}
	run.Sinks = []Sink{rec}
	began := time.Now()
	s, err := run.Execute(context.Background())
	took := time.Since(began)
	if !s.Aborted || err == nil {
		t.Fatalf("not aborted: %v", err)
	}
	var answered []*result.Request
	for _, r := range rec.seen {
		switch {
		case r.Outcome == result.Cancelled: // in flight when the run was aborted
		case r.RetryAfter != time.Second || r.Reason != result.ReasonRateLimit:
			t.Fatalf("request %d: reason %s, Retry-After %s", r.ID, r.Reason, r.RetryAfter)
		default:
			answered = append(answered, r)
		}
	}
	// The abort comes at the 8th answer; the 4 workers may have sent up
	// to 3 more. Rounds are a second apart: at least two, at most eight
	// (a worker that wakes after another's new 429 waits a round more).
	if n := len(answered); n < 8 || len(rec.seen) > 11 || took < 950*time.Millisecond || took > 10*time.Second {
		t.Fatalf("%d answered of %d sent in %s; want 8 to 11 sent, at least 8 answered, in rounds a second apart", n, len(rec.seen), took)
	}
	// 200 ms either side of the hold leave room for a request whose send
	// crossed the 429's answer on a busy machine.
	const slack = 200 * time.Millisecond
	for _, a := range answered {
		for _, r := range rec.seen {
			if since := r.Start.Sub(a.End); since > slack && since < time.Second-slack {
				t.Fatalf("request %d sent %v after request %d's 429 asked for 1s", r.ID, since, a.ID)
			}
		}
	}
	if f := s.Failures; len(f) != 1 || f[0].Reason != "rate_limit" || f[0].Statuses["429"] != len(answered) || f[0].Hint == "" {
		t.Fatalf("failures %+v", f)
	}
}

// An open loop sends nothing while a Retry-After is in force: those
// arrivals are counted as dropped, never sent, never lost.
func TestOpenLoopHoldsForRetryAfter(t *testing.T) {
	run, _ := newRun(t, sim.Config{Slots: 8, DecodeBase: time.Millisecond, Faults: sim.Faults{Error429: 1, RetryAfter: 2 * time.Second}},
		Plan{Stages: []Stage{{Rate: 100, Arrival: "constant", Duration: time.Second}}}, 10, 4)
	run.Failure = DefaultFailure()
	run.Failure.AbortMinRequests = 0 // no abort: the hold alone is tested
	s, _ := run.Execute(context.Background())
	dropped := s.Dropped[dropReasonRetryAfter]
	// 100 arrivals: the first is sent and answered 429 with a 2 s pause,
	// which covers the rest of the stage (a few more may leave before the
	// first answer is back).
	if s.Requests+dropped != 100 || s.Requests > 10 || dropped < 90 {
		t.Fatalf("sent %d, dropped %d; want about 1 sent and the rest of 100 dropped", s.Requests, dropped)
	}
}

// A worker whose last request failed has nothing left to send: the run
// ends without waiting the backoff or Retry-After meant for a next one.
func TestLastFailureIsNotWaitedFor(t *testing.T) {
	run, _ := newRun(t, sim.Config{Slots: 8, DecodeBase: time.Millisecond, Faults: sim.Faults{Error429: 1, RetryAfter: 10 * time.Second}},
		Plan{Stages: []Stage{{Concurrency: 2, Requests: 2}}}, 10, 4)
	run.Failure = DefaultFailure()
	began := time.Now()
	s, _ := run.Execute(context.Background())
	if s.Errors != 2 {
		t.Fatalf("%d errors, want the two 429s", s.Errors)
	}
	// The Retry-After is 10 s; anything near it is the bug.
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("the run took %v after its last request", took)
	}
}

// A Retry-After holds every run against the endpoint, not only the one
// that heard it: a run started during the hold sends nothing before its
// end (a closed loop waits, an open loop drops its arrivals).
func TestRetryAfterHoldsOtherRuns(t *testing.T) {
	first, _ := newRun(t, sim.Config{Slots: 8, DecodeBase: time.Millisecond, Faults: sim.Faults{Error429: 1, RetryAfter: 2 * time.Second}},
		Plan{Stages: []Stage{{Concurrency: 1, Requests: 1}}}, 10, 4)
	first.Failure = DefaultFailure()
	s, _ := first.Execute(context.Background())
	if s.Errors != 1 || s.ByReason["rate_limit"] != 1 {
		t.Fatalf("the first run: %d errors %v; want one 429", s.Errors, s.ByReason)
	}
	heard := time.Now()
	another := func(plan Plan) *Run {
		r := &Run{Profile: "other", Plan: plan, Failure: DefaultFailure(), Workload: first.Workload, Endpoint: first.Endpoint, Client: first.Client}
		r.Failure.AbortMinRequests = 0
		return r
	}

	open, _ := another(Plan{Stages: []Stage{{Rate: 50, Arrival: "constant", Duration: time.Second}}}).Execute(context.Background())
	if open.Requests != 0 || open.Dropped[dropReasonRetryAfter] != 50 {
		t.Fatalf("an open loop during the hold sent %d, dropped %v; want none sent, 50 dropped", open.Requests, open.Dropped)
	}

	rec := &recorder{}
	closed := another(Plan{Stages: []Stage{{Concurrency: 2, Requests: 2}}})
	closed.Sinks = []Sink{rec}
	c, _ := closed.Execute(context.Background())
	if len(rec.seen) != 2 || c.FailureWaitSeconds <= 0 {
		t.Fatalf("a closed loop during the hold: %d requests, waited %vs", len(rec.seen), c.FailureWaitSeconds)
	}
	for _, r := range rec.seen {
		// The hold ends 2 s after the 429's answer, which came before
		// heard.
		if r.Start.Before(heard.Add(time.Second)) {
			t.Fatalf("request %d sent %v after the 429 was heard, inside its 2 s hold", r.ID, r.Start.Sub(heard))
		}
	}
}

// A run in which no request succeeded is an error even without an slo
// block and with the abort off; so is one with more failures than the
// policy allows.
func TestBrokenRunsAreErrors(t *testing.T) {
	off := Failure{MaxErrorRatio: 0.5}
	run := runAgainst(t, "http://"+closedPort(t)+"/v1", Plan{Stages: []Stage{{Concurrency: 1, Requests: 3}}}, off)
	s, err := run.Execute(context.Background())
	var re *RunError
	if !errors.As(err, &re) || re.Aborted || s.Error != "no request succeeded: all 3 failed" {
		t.Fatalf("err %v, summary error %q", err, s.Error)
	}
	if VerdictOf(&s, err) != Errored {
		t.Fatalf("verdict %s", VerdictOf(&s, err))
	}

	half, _ := newRun(t, sim.Config{Slots: 8, DecodeBase: time.Millisecond, Seed: 7, Faults: sim.Faults{Error500: 0.8}},
		Plan{Stages: []Stage{{Concurrency: 2, Requests: 40}}}, 10, 4)
	half.Failure = off
	s, err = half.Execute(context.Background())
	if s.Success == 0 || !errors.As(err, &re) || !strings.Contains(s.Error, "more than the policy's 50%") {
		t.Fatalf("%d of %d failed: err %v, summary error %q", s.Errors, s.Requests, err, s.Error)
	}
}

func TestBackoffDoublesToItsCapWithJitter(t *testing.T) {
	p := Failure{BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second, RetryAfterMax: 30 * time.Second}
	b := backoff{p: &p}
	fail := &result.Request{Outcome: result.Error, Reason: result.ReasonConnect}
	for i, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		want *= time.Millisecond
		if d := b.after(fail); d < want/2 || d > want {
			t.Fatalf("failure %d: waited %s, want within [%s, %s]", i+1, d, want/2, want)
		}
	}
	if d := b.after(&result.Request{Outcome: result.Cancelled}); d != 0 {
		t.Fatalf("a cancellation waited %s", d)
	}
	if d := b.after(&result.Request{Outcome: result.Error, RetryAfter: time.Minute}); d != 30*time.Second {
		t.Fatalf("Retry-After of a minute waited %s, want the 30s cap", d)
	}
	if d := b.after(&result.Request{Outcome: result.Success}); d != 0 {
		t.Fatalf("a success waited %s", d)
	}
	if d := b.after(fail); d > 100*time.Millisecond {
		t.Fatalf("after a success the backoff did not start over: %s", d)
	}
}

// An interrupted run stops sending at once and lets the requests in
// flight finish: they are successes, not cancellations, and the summary
// says interrupted.
func TestStopLetsRequestsInFlightFinish(t *testing.T) {
	run, _ := newRun(t, sim.Config{Slots: 4, DecodeBase: 10 * time.Millisecond}, Plan{Stages: []Stage{{Concurrency: 4, Duration: time.Minute}}}, 10, 30)
	stop, interrupt := context.WithCancel(context.Background())
	run.Stop = stop
	go func() {
		for run.Progress().InFlight < 4 {
			time.Sleep(time.Millisecond)
		}
		interrupt()
	}()
	s, err := run.Execute(context.Background())
	if !errors.Is(err, ErrInterrupted) || !s.Interrupted || VerdictOf(&s, err) != Cancelled {
		t.Fatalf("err %v, interrupted %v", err, s.Interrupted)
	}
	if s.Success != 4 || s.Cancelled != 0 || s.Errors != 0 {
		t.Fatalf("success %d, cancelled %d, errors %d; want the 4 in flight to finish", s.Success, s.Cancelled, s.Errors)
	}
}

// A model that answers wrongly is measured, not backed off from, unless
// the profile's checks say abort: then the policy aborts the run, naming
// the wrong answers.
func TestWrongAnswersFailThePolicyOnlyWhenAsked(t *testing.T) {
	s, err := sim.Start("127.0.0.1:0", sim.Config{Model: "m", PrefillBase: time.Millisecond, DecodeBase: 100 * time.Microsecond, Seed: 1,
		Faults: sim.Faults{WrongModel: "tiny-model", WrongModelRate: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, abort := range []bool{false, true} {
		p := DefaultFailure()
		p.WrongAnswersFail = abort
		p.BackoffBase, p.BackoffMax = time.Millisecond, 4*time.Millisecond
		run := runAgainst(t, s.URL(), Plan{Stages: []Stage{{Concurrency: 2, Requests: 60}}}, p)
		// Every answer names the fallback, the first included: only a check
		// that knows the name asked for calls them wrong.
		run.Checks = check.Set{Model: check.ModelExact}
		sum, err := run.Execute(context.Background())
		var re *RunError
		switch {
		case !abort && (err != nil || sum.WrongAnswers != 60 || sum.FailureWaitSeconds != 0):
			t.Errorf("abort off: err %v, %d wrong answers of 60, %.3fs of backoff; want no error, all 60, no backoff", err, sum.WrongAnswers, sum.FailureWaitSeconds)
		case abort && (!errors.As(err, &re) || !re.Aborted || !strings.Contains(sum.Error, "wrong_answer") || sum.WrongAnswers >= 60 || sum.FailureWaitSeconds == 0):
			t.Errorf("abort on: err %v, summary error %q after %d wrong answers, %.3fs of backoff; want an abort naming wrong_answer before 60, after backing off", err, sum.Error, sum.WrongAnswers, sum.FailureWaitSeconds)
		}
	}
}

// The blog posts' own experiment, 50 users on a local model: answers kept
// coming every few seconds, yet the first request to time out aborted the
// run as "unreachable", its down clock started at that request's start.
// "Unreachable" is no answer for that long: a server that answers every
// request but lets one in fifty hang past the timeout finishes its run,
// those counted as timeouts. Scaled down: a 400 ms timeout against a
// 200 ms unreachable limit, as the defaults' 120 s against 30 s.
func TestATimeoutAmongAnswersIsNoOutage(t *testing.T) {
	// Answers of about 60 ms: the other workers answer all through a hung
	// request's 400 ms (at 1 ms the next hangs came before it timed out,
	// and all four workers hung at once: that is an outage).
	// The simulator's handler in the same server, not behind a
	// ReverseProxy: under the race detector on a busy machine, the proxy's
	// own upstream connection was now and then closed under a healthy
	// answer, which the client rightly called a broken stream.
	sh, err := sim.NewHandler(sim.Config{Model: "m", Slots: 8, PrefillBase: time.Millisecond, DecodeBase: 5 * time.Millisecond, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	hang := make(chan struct{})
	var release sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%50 == 0 {
			// Past the request's timeout, before any head. The body read
			// first lets the server see the client hang up.
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-hang:
			}
			return
		}
		sh.ServeHTTP(w, r)
	}))
	stop := func() {
		release.Do(func() { close(hang) })
		srv.Close()
	}
	t.Cleanup(stop)
	p := DefaultFailure()
	p.AbortUnreachable = 200 * time.Millisecond
	run := runAgainst(t, srv.URL+"/v1", Plan{Stages: []Stage{{Concurrency: 4, Requests: 200}}}, p)
	run.Endpoint.Timeout = 400 * time.Millisecond
	errs := &errorRecorder{}
	run.Sinks = []Sink{errs}
	sum, err := run.Execute(context.Background())
	if err != nil || sum.Aborted {
		t.Fatalf("err %v, aborted %v (%s); want the run to finish", err, sum.Aborted, sum.Error)
	}
	if sum.Errors < 3 || sum.Success < 190 || sum.ByReason["timeout"] != sum.Errors {
		t.Fatalf("%d successes, %d errors %v; want the hung requests counted as timeouts; errors: %s", sum.Success, sum.Errors, sum.ByReason, errs)
	}
	// The same server gone: no answer at all for the limit aborts.
	stop()
	run = runAgainst(t, srv.URL+"/v1", Plan{Stages: []Stage{{Concurrency: 4, Duration: 5 * time.Second}}}, p)
	if sum, err = run.Execute(context.Background()); !sum.Aborted || !strings.Contains(sum.Error, "unreachable") && !strings.Contains(sum.Error, "connect") {
		t.Fatalf("a closed server: err %v, %q", err, sum.Error)
	}
}

// errorRecorder keeps each failed request's reason and error, for a test's
// message.
type errorRecorder struct {
	mu   sync.Mutex
	errs []string
}

func (e *errorRecorder) Observe(res *result.Request, _ slo.Verdict) {
	if res.Outcome != result.Error {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, fmt.Sprintf("at %s: %s after %s (first byte %s, %d chunks): %s", res.Start.Format("05.000"), res.Reason, res.End.Sub(res.Start).Round(time.Millisecond), res.FirstByte.Round(time.Millisecond), res.ContentChunks, res.Err))
}

func (e *errorRecorder) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.errs, "; ")
}

// aiperf's grace period: requests in flight when a stage's duration ends
// have Plan.Grace to finish, then are cancelled and counted as such; a
// server that never answers holds the run no longer, whether the loop is
// closed or open. Without a grace they would wait for their timeout, an
// hour here, and the test's own deadline would cancel them instead.
func TestGracePeriodEndsRequestsInFlight(t *testing.T) {
	hung := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-hung:
		}
	}))
	t.Cleanup(func() { close(hung); srv.Close() })
	for name, st := range map[string]Stage{
		"closed loop": {Concurrency: 3, Duration: 100 * time.Millisecond},
		"open loop":   {Rate: 20, Arrival: "constant", Duration: 100 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			run := runAgainst(t, srv.URL+"/v1", Plan{Stages: []Stage{st}, Grace: 200 * time.Millisecond}, Failure{})
			run.Endpoint.Timeout = time.Hour
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			s, err := run.Execute(ctx)
			if ctx.Err() != nil {
				t.Fatalf("the run ended with the test's deadline, not the grace period: %v", err)
			}
			if s.Cancelled == 0 || s.Cancelled != s.Requests || s.Errors != 0 || s.Interrupted {
				t.Errorf("%d requests: %d cancelled, %d errors, interrupted %v; want every one cancelled by the grace period", s.Requests, s.Cancelled, s.Errors, s.Interrupted)
			}
		})
	}
}
