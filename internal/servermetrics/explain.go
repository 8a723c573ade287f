package servermetrics

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/tokenprobe/tokenprobe/internal/redact"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Explain puts what the server said beside what the client measured: for
// the run and for each of its stages (load levels), over each one's window.
func Explain(sum *stats.Summary, rd Readings) {
	if len(rd.Replicas) > 0 {
		explainReplicas(sum, rd)
		return
	}
	sum.Server = window(rd, sum)
	for i := range sum.Stages {
		sum.Stages[i].Server = window(rd, &sum.Stages[i])
	}
}

func window(rd Readings, sum *stats.Summary) *stats.Server {
	out := &stats.Server{Kind: string(rd.Kind), URL: redact.URL(rd.URL), Scrapes: len(rd.Snaps)}
	if len(rd.Snaps) < 2 {
		out.Err = "the server's metrics were read fewer than twice"
		if errors.Is(rd.Err, ErrNoMetrics) {
			out.Err = rd.Err.Error()
		} else if rd.Err != nil {
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
	why := restart(rd.Snaps[bi : ai+1])
	for _, at := range rd.Refused {
		if why == "" && at.After(before.At) && at.Before(after.At) {
			why = "its metrics URL refused connections between two readings"
		}
	}
	for _, at := range rd.ProbeRefused {
		if why == "" && at.After(before.At) && at.Before(after.At) {
			why = "its host and port refused the probe's own requests between two readings"
		}
	}
	if why != "" {
		// Any figure across a restart mixes two processes' counts:
		// none is given.
		out.Err = "the server restarted during the run (" + why + "), so none of its figures for the run is given"
		return out
	}

	// A series missing from the first reading and present in the last
	// started during the window: it counts from zero.
	phase := func(r Role) (Hist, bool) {
		a, okA := after.Hist[r]
		if !okA {
			return Hist{}, false
		}
		b := before.Hist[r]
		return delta(a, b), true
	}
	hists := map[Role]Hist{}
	for _, r := range []Role{Queue, Prefill, TTFT, ITL, E2E} {
		if d, ok := phase(r); ok {
			hists[r] = d
		}
	}
	// The population: the requests the server finished in the window. A
	// phase observed for fewer (a queue time kept only for requests that
	// waited) left the rest out because they were zero.
	clock := Clocks[rd.Kind]
	perRequest := []Role{Queue, Prefill, TTFT}
	if clock.PrefillPerBatch {
		perRequest = []Role{Queue, TTFT}
	}
	population := hists[clock.Population].Count
	for _, r := range perRequest {
		population = max(population, hists[r].Count)
	}
	out.Population = population
	// A wrong answer is an answer the server finished, as a right one is.
	answers := sum.Success + sum.WrongAnswers
	if ph, ok := hists[clock.Population]; ok && ph.Count > 0 && float64(answers)-ph.Count > max(2, 0.05*float64(answers)) {
		// The server finished fewer requests than the probe got answers
		// from it: it restarted between two readings (a long interval,
		// no process start time) or lost count. Figures over the new
		// process alone would pass for the run's. The margin is for a
		// stage's last answers, which a server may record just after the
		// reading that closes the stage.
		out.Err = fmt.Sprintf("the server restarted or lost count: it counted %.0f finished requests in the run's window, the probe had %d answers, so none of its figures for the run is given", ph.Count, answers)
		out.Population = 0
		return out
	}
	// A server that creates a histogram family at its first observation
	// (llm-d-inference-sim) has no queue family until a request queues: a
	// kind that has one, with finished requests and none waiting in any
	// reading, queued nothing.
	waited := false
	for _, s := range rd.Snaps[bi : ai+1] {
		waited = waited || s.Value[Waiting] > 0
	}
	hasQueue := after.has(Queue)
	lazyQueue := !hasQueue && len(Table[rd.Kind][Queue]) > 0 && population > 0 && !waited
	for r, dst := range map[Role]**stats.Phase{Queue: &out.Queue, Prefill: &out.Prefill, TTFT: &out.TTFT, ITL: &out.ITL, E2E: &out.E2E} {
		d, ok := hists[r]
		over := d.Count
		if slices.Contains(perRequest, r) {
			over = population
		}
		switch {
		case ok && over > 0:
			*dst = newPhase(d, over)
		case r == Queue && (hasQueue || lazyQueue) && population > 0:
			// The family is there, no request was observed in it: none waited.
			*dst = &stats.Phase{Over: population, P50: new(float64), P50Bucket: []float64{0, 0}}
		}
	}
	counter := func(r Role) *float64 {
		a, okA := after.Value[r]
		if !okA {
			return nil
		}
		d := a - before.Value[r]
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
	if rd.Failed > 0 {
		out.Err = fmt.Sprintf("%d readings of the server's metrics failed (the last: %v)", rd.Failed, rd.Err)
	}
	out.Missing = missing(after)
	out.Breakdown, out.Note = breakdown(out, sum, hasQueue || lazyQueue, waited)
	if lazyQueue && out.Breakdown != nil {
		out.Breakdown.Verdict += "; the server's queue-time family appears at its first queued request, and none has queued"
	}
	return out
}

// newPhase is a phase's figures over a population of over requests: its
// observations, and the requests it did not observe as zeros.
func newPhase(d Hist, over float64) *stats.Phase {
	p := &stats.Phase{Count: d.Count, Mean: 1000 * d.Sum / over}
	if over != d.Count {
		p.Over = over
	}
	if q, lo, hi, ok := quantileOver(0.5, d, over); ok {
		q *= 1000
		p.P50, p.P50Bucket = &q, []float64{1000 * lo, 1000 * hi}
	}
	return p
}

// restart says why the readings hold a restart of the server, or "": a
// counter or histogram that went down or vanished between two readings,
// or a new process start time. A reading that failed in between leaves
// the two around it to compare.
func restart(snaps []Snapshot) string {
	for i := 1; i < len(snaps); i++ {
		a, b := snaps[i-1], snaps[i]
		if a.Started != 0 && b.Started != 0 && a.Started != b.Started {
			return "its process start time changed"
		}
		for r, h := range a.Hist {
			if n, ok := b.Hist[r]; !ok || n.Count < h.Count {
				return fmt.Sprintf("its %s histogram went down or vanished", r)
			}
		}
		for r, v := range a.Value {
			if r.IsGauge() {
				continue
			}
			if n, ok := b.Value[r]; !ok || n < v {
				return fmt.Sprintf("its %s counter went down or vanished", r)
			}
		}
	}
	return ""
}

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

// delta is a's rise over b; a histogram b lacks is zero there.
func delta(a, b Hist) Hist {
	d := Hist{Count: a.Count - b.Count, Sum: a.Sum - b.Sum, Bounds: a.Bounds}
	prev := map[float64]float64{}
	for i, ub := range b.Bounds {
		prev[ub] = b.Cumulative[i]
	}
	d.Cumulative = make([]float64, len(a.Cumulative))
	for i, ub := range a.Bounds {
		d.Cumulative[i] = a.Cumulative[i] - prev[ub]
	}
	return d
}

// quantileOver is the q-quantile of a population of over requests of
// which h observed h.Count, the rest being zeros.
func quantileOver(q float64, h Hist, over float64) (v, lower, upper float64, ok bool) {
	zeros := over - h.Count
	if zeros <= 0 {
		return quantile(q, h)
	}
	rank := q * over
	if rank <= zeros {
		return 0, 0, 0, true
	}
	return quantile((rank-zeros)/h.Count, h)
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

// slack is how far, in milliseconds, the server's parts may exceed the
// client's whole before the split is refused: the server stamps a
// request's end before its last write and the client after its read, and
// the two count a window's edges a reading apart. Within it a part comes
// out as 0, never negative.
func slack(ttft float64) float64 { return max(5, 0.03*ttft) }

// breakdown splits the client's TTFT with the server's queue and prefill
// means (sums over the population of finished requests) and medians (as
// coarse as the buckets).
func breakdown(s *stats.Server, sum *stats.Summary, hasQueue, waited bool) (*stats.Breakdown, string) {
	served := s.Population
	sent := sum.Success + sum.WrongAnswers + sum.Errors // wrong answers were sent and served too
	noQueue := fmt.Sprintf("the server (%s) exposes no queue-time series: no breakdown of TTFT", s.Kind)
	switch {
	case s.Queue == nil && s.Err != "":
		return nil, "" // the error says why
	case sum.TTFT.Count == 0:
		return nil, "no request measured a TTFT: nothing to break down"
	case !hasQueue && len(Table[Kind(s.Kind)][Queue]) == 0:
		// Said first: a server without histograms (llama.cpp) also
		// counts no finished request, and that is not the news.
		return nil, noQueue
	case served == 0 && s.Err == "":
		return nil, "the server recorded no request in the run's window: is server_metrics.url the server behind this endpoint?"
	case !hasQueue && waited:
		return nil, noQueue + " (requests waited, yet no queue time was recorded)"
	case !hasQueue:
		return nil, noQueue
	case served > 1.2*float64(sent)+2:
		// The server's means are then of other clients' requests as much
		// as of the probe's: set beside the probe's TTFT they would name a
		// phase the probe's requests may not have spent their time in.
		return nil, fmt.Sprintf("the server served %.0f requests in the run's window, the probe sent %d: other traffic is mixed into the server's figures, so they do not split the probe's TTFT", served, sent)
	case s.Queue == nil:
		return nil, ""
	}
	m := split(sum.TTFT.Avg, s.Queue.Mean, s.Prefill, func(p *stats.Phase) float64 { return p.Mean })
	var ttftClock, withheld string
	if s.TTFT != nil {
		ttftClock, withheld = calibrate(&m, s.TTFT.Mean)
	}
	if why := addsUp(&m); why != "" {
		return nil, "the server's figures do not add up: " + why + ", more than the measurement's error (5 ms or 3%): no breakdown of TTFT"
	}
	if sum.Network.Count > 0 {
		within := m.Elsewhere
		if m.Outside != nil {
			within = *m.Outside
		}
		network := min(sum.Network.Avg, max(within, 0))
		m.Network = &network
	}
	b := &stats.Breakdown{Mean: m, ServerTTFTClock: ttftClock, Withheld: withheld}
	b.P50, b.P50Note = medianSplit(s, sum.TTFT.P50)
	b.Dominant = "queue"
	largest := m.Queue
	if m.Prefill != nil && *m.Prefill > largest {
		b.Dominant, largest = "prefill", *m.Prefill
	}
	if m.Elsewhere > largest {
		b.Dominant = "elsewhere"
	}
	what := map[string]string{"queue": "the server's queue", "prefill": "the server's prefill", "elsewhere": "outside the server's queue and prefill"}[b.Dominant]
	if b.Dominant == "elsewhere" && m.Outside != nil {
		what = "outside the server (network, gateways)"
		if *m.ServerOther > *m.Outside {
			what = "in the server before its queue and prefill (front end, tokenising)"
		} else if m.Network != nil && *m.Network >= *m.Outside/2 {
			what = "outside the server, setting up connections (DNS, connect, TLS)"
		}
	}
	parts := stats.FormatMillis(m.Queue) + " waiting in the server's queue, "
	if m.Prefill != nil {
		parts += stats.FormatMillis(*m.Prefill) + " prefill, " + stats.FormatMillis(m.Elsewhere) + " elsewhere"
	} else {
		parts += stats.FormatMillis(m.Elsewhere) + " elsewhere (prefill included: the server exposes no prefill series)"
	}
	if m.Outside != nil {
		parts += fmt.Sprintf(" (%s in the server's front end, %s outside the server", stats.FormatMillis(*m.ServerOther), stats.FormatMillis(*m.Outside))
		if m.Network != nil {
			parts += fmt.Sprintf(", %s of it the client's DNS, connect and TLS", stats.FormatMillis(*m.Network))
		}
		parts += ")"
	}
	b.Verdict = fmt.Sprintf("TTFT mean %s, mostly %s: %s", stats.FormatMillis(m.TTFT), what, parts)
	switch {
	case ttftClock == ClockScheduling:
		b.Verdict += "; the server's TTFT starts when it schedules a request, not at arrival"
	case withheld != "":
		b.Verdict += "; " + withheld
	}
	return b, ""
}

// The clocks a server's TTFT histogram may start on, as calibrate reads
// them from the server's own means.
const (
	// ClockArrival: the server's TTFT counts from the request's arrival,
	// its queue included (vLLM, SGLang).
	ClockArrival = "arrival"
	// ClockScheduling: from when the request got a slot, its queue left
	// out (llm-d-inference-sim v0.10.2).
	ClockScheduling = "scheduling"
)

// calibrate reads where the server's TTFT clock starts from its own means
// over the window, not from its kind: a TTFT at least its queue and
// prefill starts at arrival; one below its queue but not below its
// prefill starts at scheduling. Either way the server's TTFT then gives
// its front end's part (ServerOther) and the part outside the server
// (Outside) of the client's TTFT. A TTFT below the server's own prefill
// fits neither: the queue, prefill and elsewhere parts stand (they need
// no server TTFT), and what needs it is withheld, with why.
func calibrate(m *stats.Split, serverTTFT float64) (clock, withheld string) {
	prefill := 0.0
	if m.Prefill != nil {
		prefill = *m.Prefill
	}
	tol := slack(m.TTFT)
	var other, outside float64
	switch {
	case serverTTFT >= m.Queue+prefill-tol:
		// The server's TTFT holds its queue and prefill: the rest of it is
		// its front end, and what the client waited beyond it is outside.
		clock, other, outside = ClockArrival, serverTTFT-m.Queue-prefill, m.TTFT-serverTTFT
	case serverTTFT >= prefill-tol:
		clock, other, outside = ClockScheduling, serverTTFT-prefill, m.TTFT-m.Queue-serverTTFT
	default:
		return "", fmt.Sprintf("the server's TTFT mean (%s) is below its own prefill mean (%s), which fits neither an arrival nor a scheduling clock: "+
			"the part outside the server is not given", stats.FormatMillis(serverTTFT), stats.FormatMillis(prefill))
	}
	m.ServerOther, m.Outside = &other, &outside
	return clock, ""
}

// addsUp says by how much the server's parts exceed the whole where one
// falls short of zero by more than the slack, and otherwise sets the
// parts to add up to their wholes: a part short of zero within the slack
// is 0, and what that adds comes off its sibling, so that queue, prefill
// and elsewhere make the TTFT, and front end and outside make elsewhere
// (an overloaded server's prefill over its own TTFT once read "11 ms
// elsewhere (0.0 ms front end, 32 ms outside)").
func addsUp(sp *stats.Split) string {
	if why := shortBy(sp); why != "" {
		return why
	}
	if sp.Elsewhere < 0 {
		deficit := -sp.Elsewhere
		if sp.Prefill != nil {
			take := min(deficit, *sp.Prefill)
			p := *sp.Prefill - take
			sp.Prefill, deficit = &p, deficit-take
		}
		sp.Queue, sp.Elsewhere = max(0, sp.Queue-deficit), 0
	}
	if sp.Outside != nil {
		outside := min(max(*sp.Outside, 0), sp.Elsewhere)
		other := sp.Elsewhere - outside
		sp.Outside, sp.ServerOther = &outside, &other
	}
	return ""
}

// shortBy says by how much the server's parts exceed the whole where one
// falls short of zero by more than the slack.
func shortBy(sp *stats.Split) string {
	tol := slack(sp.TTFT)
	check := func(part *float64, what, whole string) string {
		if *part < -tol {
			return fmt.Sprintf("%s exceed %s by %s", what, whole, stats.FormatMillis(-*part))
		}
		return ""
	}
	parts := "its queue and prefill means"
	if sp.Prefill == nil {
		parts = "its queue mean"
	}
	client := "the client's mean TTFT (" + stats.FormatMillis(sp.TTFT) + ")"
	if why := check(&sp.Elsewhere, parts, client); why != "" {
		return why
	}
	if sp.Outside != nil {
		own := "its own TTFT mean (" + stats.FormatMillis(sp.TTFT-*sp.Outside) + ")"
		if why := check(sp.Outside, own, client); why != "" {
			return why
		}
		if why := check(sp.ServerOther, parts, own); why != "" {
			return why
		}
	}
	return ""
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
	// Medians do not add up as means do; a part past the slack says only
	// that the medians cannot be split.
	if why := addsUp(&sp); why != "" {
		return nil, "no median split: the server's medians exceed the client's"
	}
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
