// Package probe runs workload profiles against endpoints: it turns a plan
// of load into scheduled requests, measures each one through the streaming
// client, and hands every result to the summary and the sinks.
package probe

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/load"
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

// Plan is how hard and how long a run pushes.
type Plan struct {
	// Concurrency > 0 runs a closed loop: that many requests in flight.
	Concurrency int
	// Rate > 0 runs an open loop with Arrival gaps, capped at
	// MaxConcurrency in flight when that is set.
	Rate           float64
	Arrival        string
	MaxConcurrency int
	// Duration and Requests stop the measured phase, whichever is first.
	Duration time.Duration
	Requests int
	// Warmup requests run first, in their own phase, and are not measured.
	Warmup int
	Seed   uint64
}

// Level is the load level the plan asks for: concurrency or rate.
func (p Plan) Level() float64 {
	if p.Rate > 0 {
		return p.Rate
	}
	return float64(p.Concurrency)
}

// Run is one run of one profile against one endpoint.
type Run struct {
	Profile  string
	Plan     Plan
	Workload workload.Source
	SLO      slo.Set
	Endpoint *client.Endpoint
	Client   *client.Client
	Sinks    []Sink

	nextID   atomic.Uint64
	inFlight atomic.Int64
	done     atomic.Int64
	errors   atomic.Int64
	started  atomic.Int64 // unix nanos of the measured phase's start
}

// Progress is a snapshot of a run in progress.
type Progress struct {
	Done, Errors, InFlight int64
	// Elapsed is time in the measured phase (0 during warmup).
	Elapsed time.Duration
}

// Progress reads the run's counters; safe to call while it runs.
func (r *Run) Progress() Progress {
	p := Progress{Done: r.done.Load(), Errors: r.errors.Load(), InFlight: r.inFlight.Load()}
	if s := r.started.Load(); s > 0 {
		p.Elapsed = time.Since(time.Unix(0, s))
	}
	return p
}

// Execute runs the plan and returns the summary of the measured phase.
// Cancelling ctx stops the run and cancels requests in flight (counted as
// cancelled); the summary of what was measured is still returned with the
// context's error.
func (r *Run) Execute(ctx context.Context) (stats.Summary, error) {
	agg := stats.NewAggregator(r.Profile, r.Endpoint.Name, r.Endpoint.Model, r.Plan.Level(), r.SLO.Objective)
	results := make(chan *result.Request, 1024)
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for res := range results {
			if res.Warmup {
				continue
			}
			v := r.SLO.Evaluate(res)
			agg.Add(res, v)
			for _, s := range r.Sinks {
				s.Observe(res, v)
			}
		}
	}()

	var err error
	if r.Plan.Warmup > 0 {
		err = r.phase(ctx, ctx, r.Plan.Warmup, true, results)
	}
	if err == nil {
		// Requests in flight when the duration ends run to completion (their
		// own timeout bounds them); only ctx cancels them.
		stop := ctx
		if r.Plan.Duration > 0 {
			var cancel context.CancelFunc
			stop, cancel = context.WithTimeout(ctx, r.Plan.Duration)
			defer cancel()
		}
		r.started.Store(time.Now().UnixNano())
		err = r.phase(stop, ctx, r.Plan.Requests, false, results)
	}
	close(results)
	<-collected
	if err == nil {
		err = ctx.Err()
	}
	return agg.Summary(), err
}

// phase issues requests until stop ends or limit requests were issued.
func (r *Run) phase(stop, reqCtx context.Context, limit int, warmup bool, out chan<- *result.Request) error {
	if r.Plan.Rate > 0 {
		return r.openLoop(stop, reqCtx, limit, warmup, out)
	}
	r.closedLoop(stop, reqCtx, limit, warmup, out)
	return nil
}

func (r *Run) closedLoop(stop, reqCtx context.Context, limit int, warmup bool, out chan<- *result.Request) {
	var issued atomic.Int64
	var wg sync.WaitGroup
	for range r.Plan.Concurrency {
		wg.Go(func() {
			for stop.Err() == nil {
				if limit > 0 && issued.Add(1) > int64(limit) {
					return
				}
				p := r.Workload.Next()
				out <- r.one(reqCtx, time.Now(), p, warmup)
			}
		})
	}
	wg.Wait()
}

func (r *Run) openLoop(stop, reqCtx context.Context, limit int, warmup bool, out chan<- *result.Request) error {
	arrivals, err := load.NewArrivals(r.Plan.Arrival, r.Plan.Rate, r.Plan.Seed)
	if err != nil {
		return err
	}
	var sem chan struct{}
	if r.Plan.MaxConcurrency > 0 {
		sem = make(chan struct{}, r.Plan.MaxConcurrency)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	next := time.Now()
	for i := 0; limit == 0 || i < limit; i++ {
		if i > 0 {
			next = next.Add(arrivals.Next())
		}
		// The prompt is built before the scheduled time, so building it
		// never counts as the probe's own dispatch lag.
		p := r.Workload.Next()
		if d := time.Until(next); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-stop.Done():
				return nil
			}
		} else if stop.Err() != nil {
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
			res := r.one(reqCtx, scheduled, p, warmup)
			if sem != nil {
				<-sem
			}
			out <- res
		})
	}
	return nil
}

func (r *Run) one(ctx context.Context, scheduled time.Time, p client.Prompt, warmup bool) *result.Request {
	res := &result.Request{
		ID: r.nextID.Add(1), Profile: r.Profile, Level: r.Plan.Level(), Warmup: warmup, Scheduled: scheduled,
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
