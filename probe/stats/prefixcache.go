package stats

import (
	"fmt"
	"math"
	"sort"

	"github.com/tokenprobe/tokenprobe/probe/result"
)

// PrefixCache is a prefix-cache probe's verdict on a run: how much faster
// the warm request of each triple was than its cold and fresh neighbours,
// with its 95% interval, and whether that says the server's prefix cache
// works.
type PrefixCache struct {
	// Triples is the number of triples whose three requests were all
	// measured: the sample.
	Triples int `json:"triples"`
	// ColdTTFT, WarmTTFT and FreshTTFT are each phase's median TTFT in
	// milliseconds (the request's latency where it streamed nothing).
	ColdTTFT  float64 `json:"cold_ttft_ms"`
	WarmTTFT  float64 `json:"warm_ttft_ms"`
	FreshTTFT float64 `json:"fresh_ttft_ms"`
	// Speedup is the geometric mean over the triples of each one's
	// uncached TTFT (the geometric mean of its cold and fresh requests')
	// over its warm TTFT; Interval its 95% interval (Student's t on the
	// logarithms). Both are 0 without a complete triple, and the
	// interval with only one.
	Speedup  float64  `json:"speedup"`
	Interval Interval `json:"speedup_interval"`
	// MinSpeedup is the bar: the cache works when the whole interval is
	// at or above it, is broken when the whole interval is under it.
	MinSpeedup float64 `json:"min_speedup"`
	Verdict    Outcome `json:"verdict"`
	// Why says why a run that would be broken is undecided (the probe
	// was starved) or what is missing.
	Why string `json:"why,omitempty"`
	// ColdCached and WarmCached are the mean input tokens per request the
	// server's usage said it read from its cache (0 where it says
	// nothing: a server that reports none reads 0 for both).
	ColdCached float64 `json:"cold_cached_tokens"`
	WarmCached float64 `json:"warm_cached_tokens"`
}

// The prefix cache's verdicts, in Outcome's terms.
const (
	CacheWorking Outcome = "working"
	CacheBroken  Outcome = "broken"
)

// MaxCacheTriples bounds the triples an aggregator keeps (config bounds a
// profile's far below it): past it, further ones are not compared.
const MaxCacheTriples = 100_000

type cacheTriple struct {
	ttft   [4]float64 // by result.CachePhase, ms
	cached [4]int
	seen   [4]bool
}

// SetPrefixCache makes the aggregator judge the prefix-cache probe's
// triples against minSpeedup.
func (a *Aggregator) SetPrefixCache(minSpeedup float64) {
	a.cacheMin = minSpeedup
	a.triples = map[int]*cacheTriple{}
}

func (a *Aggregator) addCache(r *result.Request) {
	if a.triples == nil || r.CachePhase == result.NoCache || int(r.CachePhase) >= 4 {
		return
	}
	t := a.triples[r.CacheTriple]
	if t == nil {
		if len(a.triples) >= MaxCacheTriples {
			return
		}
		t = &cacheTriple{}
		a.triples[r.CacheTriple] = t
	}
	d := r.E2E
	if r.HasTTFT() {
		d = r.TTFT
	}
	t.ttft[r.CachePhase], t.cached[r.CachePhase], t.seen[r.CachePhase] = ms(d), r.CachedInputTokens, true
}

// prefixCache is the verdict on the triples added so far; starved is the
// probe's own starvation (Probe.Why), which keeps a broken verdict from
// being given.
func (a *Aggregator) prefixCache(starved string) *PrefixCache {
	if a.triples == nil {
		return nil
	}
	pc := &PrefixCache{MinSpeedup: a.cacheMin, Verdict: Undecided}
	var logs, cold, warm, fresh []float64
	var coldCached, warmCached int
	ids := make([]int, 0, len(a.triples))
	for id := range a.triples {
		ids = append(ids, id)
	}
	sort.Ints(ids) // the sum below in one order, whatever the map's
	for _, id := range ids {
		t := a.triples[id]
		if !t.seen[result.CacheCold] || !t.seen[result.CacheWarm] || !t.seen[result.CacheFresh] {
			continue
		}
		c, w, f := t.ttft[result.CacheCold], t.ttft[result.CacheWarm], t.ttft[result.CacheFresh]
		if c <= 0 || w <= 0 || f <= 0 {
			continue
		}
		logs = append(logs, (math.Log(c)+math.Log(f))/2-math.Log(w))
		cold, warm, fresh = append(cold, c), append(warm, w), append(fresh, f)
		coldCached += t.cached[result.CacheCold]
		warmCached += t.cached[result.CacheWarm]
	}
	pc.Triples = len(logs)
	if pc.Triples == 0 {
		pc.Why = "no triple had its three requests measured"
		return pc
	}
	pc.ColdTTFT, pc.WarmTTFT, pc.FreshTTFT = Compute(cold).P50, Compute(warm).P50, Compute(fresh).P50
	pc.ColdCached, pc.WarmCached = float64(coldCached)/float64(pc.Triples), float64(warmCached)/float64(pc.Triples)
	mean, half := meanInterval(logs)
	pc.Speedup = math.Exp(mean)
	if pc.Triples < 2 {
		// No interval (and none written: JSON has no infinity).
		pc.Why = "one triple: no interval"
		return pc
	}
	pc.Interval = Interval{math.Exp(mean - half), math.Exp(mean + half)}
	switch {
	case pc.Interval.Low >= pc.MinSpeedup:
		pc.Verdict = CacheWorking
	case pc.Interval.High < pc.MinSpeedup && starved != "":
		pc.Why = "the probe was starved: " + starved
	case pc.Interval.High < pc.MinSpeedup:
		pc.Verdict = CacheBroken
	default:
		pc.Why = fmt.Sprintf("the interval holds the bar of %.2gx", pc.MinSpeedup)
	}
	return pc
}

// meanInterval is xs' mean and the half-width of its 95% interval
// (Student's t; 0 for fewer than two values).
func meanInterval(xs []float64) (mean, half float64) {
	n := float64(len(xs))
	for _, x := range xs {
		mean += x
	}
	mean /= n
	if len(xs) < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	sd := math.Sqrt(ss / (n - 1))
	return mean, tQuantile(len(xs)-1) * sd / math.Sqrt(n)
}

// t975 is Student's t's 97.5th percentile for 1 to 30 degrees of freedom.
var t975 = [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

// tQuantile is Student's t's 97.5th percentile for df degrees of freedom:
// the table to 30, then the normal's with its first two Cornish-Fisher
// terms (within 0.001 of the exact value from 31 on).
func tQuantile(df int) float64 {
	if df <= len(t975) {
		return t975[max(df, 1)-1]
	}
	d, z3 := float64(df), z*z*z
	return z + (z3+z)/(4*d) + (5*z3*z*z+16*z3+3*z)/(96*d*d)
}
