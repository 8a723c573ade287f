package probe

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

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
	// Whole and WholeRampTo, when set, are the level (and ramp end) of the
	// whole study this stage is one shard's share of (Plan.Share):
	// results carry them, so that the shards' records join by the
	// study's levels.
	Whole, WholeRampTo float64
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
	l := s.Level()
	if s.RampTo != 0 && s.Duration > 0 {
		step := s.Duration / rampSteps
		l = s.LevelAt(min(elapsed/step, rampSteps) * step)
	}
	if s.Whole > 0 {
		// A shard's share, reported as the study's level: the same
		// point of the whole's ramp.
		if s.RampTo == 0 || s.RampTo == s.Level() {
			return s.Whole
		}
		f := (l - s.Level()) / (s.RampTo - s.Level())
		return math.Round((s.Whole+f*(s.WholeRampTo-s.Whole))*100) / 100
	}
	return l
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
	if a := s.amount(); a != "" {
		out += " " + a
	}
	return out
}

// amount says how long the stage holds its level: "for 100 requests".
func (s Stage) amount() string {
	switch {
	case s.Requests > 0 && s.Duration > 0:
		return fmt.Sprintf("for %d requests or %s", s.Requests, s.Duration)
	case s.Requests > 0:
		return fmt.Sprintf("for %d requests", s.Requests)
	case s.Duration > 0:
		return "for " + s.Duration.String()
	}
	return ""
}

// Plan is how hard and how long a run pushes: one stage, or several run
// one after the other (a step up in concurrency shows where TTFT breaks).
type Plan struct {
	Stages []Stage
	// Warmup requests run first at the first stage's load, in their own
	// phase, and are not measured.
	Warmup int
	Seed   uint64
	// Grace bounds how long requests in flight when a stage's duration
	// ends may still finish before they are cancelled (0: until their own
	// timeout). It applies to a stage with a duration, and to an
	// interrupted one.
	Grace time.Duration
	// CancelFraction of requests are cancelled by the workload after
	// CancelAfter, as impatient users do; they count as cancelled.
	CancelFraction float64
	CancelAfter    time.Duration
	// Search, when set, decides the stages as the run goes: Stages then
	// holds one slot per step the search may take (PrepareSearch).
	Search *Search
}

// Levels are the load levels the plan's results will carry, each once:
// every stage's, and each step of a ramp. A search's are not known before
// it runs: none.
func (p Plan) Levels() []float64 {
	if p.Search != nil {
		return nil
	}
	var out []float64
	for _, st := range p.Stages {
		if st.RampTo == 0 || st.Duration <= 0 {
			out = append(out, st.Level())
			continue
		}
		step := st.Duration / rampSteps
		for k := range time.Duration(rampSteps + 1) {
			out = append(out, st.LevelAt(k*step))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// PrepareSearch gives a searching plan its stage slots, each the step at
// the search's lowest level until the search sets it.
func (p *Plan) PrepareSearch() {
	if p.Search == nil {
		return
	}
	p.Stages = make([]Stage, p.Search.Steps)
	for i := range p.Stages {
		p.Stages[i] = p.Search.stage(p.Search.Min)
	}
}

// String says what the plan does, in a line.
func (p Plan) String() string {
	if p.Search != nil {
		return p.Search.String()
	}
	parts := make([]string, len(p.Stages))
	for i, st := range p.Stages {
		parts[i] = st.String()
	}
	return strings.Join(parts, ", then ")
}

// Short says what the plan does in a few words: a staged plan by its
// stages' range, for a table's cell.
func (p Plan) Short() string {
	if p.Search != nil || len(p.Stages) < 2 {
		return p.String()
	}
	lo, hi := p.Stages[0].Level(), p.Stages[0].Level()
	for _, st := range p.Stages {
		for _, v := range []float64{st.Level(), st.RampTo} {
			if v > 0 {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if !p.OneKind() {
		return fmt.Sprintf("%d stages of concurrency and rate", len(p.Stages))
	}
	return fmt.Sprintf("%d stages, %s %g to %g", len(p.Stages), p.LevelName(), lo, hi)
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

// LevelName is what the plan's load levels count, for reports:
// "concurrency" or "request rate", or "load level" when stages mix them.
func (p Plan) LevelName() string {
	if len(p.Stages) == 0 || !p.OneKind() {
		return "load level"
	}
	return p.Stages[0].LevelName()
}
