package probe

import (
	"context"
	"fmt"
	"math"

	"github.com/tokenprobe/tokenprobe/internal/probehealth"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Search finds the highest load whose SLO attainment meets the objective:
// it doubles the level from Min until a step misses the objective (or Max
// passes), then bisects between the last level that passed and the first
// that missed, each step a stage of its own, within Steps stages.
type Search struct {
	// Rate searches the open loop's request rate; otherwise concurrency.
	Rate     bool
	Min, Max float64
	// Precision ends the bisection when the bracket is this small, relative
	// to its top (and, for concurrency, when it is 1 apart).
	Precision float64
	Steps     int
	// Step is every step's stage but for its level: its duration or
	// requests, its arrival process.
	Step Stage
}

// DefaultSearchSteps and DefaultSearchPrecision apply where a search sets none.
const (
	DefaultSearchSteps     = 10
	DefaultSearchPrecision = 0.1
)

func (s *Search) String() string {
	what := "concurrency"
	if s.Rate {
		what = "request rate"
	}
	return fmt.Sprintf("search of %s from %g to %g (precision %g, at most %d steps), each step %s", what, s.Min, s.Max, s.Precision, s.Steps, s.Step.amount())
}

// stage is the search's step at level.
func (s *Search) stage(level float64) Stage {
	st := s.Step
	st.RampTo = 0
	if s.Rate {
		st.Rate, st.Concurrency = level, 0
	} else {
		st.Concurrency, st.Rate = int(level), 0
	}
	return st
}

// next rounds a level for the kind searched: whole requests in flight.
func (s *Search) round(level float64) float64 {
	if s.Rate {
		return level
	}
	return math.Round(level)
}

// narrow reports whether the bracket (lo passed, hi missed) is as small
// as the precision asks.
func (s *Search) narrow(lo, hi float64) bool {
	if !s.Rate && hi-lo <= 1 {
		return true
	}
	return hi-lo <= s.Precision*hi
}

// barrier is sent through a run's results after a search step: the
// collector answers it once every result before it is counted, so that
// the step's attainment is read complete.
var barrier = new(result.Request)

// search runs the steps, each in a stage of its own: r.Plan.Stages holds
// Steps slots, filled one step ahead of its run.
func (r *Run) search(send, ctx context.Context, results chan<- *result.Request, counted <-chan struct{}, levels *levelGroups) (stats.Search, error) {
	s := r.Plan.Search
	out := stats.Search{Rate: s.Rate, Precision: s.Precision}
	step := 0
	try := func(level float64) (bool, error) {
		st := s.stage(level)
		r.Plan.Stages[step] = st
		r.stage.Store(int64(step))
		r.onPhase()
		w := probehealth.Begin()
		err := r.phase(send, ctx, step, st, false, results)
		levels.setProbe(step, w.End())
		results <- barrier
		<-counted
		// A step passes when it is shown to meet the objective: one
		// without enough evidence is no capacity the search may claim.
		e, att := levels.evidence(step)
		step++
		out.Steps = step
		pass := e.Outcome == stats.Met
		out.Tried = append(out.Tried, stats.SearchStep{Level: level, Attainment: att, Passed: pass, Evidence: e})
		return pass, err
	}
	lo, hi := 0.0, math.Inf(1) // the highest level that passed, the lowest that missed
	for level := s.Min; step < s.Steps; {
		if send.Err() != nil {
			break
		}
		pass, err := try(level)
		if err != nil {
			return out, err
		}
		if pass {
			lo = level
		} else {
			hi = level
		}
		switch {
		case pass && level >= s.Max:
			out.Capacity, out.Done = lo, true
			return out, nil
		case !pass && level == s.Min:
			out.Done = true // none: the lowest level misses
			return out, nil
		case math.IsInf(hi, 1):
			level = math.Min(s.round(level*2), s.Max)
		case s.narrow(lo, hi):
			out.Capacity, out.Done = lo, true
			return out, nil
		default:
			level = s.round((lo + hi) / 2)
			if level <= lo || level >= hi { // no level left between them
				out.Capacity, out.Done = lo, true
				return out, nil
			}
		}
	}
	out.Capacity = lo // the step budget ran out first: the best known
	return out, nil
}
