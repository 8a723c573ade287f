package stats

import (
	"fmt"
	"math"
)

// Every interval a verdict carries is a 95% interval, two-sided: a verdict
// is decided when the whole interval lies on one side of its bar, so each
// decision is wrong at most 2.5% of the time from sampling alone.
const (
	Confidence = 0.95
	// z is the standard normal's 97.5th percentile.
	z = 1.959963984540054
)

// Outcome is a verdict on an objective: met, missed, or not enough
// evidence to say which.
type Outcome string

const (
	Met Outcome = "met"
	// Missed: the whole interval is under the objective.
	Missed Outcome = "missed"
	// Undecided: the interval holds the objective. More requests may
	// decide it (Evidence.RequestsToDecide), or the probe's own delay
	// makes a miss its own (Evidence.Why).
	Undecided Outcome = "not_enough_evidence"
)

// Interval is a 95% interval.
type Interval struct {
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// Wilson is the 95% Wilson score interval of a proportion of k in n: it
// keeps its coverage for a handful of requests and for proportions at 0
// or 1, where the normal interval claims certainty (5 of 5 good would be
// [100%, 100%]).
func Wilson(k, n int) Interval {
	if n <= 0 {
		return Interval{0, 1}
	}
	p, fn := float64(k)/float64(n), float64(n)
	d := 1 + z*z/fn
	c := (p + z*z/(2*fn)) / d
	h := z / d * math.Sqrt(p*(1-p)/fn+z*z/(4*fn*fn))
	return Interval{math.Max(0, c-h), math.Min(1, c+h)}
}

// maxRequestsToDecide bounds the search for a sample size: past ten
// million requests the answer is "no practical number".
const maxRequestsToDecide = 10_000_000

// RequestsToDecide is how many counted requests a run would need for its
// interval to leave the objective, if its attainment stayed at k/n: 0
// when n already decides, -1 when no practical number would (an
// attainment on the objective itself).
func RequestsToDecide(k, n int, objective float64) int {
	if n <= 0 {
		return -1
	}
	p := float64(k) / float64(n)
	decides := func(m int) bool {
		iv := Wilson(int(math.Round(p*float64(m))), m)
		return iv.Low >= objective || iv.High < objective
	}
	if iv := Wilson(k, n); iv.Low >= objective || iv.High < objective {
		return 0
	}
	if !decides(maxRequestsToDecide) {
		return -1
	}
	lo, hi := n, maxRequestsToDecide // decides(hi), and not at lo
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if decides(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// RequestsToShow is the fewest counted requests, all good, whose interval
// lies wholly at or above objective: a run or a step with fewer can never
// show it is met.
func RequestsToShow(objective float64) int {
	if objective <= 0 {
		return 0
	}
	if objective >= 1 {
		return -1
	}
	// Wilson's low end for n of n is n / (n + z²).
	return int(math.Ceil(objective * z * z / (1 - objective)))
}

// Evidence is how sure a run's verdict on its objective is.
type Evidence struct {
	Outcome Outcome `json:"outcome"`
	// Attainment is the 95% interval of the SLO attainment.
	Attainment Interval `json:"slo_attainment_interval"`
	// Counted is the requests behind it.
	Counted int `json:"counted"`
	// RequestsToDecide is, for an undecided verdict, how many counted
	// requests would decide it if the attainment stayed as measured; -1
	// when no practical number would, or when more requests would not
	// help (the probe's own delay, Why).
	RequestsToDecide int `json:"requests_to_decide,omitempty"`
	// ProbeExplains counts the requests that missed their thresholds by
	// no more than the probe's own delay (Probe.DelayP99Ms): a miss is
	// decided only if it stands with every one of them counted good.
	ProbeExplains int `json:"misses_within_probe_delay,omitempty"`
	// Why says in words why the verdict is undecided.
	Why string `json:"why,omitempty"`
}

// Judge decides good of counted against objective. explained is how many
// of the misses the probe's own delay could account for: they can turn a
// miss into no evidence, never a pass into a miss.
func Judge(good, counted, explained int, objective float64) Evidence {
	e := Evidence{Counted: counted, Attainment: Wilson(good, counted), ProbeExplains: explained}
	credited := Wilson(min(counted, good+explained), counted)
	switch {
	case counted > 0 && e.Attainment.Low >= objective:
		e.Outcome = Met
	case counted > 0 && credited.High < objective:
		e.Outcome = Missed
	default:
		e.Outcome = Undecided
		switch {
		case counted == 0:
			e.Why = "no request was counted"
			e.RequestsToDecide = -1
		case e.Attainment.High < objective:
			// Missed on its own, but not with the probe's stalls taken out.
			e.Why = fmt.Sprintf("%d of the misses are within the probe's own delay", explained)
			e.RequestsToDecide = -1
		default:
			e.RequestsToDecide = RequestsToDecide(good, counted, objective)
			e.Why = fmt.Sprintf("the 95%% interval [%s, %s] of %d requests holds the %s objective", Pct(e.Attainment.Low), Pct(e.Attainment.High), counted, Pct(objective))
		}
	}
	return e
}

// Pct writes a ratio as a percentage with one decimal.
func Pct(r float64) string { return fmt.Sprintf("%.1f%%", 100*r) }

// QuantileInterval is the distribution-free 95% interval of the p-th
// quantile (0 < p < 1) of sorted, from its order statistics: the ranks
// between which the quantile lies with 95% probability whatever the
// distribution (the binomial rule behind every quantile's confidence
// interval). ok is false when the sample is too small to bound it on
// either side; a side it cannot bound is the sample's extreme.
func QuantileInterval(sorted []float64, p float64) (iv Interval, ok bool) {
	n := len(sorted)
	if n == 0 || p <= 0 || p >= 1 {
		return Interval{math.NaN(), math.NaN()}, false
	}
	lo, hi := orderRanks(n, p)
	ok = lo >= 1 && hi <= n
	lo, hi = max(lo, 1), min(hi, n)
	return Interval{sorted[lo-1], sorted[hi-1]}, ok
}

// QuantileLowPhi is, for n values, the quantile (numpy's linear rule:
// rank phi x (n-1) from 0) of the order statistic at the low end of the
// 95% interval of their p-th quantile, rounded down to two decimals: a
// histogram's quantile at phi is at or under that low end, for the rules
// that read histograms rather than values. 0 when n values bound nothing.
func QuantileLowPhi(n int, p float64) float64 {
	l, _ := orderRanks(n, p)
	if l < 1 || n < 2 {
		return 0
	}
	return math.Floor(100*float64(l-1)/float64(n-1)) / 100
}

// orderRanks are the 1-based ranks l and u with P(X < l) <= 2.5% and
// P(X >= u) <= 2.5% for X ~ Binomial(n, p), the number of values under the
// true quantile: the k-th smallest value lies under it when X >= k. l < 1
// or u > n says no rank bounds that side. Exact up to a few thousand
// values, the normal approximation (with a continuity correction) above.
func orderRanks(n int, p float64) (l, u int) {
	const tail = (1 - Confidence) / 2
	if n > 5000 {
		m, s := float64(n)*p, math.Sqrt(float64(n)*p*(1-p))
		return int(math.Floor(m - z*s + 0.5)), int(math.Ceil(m+z*s+0.5)) + 1
	}
	// The pmf of X in logs, walked from each end: log P(X=k+1) is
	// log P(X=k) + log((n-k)/(k+1)) + log(p/q).
	lp, lq := math.Log(p), math.Log1p(-p)
	cdf, logPMF := 0.0, float64(n)*lq // P(X=0) = q^n
	l = 0
	for k := 0; k <= n; k++ {
		cdf += math.Exp(logPMF)
		if cdf > tail {
			break
		}
		l = k + 1
		logPMF += math.Log(float64(n-k)/float64(k+1)) + lp - lq
	}
	sf, logPMF := 0.0, float64(n)*lp // P(X=n) = p^n
	u = n + 1
	for k := n; k >= 0; k-- {
		sf += math.Exp(logPMF)
		if sf > tail {
			break
		}
		u = k
		if k > 0 {
			logPMF += math.Log(float64(k)/float64(n-k+1)) + lq - lp
		}
	}
	// P(X >= u) <= tail says the u-th smallest value is above the
	// quantile; the rank holding it is u.
	return l, u
}
