// Package slo decides whether a measured request met a profile's service
// level objectives, by AIPerf's rule: a request is good when it succeeded and
// met every configured threshold. A value the request does not have (the
// ITL of a one-token answer) fails the threshold that needs it.
package slo

import (
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
}

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
	}
	return v
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
