package stats

import (
	"math"

	"github.com/DataDog/sketches-go/ddsketch"
)

// SketchAccuracy is the relative error of the inter-chunk percentiles: a
// run sees one gap per chunk, millions in a long run or from a server
// that streams tiny chunks, so they are kept in a DDSketch of bounded
// size rather than one by one (docs/MEASUREMENT.md).
const SketchAccuracy = 0.005

// sketchBins bounds the sketch's bins: at 0.5% accuracy 2048 bins span a
// ratio of about 10^8 between the smallest and the largest gap kept
// exactly, past which the smallest collapse together.
const sketchBins = 2048

// gapSketch is a distribution of many values in bounded memory: count,
// mean, extremes and standard deviation exact, percentiles within
// SketchAccuracy.
type gapSketch struct {
	sk              *ddsketch.DDSketch
	n               int
	sum, sq         float64
	lowest, highest float64
}

func (g *gapSketch) add(v float64) {
	if g.sk == nil {
		sk, err := ddsketch.LogCollapsingLowestDenseDDSketch(SketchAccuracy, sketchBins)
		if err != nil {
			panic(err) // the accuracy and bins above are valid
		}
		g.sk, g.lowest, g.highest = sk, v, v
	}
	_ = g.sk.Add(max(v, 0))
	g.n++
	g.sum += v
	g.sq += v * v
	g.lowest, g.highest = min(g.lowest, v), max(g.highest, v)
}

func (g *gapSketch) dist() Dist {
	if g.n == 0 {
		return Dist{}
	}
	mean := g.sum / float64(g.n)
	q := func(p float64) float64 {
		v, err := g.sk.GetValueAtQuantile(p / 100)
		if err != nil {
			return math.NaN()
		}
		return min(max(v, g.lowest), g.highest) // the sketch's bin edges can pass the extremes
	}
	return Dist{
		Count: g.n, Avg: mean, Min: g.lowest, Max: g.highest,
		Std: math.Sqrt(max(g.sq/float64(g.n)-mean*mean, 0)),
		P50: q(50), P75: q(75), P90: q(90), P95: q(95), P99: q(99),
	}
}
