// Package slo decides whether a measured request met a profile's service
// level objectives, by AIPerf's rule: a request is good when it succeeded and
// met every configured threshold. A value the request does not have (the
// ITL of a one-token answer) fails the threshold that needs it.
package slo

import (
	"math"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/result"
)

// Kind names one thresholded quantity. The names are metric label values.
type Kind uint8

const (
	TTFT Kind = iota
	TTST
	ITL
	RequestLatency
	OutputTokensPerSecond
	numKinds
)

var kindNames = [numKinds]string{"ttft", "ttst", "itl", "request_latency", "output_tokens_per_second"}

func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "unknown"
}

// Kinds lists every kind in label order.
var Kinds = []Kind{TTFT, TTST, ITL, RequestLatency, OutputTokensPerSecond}

// Threshold is one objective on one quantity: a ceiling for latencies, a
// floor for output tokens per second.
type Threshold struct {
	Kind  Kind
	Max   time.Duration // for latency kinds
	Floor float64       // for OutputTokensPerSecond
}

// Set is a profile's objectives.
type Set struct {
	Thresholds []Threshold
	// Objective is the fraction of counted requests that must be good for a
	// run to pass (the CI gate); 0 means no gate.
	Objective float64
}

// Verdict is the outcome of evaluating one request. It is a value with no
// pointers so evaluating allocates nothing.
type Verdict struct {
	// Counted is false for cancelled requests, which count in neither the
	// numerator nor the denominator of attainment.
	Counted bool
	Good    bool
	// Checked and Met are indexed by Kind.
	Checked [numKinds]bool
	Met     [numKinds]bool
	// Miss is how much time the request missed its thresholds by, in the
	// probe's own terms: had every timestamp the probe took been Miss
	// earlier, it would have been good. 0 for a good request; Unexcused
	// where no delay of the probe's explains it (an error, a wrong
	// answer, a missing value). A run whose probe was stalled for D
	// cannot blame the server for a miss of at most D (stats.Judge).
	Miss time.Duration
}

// Unexcused is Verdict.Miss of a request no delay of the probe's explains.
const Unexcused = time.Duration(math.MaxInt64)

// Evaluate judges r against the set.
func (s *Set) Evaluate(r *result.Request) Verdict {
	v := Verdict{Counted: r.Counted()}
	if !v.Counted {
		return v
	}
	// A wrong answer is never good, but its timing is measured and
	// judged against each threshold as a success's is.
	v.Good = r.Outcome == result.Success
	for _, t := range s.Thresholds {
		met := r.Measured() && t.met(r)
		v.Checked[t.Kind] = true
		v.Met[t.Kind] = met
		v.Good = v.Good && met
		if !met && v.Miss != Unexcused {
			v.Miss = max(v.Miss, t.miss(r))
		}
	}
	if r.Outcome != result.Success && v.Counted {
		v.Miss = Unexcused
	}
	return v
}

// miss is how much earlier the probe's timestamps would have had to be
// for r to meet t: a stall of the probe delays a chunk's stamp, and with
// it every figure timed from that chunk, by the stall's length at most.
// An ITL spreads a stall at the last chunk over its output's gaps; an
// output rate's floor is a ceiling on the request's latency.
func (t Threshold) miss(r *result.Request) time.Duration {
	if !r.Measured() {
		return Unexcused
	}
	switch t.Kind {
	case TTFT:
		if r.HasTTFT() {
			return r.TTFT - t.Max
		}
	case TTST:
		if r.HasTTST() {
			return r.TTST - t.Max
		}
	case ITL:
		if itl, ok := r.ITL(); ok {
			// In floats: a server's absurd token count must not wrap.
			return capped(float64(itl-t.Max) * float64(r.OutputTokens-1))
		}
	case RequestLatency:
		if r.E2E > 0 {
			return r.E2E - t.Max
		}
	case OutputTokensPerSecond:
		if _, ok := r.OutputTokensPerSecond(); ok && t.Floor > 0 {
			return capped(float64(r.E2E) - float64(r.OutputTokens)/t.Floor*float64(time.Second))
		}
	}
	return Unexcused
}

// capped is ns as a Duration, Unexcused past what one can hold.
func capped(ns float64) time.Duration {
	if ns >= float64(math.MaxInt64) || math.IsNaN(ns) {
		return Unexcused
	}
	return time.Duration(max(ns, 0))
}

func (t Threshold) met(r *result.Request) bool {
	switch t.Kind {
	case TTFT:
		return r.HasTTFT() && r.TTFT <= t.Max
	case TTST:
		return r.HasTTST() && r.TTST <= t.Max
	case ITL:
		itl, ok := r.ITL()
		return ok && itl <= t.Max
	case RequestLatency:
		return r.E2E > 0 && r.E2E <= t.Max
	case OutputTokensPerSecond:
		tps, ok := r.OutputTokensPerSecond()
		return ok && tps >= t.Floor
	}
	return false
}

// FromValues is the set whose Values are v (a run's summary keeps them),
// with objective.
func FromValues(v map[string]float64, objective float64) Set {
	s := Set{Objective: objective}
	for _, k := range Kinds {
		x, ok := v[k.String()]
		if !ok {
			continue
		}
		if k == OutputTokensPerSecond {
			s.Thresholds = append(s.Thresholds, Threshold{Kind: k, Floor: x})
		} else {
			s.Thresholds = append(s.Thresholds, Threshold{Kind: k, Max: time.Duration(x * float64(time.Millisecond))})
		}
	}
	return s
}

// Values are the thresholds by kind name: milliseconds for the latencies,
// tokens per second for the output rate's floor.
func (s Set) Values() map[string]float64 {
	if len(s.Thresholds) == 0 {
		return nil
	}
	out := map[string]float64{}
	for _, t := range s.Thresholds {
		if t.Kind == OutputTokensPerSecond {
			out[t.Kind.String()] = t.Floor
		} else {
			out[t.Kind.String()] = float64(t.Max) / float64(time.Millisecond)
		}
	}
	return out
}
