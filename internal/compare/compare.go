// Package compare sets two runs side by side, metric by metric, and says
// whether each change is larger than the runs' own noise: the question a
// CI gate asks of a pull request ("is it slower?"), which a fixed
// threshold on one run cannot answer.
package compare

import (
	"math"
	"math/rand/v2"
	"sort"

	"github.com/tokenprobe/tokenprobe/internal/rundir"
	"github.com/tokenprobe/tokenprobe/internal/sink/records"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Run is one run's artifacts, read back (rundir.Load).
type Run = rundir.Loaded

// Metric is one figure compared: a statistic of a per-request value, or
// a rate of the run.
type Metric struct {
	Name string // ttft, itl, goodput, ...
	Stat string // p50, p95, avg; "" for the rates
	Unit string
	// HigherIsBetter tells a regression from an improvement.
	HigherIsBetter bool
}

// Label is the metric as --fail-on names it: ttft.p95, goodput.
func (m Metric) Label() string {
	if m.Stat == "" {
		return m.Name
	}
	return m.Name + "." + m.Stat
}

// Row is one metric of two runs.
type Row struct {
	Metric
	Base, New float64
	// Change is (New - Base) / Base; NaN when Base is 0.
	Change float64
	// Low and High bound the change's 95% confidence interval, from the
	// bootstrap; the change is noise when the interval holds 0.
	Low, High   float64
	Significant bool
	// N is the values behind each side.
	BaseN, NewN int
	// BiasLow and BiasHigh are how far the probe's own delay in either run
	// could have moved the change down and up (Compare reads each run's
	// delay p99 from its summary): a starved probe lengthens the
	// latencies it measures, so it can make the new run look worse or
	// the baseline look worse, never better. The gate widens the interval
	// by them; they do not shrink with more requests.
	BiasLow, BiasHigh float64
}

// perRequest are the per-request values compared, from successful requests.
var perRequest = []struct {
	name, unit string
	value      func(*records.Record) (float64, bool)
}{
	{"ttft", "ms", func(r *records.Record) (float64, bool) { return deref(r.TTFTMs) }},
	{"ttst", "ms", func(r *records.Record) (float64, bool) { return deref(r.TTSTMs) }},
	{"itl", "ms", func(r *records.Record) (float64, bool) { return deref(r.ITLMs) }},
	{"request_latency", "ms", func(r *records.Record) (float64, bool) { return deref(r.RequestLatencyMs) }},
}

func deref(p *float64) (float64, bool) {
	if p == nil {
		return 0, false
	}
	return *p, true
}

// Stats are the statistics compared for every per-request value.
var Stats = []string{"avg", "p50", "p90", "p95", "p99"}

// Options set the bootstrap.
type Options struct {
	// Resamples is the bootstrap's draws (default 2000).
	Resamples int
	// Seed makes the result repeatable (default 1).
	Seed uint64
	// Undecided is what a gate with not enough evidence and no failure
	// exits with: "" its own code (ExitUndecided), "pass" 0, "fail" 1.
	Undecided string
}

// undecidedCode is the exit code o gives a gate with not enough evidence.
func (o Options) undecidedCode() int {
	switch o.Undecided {
	case "pass":
		return ExitOK
	case "fail":
		return ExitTripped
	}
	return ExitUndecided
}

// Compare sets base and new side by side.
func Compare(base, next *Run, o Options) []Row {
	if o.Resamples <= 0 {
		o.Resamples = 2000
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0xc0ffee))
	var rows []Row
	for _, pr := range perRequest {
		a, b := values(base, pr.value), values(next, pr.value)
		if len(a) == 0 && len(b) == 0 {
			continue
		}
		sort.Float64s(a)
		sort.Float64s(b)
		var ca, cb [][]float64 // per statistic, the bootstrap's values
		if len(a) > 0 && len(b) > 0 {
			ca, cb = resampled(rng, a, o.Resamples), resampled(rng, b, o.Resamples)
		}
		for i, st := range Stats {
			row := Row{Metric: Metric{Name: pr.name, Stat: st, Unit: pr.unit}, BaseN: len(a), NewN: len(b),
				Base: ofSorted(a, st), New: ofSorted(b, st)}
			row.Change = change(row.Base, row.New)
			row.Low, row.High = math.NaN(), math.NaN()
			if ca != nil {
				row.Low, row.High = interval(ca[i], cb[i])
				row.Significant = row.Low > 0 || row.High < 0
				latencyBias(&row, delayOf(base, pr.name), delayOf(next, pr.name))
			}
			rows = append(rows, row)
		}
	}
	for _, rate := range rates {
		row := Row{Metric: rate.Metric, BaseN: len(base.Records), NewN: len(next.Records)}
		ga, da := rate.outcomes(base)
		gb, db := rate.outcomes(next)
		row.Base, row.New = rate.of(ga, da), rate.of(gb, db)
		row.Change = change(row.Base, row.New)
		if len(ga) == 0 || len(gb) == 0 {
			row.Low, row.High = math.NaN(), math.NaN()
		} else {
			row.Low, row.High = bootstrapRate(rng, ga, gb, da, db, rate.of, rate.perSecond, o.Resamples)
			// Five windows are five values: their percentile interval is
			// as narrow as a normal one of known spread. Widened by
			// Student's t for five values over the normal's z (2.776 /
			// 1.960), as a mean of five is: on two cores beside four
			// busy loops, one pair of identical runs in twenty still
			// differed past the plain interval.
			const widen = 2.776 / 1.960
			if !math.IsNaN(row.Change) {
				row.Low, row.High = row.Change-(row.Change-row.Low)*widen, row.Change+(row.High-row.Change)*widen
			}
			row.Significant = row.Low > 0 || row.High < 0
			if fb, fn := rate.understated(base), rate.understated(next); fb > 1 || fn > 1 {
				// A starved probe understates a rate by up to f: the new
				// run's may be higher, the baseline's too.
				row.BiasHigh = (1 + row.High) * (fn - 1)
				row.BiasLow = (1 + row.Low) * (1 - 1/fb)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// delayOf is how much the probe's own delay in r could have lengthened
// the metric named: its delay p99 for a time from one chunk, spread over
// an answer's gaps for ITL. 0 for a run without the probe's reading.
func delayOf(r *Run, metric string) float64 {
	p := r.Summary.Probe
	if p == nil {
		return 0
	}
	if metric == "itl" {
		return p.DelayP99Ms / math.Max(1, r.Summary.OSL.P50-1)
	}
	return p.DelayP99Ms
}

// latencyBias sets how far delays of db and dn milliseconds in the
// baseline and the new run could have moved a latency's change: the new
// run's value may be dn too long (the change dn/Base too high), the
// baseline's db (the change too low).
func latencyBias(row *Row, db, dn float64) {
	if row.Base <= 0 {
		return
	}
	row.BiasLow = dn / row.Base
	if db > 0 {
		if row.Base <= db {
			row.BiasHigh = math.Inf(1)
		} else {
			row.BiasHigh = (1 + row.High) * db / (row.Base - db)
		}
	}
}

// timeShare is how much the probe's delay could have lengthened r's
// requests on average, as a share of their median latency: a closed
// loop's rate falls by as much. A rate is a sum over requests, so the
// delay's mean is what it adds (a quantile, the tail of the delay).
func timeShare(r *Run) float64 {
	p := r.Summary.Probe
	if p == nil || r.Summary.E2E.P50 <= 0 {
		return 0
	}
	return p.DelayMeanMs / r.Summary.E2E.P50
}

// excused is the share the probe's delay could have turned from good to
// not good: its misses within that delay over its good requests.
func excused(r *Run) float64 {
	e := r.Summary.Evidence
	if e == nil || e.ProbeExplains == 0 {
		return 1
	}
	if r.Summary.Good == 0 {
		return math.Inf(1)
	}
	return float64(r.Summary.Good+e.ProbeExplains) / float64(r.Summary.Good)
}

// rates are the run-level figures: each request counts 1 or 0 towards
// them. A rate per second also depends on how long the run took, which
// varies between runs as its requests' times do: that is resampled too
// (bootstrapRate).
var rates = []struct {
	Metric
	outcomes  func(*Run) ([]counted, float64) // per counted request, in start order, and the run's duration
	of        func(xs []counted, duration float64) float64
	perSecond bool
	// understated is the factor by which the probe's own delay in a run
	// could have made the rate lower than the server's: 1 where it cannot.
	understated func(*Run) float64
}{
	{Metric{Name: "goodput", Unit: "req/s", HigherIsBetter: true}, func(r *Run) ([]counted, float64) {
		return indicator(r, func(rec *records.Record) bool { return rec.Good }), r.Summary.DurationSeconds
	}, perSecond, true, func(r *Run) float64 { return (1 + timeShare(r)) * excused(r) }},
	{Metric{Name: "throughput", Unit: "req/s", HigherIsBetter: true}, func(r *Run) ([]counted, float64) {
		return indicator(r, func(rec *records.Record) bool { return rec.Outcome == "success" }), r.Summary.DurationSeconds
	}, perSecond, true, func(r *Run) float64 { return 1 + timeShare(r) }},
	{Metric{Name: "attainment", Unit: "%", HigherIsBetter: true}, func(r *Run) ([]counted, float64) {
		return indicator(r, func(rec *records.Record) bool { return rec.Good }), 0
	}, mean100, false, excused},
	{Metric{Name: "errors", Unit: "%"}, func(r *Run) ([]counted, float64) {
		return indicator(r, func(rec *records.Record) bool { return rec.Outcome == "error" }), 0
	}, mean100, false, func(*Run) float64 { return 1 }},
}

// counted is one request counted against the SLO: whether it counts
// towards the rate (1 or 0), and how long it held its place in the load
// (its latency; 0 where it has none, as an error, read as the run's mean).
type counted struct {
	yes, busy float64
}

// indicator is the requests counted against the SLO (success or error;
// cancelled requests count in neither, as in the summary), in the order
// they started.
func indicator(r *Run, yes func(*records.Record) bool) []counted {
	idx := make([]int, 0, len(r.Records))
	for i := range r.Records {
		if o := r.Records[i].Outcome; o == "success" || o == "error" {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return r.Records[idx[a]].Start.Before(r.Records[idx[b]].Start) })
	out := make([]counted, len(idx))
	known, total := 0, 0.0
	for k, i := range idx {
		rec := &r.Records[i]
		if yes(rec) {
			out[k].yes = 1
		}
		if rec.RequestLatencyMs != nil && *rec.RequestLatencyMs > 0 {
			out[k].busy = *rec.RequestLatencyMs
			known++
			total += out[k].busy
		}
	}
	mean := 1.0
	if known > 0 {
		mean = total / float64(known)
	}
	for k := range out {
		if out[k].busy == 0 {
			out[k].busy = mean
		}
	}
	return out
}

func perSecond(xs []counted, duration float64) float64 {
	if duration <= 0 {
		return math.NaN()
	}
	return sumYes(xs) / duration
}

func mean100(xs []counted, _ float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return 100 * sumYes(xs) / float64(len(xs))
}

func sumYes(xs []counted) float64 {
	s := 0.0
	for _, x := range xs {
		s += x.yes
	}
	return s
}

func sum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

func values(r *Run, of func(*records.Record) (float64, bool)) []float64 {
	var out []float64
	for i := range r.Records {
		if r.Records[i].Outcome != "success" {
			continue
		}
		if v, ok := of(&r.Records[i]); ok {
			out = append(out, v)
		}
	}
	return out
}

// ofSorted computes st over sorted values as the run summary does
// (numpy's linear interpolation for percentiles).
func ofSorted(sorted []float64, st string) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	if st == "avg" {
		return sum(sorted) / float64(len(sorted))
	}
	return stats.Percentile(sorted, percentOf[st])
}

var percentOf = map[string]float64{"p50": 50, "p90": 90, "p95": 95, "p99": 99}

// resampled draws n bootstrap resamples of sorted and returns, per
// statistic of Stats, its value in each. A resample is kept as how many
// times it drew each value, so its order statistics come from one walk
// over the sorted values rather than from sorting it: a run of 100,000
// requests costs O(n) per resample, not O(n log n).
func resampled(rng *rand.Rand, sorted []float64, n int) [][]float64 {
	out := make([][]float64, len(Stats))
	counts := make([]int32, len(sorted))
	size := len(sorted)
	for range n {
		clear(counts)
		for range size {
			counts[rng.IntN(size)]++
		}
		for i, st := range Stats {
			out[i] = append(out[i], ofCounts(sorted, counts, st))
		}
	}
	return out
}

// ofCounts is ofSorted of the values sorted[i] each taken counts[i] times.
func ofCounts(sorted []float64, counts []int32, st string) float64 {
	total := 0
	for _, c := range counts {
		total += int(c)
	}
	if st == "avg" {
		s := 0.0
		for i, c := range counts {
			s += float64(c) * sorted[i]
		}
		return s / float64(total)
	}
	rank := percentOf[st] / 100 * float64(total-1)
	lo := int(math.Floor(rank))
	at := func(k int) float64 { // the k-th value (from 0) of the resample
		seen := 0
		for i, c := range counts {
			seen += int(c)
			if seen > k {
				return sorted[i]
			}
		}
		return sorted[len(sorted)-1]
	}
	vlo := at(lo)
	if float64(lo) == rank {
		return vlo
	}
	return vlo + (at(lo+1)-vlo)*(rank-float64(lo))
}

// interval is the 95% percentile interval of the relative change from
// the base's bootstrap values to the new's.
func interval(base, next []float64) (low, high float64) {
	changes := make([]float64, 0, len(base))
	for i := range base {
		if c := change(base[i], next[i]); !math.IsNaN(c) && !math.IsInf(c, 0) {
			changes = append(changes, c)
		}
	}
	if len(changes) < len(base)/2 {
		return math.NaN(), math.NaN()
	}
	sort.Float64s(changes)
	return stats.Percentile(changes, 2.5), stats.Percentile(changes, 97.5)
}

func change(base, next float64) float64 {
	if base == 0 || math.IsNaN(base) {
		return math.NaN()
	}
	return (next - base) / base
}

// bootstrapRate is the 95% interval of the relative change of a rate.
//
// Each side's requests are resampled in blocks of neighbours in start
// order (a moving-block bootstrap, blocks a fifth of the run long), so that a slow stretch of the run,
// which slows the requests in it together, is drawn whole or not at all
// rather than averaged away. A rate per second divides by the resample's
// duration: the run's, scaled by how much time its drawn requests held
// against the run's own. That is what varies between two identical runs
// of a closed loop whose every request succeeds: the same count over a
// duration set by the requests' latencies, which resampling requests'
// outcomes alone would call exact (a zero-width interval, so that any
// difference at all failed a gate). In an open loop, whose duration the
// schedule sets, it overstates the noise, the safe side for a gate.
func bootstrapRate(rng *rand.Rand, a, b []counted, da, db float64, of func([]counted, float64) float64, perSecond bool, n int) (low, high float64) {
	va, vb := make([]float64, n), make([]float64, n)
	ra, rb := make([]counted, len(a)), make([]counted, len(b))
	busyA, busyB := busy(a), busy(b)
	for k := range n {
		blockResample(rng, a, ra)
		blockResample(rng, b, rb)
		durA, durB := da, db
		if perSecond {
			durA, durB = da*busy(ra)/busyA, db*busy(rb)/busyB
		}
		va[k], vb[k] = of(ra, durA), of(rb, durB)
	}
	return interval(va, vb)
}

func busy(xs []counted) float64 {
	s := 0.0
	for _, x := range xs {
		s += x.busy
	}
	return s
}

// blockResample fills out with blocks of a fifth of xs's neighbours,
// each starting at a random place (a moving-block bootstrap over five
// windows of the run). Blocks this long keep a busy stretch of the
// machine whole: on two cores beside four busy loops, blocks of sqrt(n)
// requests still called an 8% shift between two identical runs beyond
// their noise.
func blockResample(rng *rand.Rand, xs, out []counted) {
	n := len(xs)
	size := max(1, n/5)
	for i := 0; i < n; {
		from := rng.IntN(n - size + 1)
		i += copy(out[i:], xs[from:from+size])
	}
}
