package servermetrics

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Explain puts what the server said beside what the client measured: for
// the run and for each of its stages (load levels), over each one's window.
func Explain(sum *stats.Summary, rd Readings) {
	sum.Server = window(rd, sum)
	for i := range sum.Stages {
		sum.Stages[i].Server = window(rd, &sum.Stages[i])
	}
}

func window(rd Readings, sum *stats.Summary) *stats.Server {
	out := &stats.Server{Kind: string(rd.Kind), URL: rd.URL, Scrapes: len(rd.Snaps)}
	if len(rd.Snaps) < 2 {
		out.Err = "the server's metrics were read fewer than twice"
		if rd.Err != nil {
			out.Err = fmt.Sprintf("the server's metrics could not be read: %v", rd.Err)
		}
		return out
	}
	from, to := sum.Start, sum.End
	if from.IsZero() {
		from, to = rd.Snaps[0].At, rd.Snaps[len(rd.Snaps)-1].At
	}
	// The reading just before the window opened and the first after it
	// closed: the deltas between them hold every request of the window.
	bi, ai := 0, len(rd.Snaps)-1
	for i, s := range rd.Snaps {
		if !s.At.After(from) {
			bi = i
		}
	}
	for i := len(rd.Snaps) - 1; i >= 0; i-- {
		if !rd.Snaps[i].At.Before(to) {
			ai = i
		}
	}
	if ai <= bi {
		ai = min(bi+1, len(rd.Snaps)-1)
		bi = ai - 1
	}
	before, after := rd.Snaps[bi], rd.Snaps[ai]

	phase := func(r Role) (*stats.Phase, error) {
		a, okA := after.Hist[r]
		b, okB := before.Hist[r]
		if !okA || !okB {
			return nil, nil
		}
		d, err := delta(a, b)
		if err != nil || d.Count == 0 {
			return nil, err
		}
		p := &stats.Phase{Count: d.Count, Mean: 1000 * d.Sum / d.Count}
		if q, lo, hi, ok := quantile(0.5, d); ok {
			q *= 1000
			p.P50, p.P50Bucket = &q, []float64{1000 * lo, 1000 * hi}
		}
		return p, nil
	}
	restarted := false
	for r, dst := range map[Role]**stats.Phase{Queue: &out.Queue, Prefill: &out.Prefill, TTFT: &out.TTFT, ITL: &out.ITL, E2E: &out.E2E} {
		p, err := phase(r)
		restarted = restarted || err != nil
		*dst = p
	}
	counter := func(r Role) *float64 {
		a, okA := after.Value[r]
		b, okB := before.Value[r]
		if !okA || !okB {
			return nil
		}
		if a < b {
			restarted = true
			return nil
		}
		d := a - b
		return &d
	}
	out.Preemptions, out.PromptTokens, out.GenerationTokens = counter(Preemptions), counter(PromptTokens), counter(GenerationTokens)
	// Gauges are read inside the window: the readings on its edges are
	// taken between stages, when the server is idle. A window too short
	// to hold a reading takes its edges.
	inside := []Snapshot{}
	for _, s := range rd.Snaps[bi : ai+1] {
		if s.At.After(from) && s.At.Before(to) {
			inside = append(inside, s)
		}
	}
	if len(inside) == 0 {
		inside = rd.Snaps[bi : ai+1]
	}
	level := func(r Role) *stats.Level {
		var l stats.Level
		n := 0
		for _, s := range inside {
			if v, ok := s.Value[r]; ok {
				l.Avg += v
				l.Peak = max(l.Peak, v)
				n++
			}
		}
		if n == 0 {
			return nil
		}
		l.Avg /= float64(n)
		return &l
	}
	out.Running, out.Waiting, out.KVCache = level(Running), level(Waiting), level(KVCache)
	if hits, queries := counter(PrefixHits), counter(PrefixQueries); hits != nil && queries != nil && *queries > 0 {
		rate := *hits / *queries
		out.PrefixCacheHitRate = &rate
	} else if l := level(PrefixHitRate); l != nil {
		out.PrefixCacheHitRate = &l.Avg
	}
	var problems []string
	if restarted {
		problems = append(problems, errRestarted.Error())
	}
	if rd.Failed > 0 {
		problems = append(problems, fmt.Sprintf("%d readings of the server's metrics failed (the last: %v)", rd.Failed, rd.Err))
	}
	out.Err = strings.Join(problems, "; ")
	out.Missing = missing(after)
	out.Breakdown, out.Note = breakdown(out, sum)
	return out
}

var errRestarted = errors.New("a counter of the server went down during the run: the server restarted, so its figures for the run are incomplete")

// missing names the roles the server did not serve (the two prefix
// cache counters stand for the hit rate they make).
func missing(after Snapshot) []string {
	has := func(r Role) bool {
		_, h := after.Hist[r]
		_, v := after.Value[r]
		return h || v
	}
	var out []string
	for _, r := range Roles() {
		switch {
		case r == PrefixHits || r == PrefixQueries:
		case r == PrefixHitRate && has(PrefixHits) && has(PrefixQueries):
		case !has(r):
			out = append(out, string(r))
		}
	}
	return out
}

func delta(a, b Hist) (Hist, error) {
	d := Hist{Count: a.Count - b.Count, Sum: a.Sum - b.Sum, Bounds: a.Bounds}
	if d.Count < 0 {
		return Hist{}, errRestarted
	}
	prev := map[float64]float64{}
	for i, ub := range b.Bounds {
		prev[ub] = b.Cumulative[i]
	}
	d.Cumulative = make([]float64, len(a.Cumulative))
	for i, ub := range a.Bounds {
		d.Cumulative[i] = a.Cumulative[i] - prev[ub]
	}
	return d, nil
}

// quantile interpolates linearly within the bucket holding the q-th
// observation, as Prometheus's histogram_quantile does for classic
// buckets, and returns that bucket's bounds; the lowest bucket starts at 0.
func quantile(q float64, h Hist) (v, lower, upper float64, ok bool) {
	if len(h.Bounds) == 0 || h.Count <= 0 {
		return 0, 0, 0, false
	}
	total := h.Cumulative[len(h.Cumulative)-1]
	if !math.IsInf(h.Bounds[len(h.Bounds)-1], 1) {
		total = h.Count
	}
	rank := q * total
	below := 0.0
	for i, ub := range h.Bounds {
		c := h.Cumulative[i]
		if c >= rank && c > below {
			if math.IsInf(ub, 1) {
				return lower, lower, ub, true
			}
			return lower + (ub-lower)*(rank-below)/(c-below), lower, ub, true
		}
		lower, below = ub, c
	}
	return lower, lower, lower, true
}

// breakdown splits the client's TTFT with the server's queue and prefill
// means (exact: sums over counts) and medians (as coarse as the buckets).
func breakdown(s *stats.Server, sum *stats.Summary) (*stats.Breakdown, string) {
	served := 0.0
	for _, p := range []*stats.Phase{s.E2E, s.Queue, s.TTFT} {
		if p != nil {
			served = max(served, p.Count)
		}
	}
	sent := sum.Success + sum.Errors
	switch {
	case s.Queue == nil && s.Err != "":
		return nil, "" // the error says why
	case sum.TTFT.Count == 0:
		return nil, "no request measured a TTFT: nothing to break down"
	case served == 0 && s.Err == "":
		return nil, "the server recorded no request in the run's window: is server_metrics.url the server behind this endpoint?"
	case s.Queue == nil:
		return nil, fmt.Sprintf("the server (%s) exposes no queue-time series: no breakdown of TTFT", s.Kind)
	case served > 1.2*float64(sent)+2:
		// The server's means are then of other clients' requests as much
		// as of the probe's: set beside the probe's TTFT they would name a
		// phase the probe's requests may not have spent their time in.
		return nil, fmt.Sprintf("the server served %.0f requests in the run's window, the probe sent %d: other traffic is mixed into the server's figures, so they do not split the probe's TTFT", served, sent)
	}
	b := &stats.Breakdown{Mean: split(sum.TTFT.Avg, s.Queue.Mean, s.Prefill, func(p *stats.Phase) float64 { return p.Mean })}
	b.P50, b.P50Note = medianSplit(s, sum.TTFT.P50)
	m := b.Mean
	b.Dominant, b.Verdict = "queue", ""
	largest := m.Queue
	if m.Prefill != nil && *m.Prefill > largest {
		b.Dominant, largest = "prefill", *m.Prefill
	}
	if m.Elsewhere > largest {
		b.Dominant = "elsewhere"
	}
	what := map[string]string{"queue": "the server's queue", "prefill": "the server's prefill", "elsewhere": "outside the server's queue and prefill"}[b.Dominant]
	if m.Prefill != nil {
		b.Verdict = fmt.Sprintf("TTFT mean %s, mostly %s: %s waiting in the server's queue, %s prefill, %s elsewhere",
			stats.FormatMillis(m.TTFT), what, stats.FormatMillis(m.Queue), stats.FormatMillis(*m.Prefill), stats.FormatMillis(m.Elsewhere))
	} else {
		b.Verdict = fmt.Sprintf("TTFT mean %s, mostly %s: %s waiting in the server's queue, %s elsewhere (prefill included: the server exposes no prefill series)",
			stats.FormatMillis(m.TTFT), what, stats.FormatMillis(m.Queue), stats.FormatMillis(m.Elsewhere))
	}
	return b, ""
}

// coarse is how wide, against the client's median TTFT, the bucket holding
// a server phase's median may be for the medians to be split: vLLM's
// queue buckets start at (0, 300 ms], whose interpolated middle says
// nothing of a 30 ms TTFT.
const coarse = 0.5

func medianSplit(s *stats.Server, ttftP50 float64) (*stats.Split, string) {
	phases := map[string]*stats.Phase{"queue": s.Queue}
	if s.Prefill != nil {
		phases["prefill"] = s.Prefill
	}
	for _, name := range []string{"queue", "prefill"} {
		p := phases[name]
		switch {
		case p == nil:
		case p.P50 == nil:
			return nil, fmt.Sprintf("the server's %s histogram has no classic buckets: no median split", name)
		case p.P50Bucket[1]-p.P50Bucket[0] > coarse*ttftP50:
			return nil, fmt.Sprintf("no median split: the server's %s median lies in its bucket (%s, %s], too coarse beside a TTFT p50 of %s",
				name, stats.FormatMillis(p.P50Bucket[0]), stats.FormatMillis(p.P50Bucket[1]), stats.FormatMillis(ttftP50))
		}
	}
	sp := split(ttftP50, *s.Queue.P50, s.Prefill, func(p *stats.Phase) float64 { return *p.P50 })
	return &sp, ""
}

func split(ttft, queue float64, prefill *stats.Phase, of func(*stats.Phase) float64) stats.Split {
	s := stats.Split{TTFT: ttft, Queue: queue, Elsewhere: ttft - queue}
	if prefill != nil {
		p := of(prefill)
		s.Prefill = &p
		s.Elsewhere -= p
	}
	return s
}
