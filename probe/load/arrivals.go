// Package load decides when requests are sent: arrival processes for open
// loops and the plan of a run (how long, how many, how hard).
package load

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Arrivals yields the gaps between consecutive request arrivals.
type Arrivals interface {
	Next() time.Duration
}

// NewArrivals returns the arrival process kind ("constant" or "poisson")
// at rate requests per second, seeded for reproducible schedules.
func NewArrivals(kind string, rate float64, seed uint64) (Arrivals, error) {
	if rate <= 0 {
		return nil, fmt.Errorf("rate %v must be positive", rate)
	}
	mean := float64(time.Second) / rate
	switch kind {
	case "constant":
		return constant{gap: time.Duration(mean)}, nil
	case "poisson":
		return &poisson{mean: mean, rng: rand.New(rand.NewPCG(seed, 0xa221))}, nil
	}
	return nil, fmt.Errorf("unknown arrival process %q", kind)
}

type constant struct{ gap time.Duration }

func (c constant) Next() time.Duration { return c.gap }

// poisson has exponentially distributed gaps: independent arrivals at a
// mean rate, as many users acting independently produce.
type poisson struct {
	mean float64
	rng  *rand.Rand
}

func (p *poisson) Next() time.Duration { return time.Duration(p.rng.ExpFloat64() * p.mean) }
