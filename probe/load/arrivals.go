// Package load decides when requests are sent: arrival processes for open
// loops and the plan of a run (how long, how many, how hard).
package load

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Arrivals yields the gaps between consecutive request arrivals.
type Arrivals interface {
	Next() time.Duration
}

// NewArrivals returns the arrival process kind ("constant", "poisson" or
// "gamma") at rate requests per second, seeded for reproducible schedules.
// smoothness is the gamma process's shape, as AIPerf and vLLM define it:
// 1 is Poisson, below 1 burstier, above 1 more regular.
func NewArrivals(kind string, rate, smoothness float64, seed uint64) (Arrivals, error) {
	if rate <= 0 {
		return nil, fmt.Errorf("rate %v must be positive", rate)
	}
	mean := float64(time.Second) / rate
	rng := rand.New(rand.NewPCG(seed, 0xa221))
	switch kind {
	case "constant":
		return constant{gap: time.Duration(mean)}, nil
	case "poisson":
		return &poisson{mean: mean, rng: rng}, nil
	case "gamma":
		if smoothness <= 0 {
			return nil, fmt.Errorf("smoothness %v must be positive", smoothness)
		}
		// shape = smoothness, scale = 1 / (rate x smoothness): the mean gap
		// stays 1/rate whatever the burstiness.
		return &gamma{shape: smoothness, scale: mean / smoothness, rng: rng}, nil
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

// gamma has gamma-distributed gaps.
type gamma struct {
	shape, scale float64
	rng          *rand.Rand
}

func (g *gamma) Next() time.Duration { return time.Duration(Gamma(g.rng, g.shape) * g.scale) }

// Gamma draws from a gamma distribution of the given shape and scale 1,
// by Marsaglia and Tsang's method (shape < 1 boosted by U^(1/shape)).
func Gamma(rng *rand.Rand, shape float64) float64 {
	if shape < 1 {
		return Gamma(rng, shape+1) * math.Pow(rng.Float64(), 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if math.Log(u) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return d * v
		}
	}
}
