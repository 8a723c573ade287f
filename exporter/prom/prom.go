// Package prom exports request results and run outcomes as Prometheus
// metrics, with the names, types and labels of the catalog.
package prom

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenprobe/tokenprobe/internal/catalog"
	"github.com/tokenprobe/tokenprobe/internal/scheduler"
	"github.com/tokenprobe/tokenprobe/probe"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/ratelimit"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// ExemplarInterval bounds how often a series gets a new exemplar. An
// exemplar costs an allocation; one a second is plenty to jump from a
// latency bucket to a request record.
const ExemplarInterval = time.Second

// Exporter is a probe.Sink and the record of runs for Prometheus.
type Exporter struct {
	ttft, ttst, itl, gaps, dur, lag, phases                                             *prometheus.HistogramVec
	requests, errors, anomalies, good, sloReqs, inTok, cachedTok, outTok, runs, skipped *prometheus.CounterVec
	lastTS, lastOK, lastPassed, lastDur, lastAtt, lastGood, lastThr                     *prometheus.GaugeVec
	objective, info, next, aborts, capacity, cliff, breakdown, dominant, served         *prometheus.GaugeVec
	dominantByLevel                                                                     *prometheus.GaugeVec
	serverRequests, serverKV, attInterval, probeDelay, probeStarved, failing, clock     *prometheus.GaugeVec
	cacheSpeedup, cacheInterval, cacheVerdict                                           *prometheus.GaugeVec
	idAgreement, idInterval, idVerdict, idMoved, idLogprob                              *prometheus.GaugeVec
	rateLimit                                                                           [3]*prometheus.GaugeVec // by ratelimit.Field
	cost                                                                                *prometheus.CounterVec
	checks                                                                              *prometheus.CounterVec
	dropped                                                                             *prometheus.CounterVec
	otlpDropped                                                                         *prometheus.CounterVec
	reloadOK, reloadTime                                                                prometheus.Gauge
	artifactFailures                                                                    *prometheus.CounterVec

	mu     sync.Mutex
	series map[seriesKey]*series
	// checkSeries are the answer checks' pass and fail counters.
	checkSeries map[checkKey]*[2]prometheus.Counter
	live        map[runKey]*probe.Run // nil value: known and idle
	// failingNow are the jobs whose endpoint is failing, by the reason
	// exported (tokenprobe_endpoint_failing); nFailing is its size, read
	// by every answer without the lock.
	failingNow map[runKey]string
	nFailing   atomic.Int32
}

type seriesKey struct {
	profile, endpoint, model string
	level                    float64
}

type runKey struct{ profile, endpoint string }

type checkKey struct{ profile, endpoint, model, check string }

// series holds the children of one label set, resolved once so that an
// observation is a few atomic adds.
type series struct {
	ttft, ttst, itl, gaps, dur, lag prometheus.Observer
	// dns, connect, tls and firstByte are the profile x endpoint's phases.
	dns, connect, tls, firstByte   prometheus.Observer
	outcome                        [result.WrongAnswer + 1]prometheus.Counter // by result.Outcome
	reason                         map[result.Reason]prometheus.Counter
	anomaly                        [len(anomalyKinds)]prometheus.Counter // by result.Anomaly
	good, inTok, cachedTok, outTok prometheus.Counter
	// cost is the profile x endpoint's spend in currency, made at the
	// first request with a cost.
	cost         prometheus.Counter
	currency     string
	met, missed  [len(kinds)]prometheus.Counter
	lastExemplar atomic.Int64
	labels       []string
}

var anomalyKinds = [...]result.Anomaly{result.AnomalyNone, result.AnomalyDrain, result.AnomalyRetried, result.AnomalyUsage, result.AnomalyStatus}

var kinds = [...]slo.Kind{slo.TTFT, slo.TTST, slo.ITL, slo.RequestLatency, slo.OutputTokensPerSecond}

// New registers the exporter's metrics with reg.
func New(reg prometheus.Registerer) (*Exporter, error) {
	e := &Exporter{series: map[seriesKey]*series{}, live: map[runKey]*probe.Run{}, checkSeries: map[checkKey]*[2]prometheus.Counter{}, failingNow: map[runKey]string{}}
	hist := func(m catalog.Metric) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: m.Name, Help: m.Help, Buckets: m.Buckets,
			// Native buckets beside the classic ones: ~10% resolution at any
			// scale, for servers that scrape protobuf.
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  160,
			NativeHistogramMinResetDuration: time.Hour,
		}, m.Labels)
	}
	counter := func(m catalog.Metric) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: m.Name, Help: m.Help}, m.Labels)
	}
	gauge := func(m catalog.Metric) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: m.Name, Help: m.Help}, m.Labels)
	}
	e.ttft, e.ttst, e.itl = hist(catalog.TTFT), hist(catalog.TTST), hist(catalog.ITL)
	e.gaps, e.dur, e.lag = hist(catalog.InterChunk), hist(catalog.Duration), hist(catalog.DispatchLag)
	e.phases = hist(catalog.Phases)
	e.requests, e.errors, e.good = counter(catalog.Requests), counter(catalog.Errors), counter(catalog.Good)
	e.checks = counter(catalog.AnswerChecks)
	e.anomalies = counter(catalog.Anomalies)
	e.sloReqs, e.inTok, e.outTok = counter(catalog.SLORequests), counter(catalog.InputTokens), counter(catalog.OutputTokens)
	e.cachedTok = counter(catalog.CachedInputTokens)
	e.cost = counter(catalog.Cost)
	e.runs, e.skipped, e.dropped = counter(catalog.Runs), counter(catalog.RunsSkipped), counter(catalog.Dropped)
	e.lastTS, e.lastOK, e.lastPassed = gauge(catalog.RunLastTimestamp), gauge(catalog.RunLastSuccess), gauge(catalog.RunLastPassed)
	e.lastDur, e.lastAtt, e.lastGood = gauge(catalog.RunLastDuration), gauge(catalog.RunLastAttainment), gauge(catalog.RunLastGoodput)
	e.lastThr, e.objective, e.info = gauge(catalog.RunLastThroughput), gauge(catalog.RunObjective), gauge(catalog.ProfileInfo)
	e.next, e.capacity, e.cliff = gauge(catalog.RunNext), gauge(catalog.RunLastCapacity), gauge(catalog.RunLastCliff)
	e.aborts, e.failing = gauge(catalog.RunsAbortedInARow), gauge(catalog.EndpointFailing)
	e.breakdown, e.dominant = gauge(catalog.RunLastTTFTBreakdown), gauge(catalog.RunLastTTFTDominant)
	e.dominantByLevel = gauge(catalog.RunLastTTFTDominantByLevel)
	e.served, e.clock = gauge(catalog.RunLastServedModel), gauge(catalog.ServerTTFTClock)
	e.serverRequests, e.serverKV = gauge(catalog.RunLastServerRequests), gauge(catalog.RunLastServerKVCache)
	e.attInterval, e.probeDelay, e.probeStarved = gauge(catalog.RunLastAttainmentInterval), gauge(catalog.RunLastProbeDelay), gauge(catalog.RunLastProbeStarved)
	e.cacheSpeedup, e.cacheInterval, e.cacheVerdict = gauge(catalog.RunLastPrefixCacheSpeedup), gauge(catalog.RunLastPrefixCacheInterval), gauge(catalog.RunLastPrefixCacheVerdict)
	e.idAgreement, e.idInterval = gauge(catalog.RunLastIdentityAgreement), gauge(catalog.RunLastIdentityInterval)
	e.idVerdict, e.idMoved = gauge(catalog.RunLastIdentityVerdict), gauge(catalog.RunLastIdentityMoved)
	e.idLogprob = gauge(catalog.RunLastIdentityLogprobDistance)
	e.rateLimit = [3]*prometheus.GaugeVec{ratelimit.Limit: gauge(catalog.RateLimitLimit), ratelimit.Remaining: gauge(catalog.RateLimitRemaining), ratelimit.Reset: gauge(catalog.RateLimitReset)}
	e.dropped.WithLabelValues("otlp") // at 0 without an OTLP push too: nothing dropped
	e.otlpDropped = counter(catalog.OTLPDropped)
	e.otlpDropped.WithLabelValues("traces")
	e.otlpDropped.WithLabelValues("metrics")
	e.reloadOK = prometheus.NewGauge(prometheus.GaugeOpts{Name: catalog.ConfigReloadOK.Name, Help: catalog.ConfigReloadOK.Help})
	e.artifactFailures = counter(catalog.ArtifactFailures)
	e.reloadTime = prometheus.NewGauge(prometheus.GaugeOpts{Name: catalog.ConfigReloadTime.Name, Help: catalog.ConfigReloadTime.Help})
	for _, c := range []prometheus.Collector{
		e.ttft, e.ttst, e.itl, e.gaps, e.dur, e.lag, e.phases, e.requests, e.checks, e.errors, e.anomalies, e.good, e.sloReqs, e.inTok, e.cachedTok, e.outTok,
		e.runs, e.skipped, e.dropped, e.otlpDropped, e.lastTS, e.lastOK, e.lastPassed, e.lastDur, e.lastAtt, e.lastGood, e.lastThr,
		e.objective, e.info, e.next, e.aborts, e.capacity, e.cliff, e.breakdown, e.dominant, e.served, e.serverRequests, e.serverKV, e.reloadOK, e.reloadTime, e.artifactFailures,
		e.attInterval, e.probeDelay, e.probeStarved, e.failing, e.clock, e.dominantByLevel,
		e.cacheSpeedup, e.cacheInterval, e.cacheVerdict, e.idAgreement, e.idInterval, e.idVerdict, e.idMoved, e.idLogprob,
		e.rateLimit[0], e.rateLimit[1], e.rateLimit[2], e.cost, (*liveCollector)(e), probeDelayCollector{},
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Observe records one measured request. It does not allocate once the
// request's label set has been seen (exemplars aside, once a second).
func (e *Exporter) Observe(r *result.Request, v slo.Verdict) {
	s := e.getWith(seriesKey{r.Profile, r.Endpoint, r.Model, r.Level}, nil, timed(r.API))
	s.outcome[r.Outcome].Inc()
	if e.nFailing.Load() > 0 && (r.Outcome == result.Success || r.Outcome == result.WrongAnswer) {
		e.answered(runKey{r.Profile, r.Endpoint})
	}
	s.lag.Observe(r.DispatchLag().Seconds())
	if r.Outcome == result.Error {
		s.reason[r.Reason].Inc()
	}
	if r.Retried {
		s.anomaly[result.AnomalyRetried].Inc()
	}
	if rl := r.RateLimit; rl != nil {
		e.setRateLimit(r.Profile, r.Endpoint, rl, r.End)
	}
	for _, c := range r.Checks {
		i := 0
		if !c.Pass {
			i = 1
		}
		e.check(checkKey{r.Profile, r.Endpoint, r.Model, c.Name})[i].Inc()
	}
	if r.Anomaly != result.AnomalyNone && int(r.Anomaly) < len(s.anomaly) {
		s.anomaly[r.Anomaly].Inc()
	}
	if v.Counted {
		if v.Good {
			s.good.Inc()
		}
		for i, k := range kinds {
			if v.Checked[k] {
				if s.met[i] == nil {
					e.sloSeries(s, i)
				}
				if v.Met[k] {
					s.met[i].Inc()
				} else {
					s.missed[i].Inc()
				}
			}
		}
	}
	if !r.Measured() {
		return
	}
	s.inTok.Add(float64(r.InputTokens))
	if r.CachedInputTokens > 0 {
		s.cachedTok.Add(float64(r.CachedInputTokens))
	}
	s.outTok.Add(float64(r.OutputTokens))
	if r.Cost > 0 {
		if s.cost == nil || s.currency != r.Currency {
			s.cost, s.currency = e.cost.WithLabelValues(r.Profile, r.Endpoint, r.Currency), r.Currency
		}
		s.cost.Add(r.Cost)
	}
	exemplar := s.exemplarDue()
	var ex prometheus.Labels
	if exemplar {
		// Grafana's exemplar link opens the trace by trace_id; request_id
		// is the record's id.
		ex = prometheus.Labels{"request_id": strconv.FormatUint(r.ID, 10)}
		if r.Trace.Valid() {
			ex["trace_id"], ex["span_id"] = r.Trace.TraceIDString(), r.Trace.SpanIDString()
		}
	}
	observe(s.dur, r.E2E.Seconds(), ex)
	if !r.Reused && r.Connect > 0 {
		s.dns.Observe(r.DNS.Seconds())
		s.connect.Observe(r.Connect.Seconds())
		s.tls.Observe(r.TLS.Seconds())
	}
	if r.FirstByte > 0 {
		s.firstByte.Observe(r.FirstByte.Seconds())
	}
	if s.ttft == nil {
		return // an untimed API's series: latency alone
	}
	if r.HasTTFT() {
		observe(s.ttft, r.TTFT.Seconds(), ex)
	}
	if r.HasTTST() {
		s.ttst.Observe(r.TTST.Seconds())
	}
	if itl, ok := r.ITL(); ok {
		observe(s.itl, itl.Seconds(), ex)
	}
	for _, g := range r.Gaps {
		s.gaps.Observe(g.Seconds())
	}
}

// setRateLimit sets the endpoint's rate-limit gauges to what an answer's
// headers said; a field it did not send keeps its last value.
func (e *Exporter) setRateLimit(profile, endpoint string, rl *ratelimit.Reading, at time.Time) {
	for _, k := range ratelimit.Kinds {
		for f, g := range e.rateLimit {
			if v, ok := rl.Get(k, ratelimit.Field(f), at); ok {
				g.WithLabelValues(profile, endpoint, k.String()).Set(v)
			}
		}
	}
}

// observe observes v with exemplar ex, when set.
func observe(o prometheus.Observer, v float64, ex prometheus.Labels) {
	if ex != nil {
		if eo, ok := o.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, ex)
			return
		}
	}
	o.Observe(v)
}

func (s *series) exemplarDue() bool {
	now := time.Now().UnixNano()
	last := s.lastExemplar.Load()
	return now-last >= int64(ExemplarInterval) && s.lastExemplar.CompareAndSwap(last, now)
}

// plus returns labels followed by more, never sharing labels' array.
func plus(labels []string, more ...string) []string {
	return append(slices.Clip(labels), more...)
}

// LevelLabel formats a load level as the load_level label value.
func LevelLabel(level float64) string { return strconv.FormatFloat(level, 'g', -1, 64) }

// timed reports whether an API's requests have a TTFT and gaps:
// embeddings have a latency alone, and no TTFT or ITL series.
func timed(api string) bool { return !openai.Of(openai.API(api)).Vectors }

// getWith returns k's series, making the met and missed series of slos
// with a new series (before it is shared, as Observe reads them without
// the lock), and its TTFT, TTST, ITL and gap series when timed.
func (e *Exporter) getWith(k seriesKey, slos []slo.Kind, timed bool) *series {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s := e.series[k]; s != nil {
		return s
	}
	lv := []string{k.profile, k.endpoint, k.model, LevelLabel(k.level)}
	s := &series{
		dur: e.dur.WithLabelValues(lv...), lag: e.lag.WithLabelValues(lv...),
		dns: e.phases.WithLabelValues(k.profile, k.endpoint, "dns"), connect: e.phases.WithLabelValues(k.profile, k.endpoint, "connect"),
		tls: e.phases.WithLabelValues(k.profile, k.endpoint, "tls"), firstByte: e.phases.WithLabelValues(k.profile, k.endpoint, "first_byte"),
		good: e.good.WithLabelValues(lv...), inTok: e.inTok.WithLabelValues(lv...), cachedTok: e.cachedTok.WithLabelValues(lv...), outTok: e.outTok.WithLabelValues(lv...),
		reason: map[result.Reason]prometheus.Counter{}, labels: lv,
	}
	if timed {
		s.ttft, s.ttst, s.itl = e.ttft.WithLabelValues(lv...), e.ttst.WithLabelValues(lv...), e.itl.WithLabelValues(lv...)
		s.gaps = e.gaps.WithLabelValues(lv...)
	}
	for _, o := range result.Outcomes {
		s.outcome[o] = e.requests.WithLabelValues(plus(lv, o.String())...)
	}
	// Every reason and SLO series exists from the start, at 0, so that
	// rate() and absent() behave before the first failure.
	for _, r := range result.Reasons {
		s.reason[r] = e.errors.WithLabelValues(plus(lv, r.String())...)
	}
	for _, a := range result.Anomalies {
		s.anomaly[a] = e.anomalies.WithLabelValues(plus(lv, a.String())...)
	}
	for i, kind := range kinds {
		if slices.Contains(slos, kind) {
			e.sloSeries(s, i)
		}
	}
	e.series[k] = s
	return s
}

// check is an answer check's pass and fail counters.
func (e *Exporter) check(k checkKey) *[2]prometheus.Counter {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.checkSeries[k]
	if c == nil {
		c = &[2]prometheus.Counter{e.checks.WithLabelValues(k.profile, k.endpoint, k.model, k.check, "pass"),
			e.checks.WithLabelValues(k.profile, k.endpoint, k.model, k.check, "fail")}
		e.checkSeries[k] = c
	}
	return c
}

// sloSeries makes the met and missed series of SLO kinds[i] for s, on
// the first request checked against it: a profile's series exist only
// for the SLOs it sets.
func (e *Exporter) sloSeries(s *series, i int) {
	k := kinds[i].String()
	s.met[i] = e.sloReqs.WithLabelValues(plus(s.labels, k, "met")...)
	s.missed[i] = e.sloReqs.WithLabelValues(plus(s.labels, k, "missed")...)
}

// Description is a profile x endpoint as the configuration loads it.
type Description struct {
	Profile, Endpoint, Model, URL, API string
	Objective                          float64
	// ServerInstance is the host:port Prometheus scrapes the inference
	// server's own metrics at: the server rules join the server's series
	// to the endpoint on it.
	ServerInstance string
	// Levels are the load levels the plan runs at and SLOs the thresholds
	// it sets: their series exist at zero from the load on, because
	// rate() ignores a series' first sample, and a series created at its
	// first observation would hide its whole first run.
	Levels []float64
	SLOs   []slo.Kind
	// Checks are the names of its answer checks.
	Checks []string
}

// Describe registers a profile x endpoint: its info series and objective,
// and every series its runs will add to, at zero. Call it when the
// configuration is (re)loaded.
func (e *Exporter) Describe(d Description) {
	profile, endpoint := d.Profile, d.Endpoint
	// A reload may change the endpoint's URL, model or server: one info
	// series per job, or the server rules would join it twice.
	e.info.DeletePartialMatch(prometheus.Labels{"profile": profile, "endpoint": endpoint})
	e.info.WithLabelValues(profile, endpoint, d.Model, d.URL, d.API, d.ServerInstance).Set(1)
	e.objective.WithLabelValues(profile, endpoint).Set(d.Objective)
	for _, level := range d.Levels {
		e.getWith(seriesKey{profile, endpoint, d.Model, level}, d.SLOs, timed(d.API))
	}
	for _, name := range d.Checks {
		e.check(checkKey{profile, endpoint, d.Model, name})
	}
	for _, res := range []probe.Verdict{probe.Passed, probe.Failed, probe.Undecided, probe.Errored, probe.Cancelled} {
		e.runs.WithLabelValues(profile, endpoint, string(res))
	}
	// Counters of events that may never happen exist at 0, so a panel or
	// an increase() reads 0, not "no data".
	for _, reason := range scheduler.SkipReasons {
		e.skipped.WithLabelValues(profile, endpoint, reason)
	}
	e.artifactFailures.WithLabelValues(profile, endpoint)
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.live[runKey{profile, endpoint}]; !ok {
		e.live[runKey{profile, endpoint}] = nil
		// A new job has not passed yet: its last success is its start,
		// so an alert on the age of the last success fires for a job
		// that never passes, once it is old enough.
		e.lastOK.WithLabelValues(profile, endpoint).SetToCurrentTime()
	}
}

// RunStarted makes a run's in-flight requests and target load visible.
func (e *Exporter) RunStarted(run *probe.Run) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.live[runKey{run.Profile, run.Endpoint.Name}] = run
}

// RunFinished records a run's verdict and its figures.
func (e *Exporter) RunFinished(run *probe.Run, f probe.Finished) {
	var s stats.Summary
	if f.Summary != nil {
		s = *f.Summary
	}
	k := runKey{run.Profile, run.Endpoint.Name}
	e.mu.Lock()
	if e.live[k] == run {
		e.live[k] = nil
	}
	e.mu.Unlock()
	now := float64(time.Now().UnixNano()) / 1e9
	lv := []string{k.profile, k.endpoint}
	e.setFailing(k, f)
	res := string(f.Verdict)
	e.runs.WithLabelValues(plus(lv, res)...).Inc()
	e.lastTS.WithLabelValues(lv...).Set(now)
	passed := 0.0
	if f.Verdict == probe.Passed {
		passed = 1
	}
	if f.Verdict == probe.Passed || f.Verdict == probe.Undecided {
		// A run without enough evidence did not fail: the age of the
		// last success pages runs that keep failing, and the burn-rate
		// rules weigh every request of every run together.
		e.lastOK.WithLabelValues(lv...).Set(now)
	}
	if ev := s.Evidence; ev != nil && ev.Counted > 0 {
		e.attInterval.WithLabelValues(plus(lv, "low")...).Set(ev.Attainment.Low)
		e.attInterval.WithLabelValues(plus(lv, "high")...).Set(ev.Attainment.High)
	} else {
		e.attInterval.DeletePartialMatch(prometheus.Labels{"profile": k.profile, "endpoint": k.endpoint})
	}
	e.setPrefixCache(lv, s.PrefixCache)
	e.setIdentity(lv, s.ModelIdentity)
	if p := s.Probe; p != nil {
		e.probeDelay.WithLabelValues(lv...).Set(p.DelayP99Ms / 1000)
		starved := 0.0
		if p.Starved {
			starved = 1
		}
		e.probeStarved.WithLabelValues(lv...).Set(starved)
	}
	e.lastPassed.WithLabelValues(lv...).Set(passed)
	e.lastDur.WithLabelValues(lv...).Set(s.DurationSeconds)
	e.lastAtt.WithLabelValues(lv...).Set(s.Attainment)
	e.lastGood.WithLabelValues(lv...).Set(s.Goodput)
	e.lastThr.WithLabelValues(lv...).Set(s.RequestThroughput)
	if k := s.Knee; k != nil && f.Err == nil {
		e.capacity.WithLabelValues(lv...).Set(k.CapacityAtSLO)
		e.cliff.WithLabelValues(lv...).Set(k.CliffLevel)
	}
	e.setBreakdown(lv, s.Server)
	e.setLevelCauses(lv, &s)
	if c := serverClock(&s); c != "" {
		// The server's, found by a run: one series per profile and
		// endpoint, replaced when a run finds otherwise (a server
		// upgraded in place), kept through runs that cannot tell.
		e.clock.DeletePartialMatch(prometheus.Labels{"profile": k.profile, "endpoint": k.endpoint})
		e.clock.WithLabelValues(plus(lv, c)...).Set(1)
	}
	e.setServerLoad(lv, &s)
	// The models the last run's answers named, read from the answers (a
	// gateway substituting one for some answers shows beside the one
	// expected): at most maxServedSeries a profile and endpoint, replaced
	// by each run, never added to, the names cut to a bound (the
	// server's strings).
	e.served.DeletePartialMatch(prometheus.Labels{"profile": k.profile, "endpoint": k.endpoint})
	for i, m := range s.ServedModels {
		if i == maxServedSeries {
			break
		}
		e.served.WithLabelValues(plus(lv, truncate(m.Name, 128))...).Set(1)
	}
}

// serverClock is where the server's TTFT clock starts, as s or the first
// of its levels that could tell found it, or "".
func serverClock(s *stats.Summary) string {
	if sv := s.Server; sv != nil && sv.Breakdown != nil && sv.Breakdown.ServerTTFTClock != "" {
		return sv.Breakdown.ServerTTFTClock
	}
	for i := range s.Stages {
		if c := serverClock(&s.Stages[i]); c != "" {
			return c
		}
	}
	return ""
}

// maxServedSeries bounds the served-model series of a profile and
// endpoint: the most frequent names of the last run.
const maxServedSeries = 4

// truncate cuts s to at most n bytes, at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// setServerLoad publishes the server's load per level of the run, the
// last run's only.
func (e *Exporter) setServerLoad(lv []string, s *stats.Summary) {
	match := prometheus.Labels{"profile": lv[0], "endpoint": lv[1]}
	e.serverRequests.DeletePartialMatch(match)
	e.serverKV.DeletePartialMatch(match)
	levels := s.Stages
	if len(levels) == 0 {
		levels = []stats.Summary{*s}
	}
	for _, st := range levels {
		sv := st.Server
		if sv == nil {
			continue
		}
		level := LevelLabel(st.Level)
		if sv.Running != nil {
			e.serverRequests.WithLabelValues(plus(lv, level, "running")...).Set(sv.Running.Avg)
		}
		if sv.Waiting != nil {
			e.serverRequests.WithLabelValues(plus(lv, level, "waiting")...).Set(sv.Waiting.Avg)
		}
		if sv.KVCache != nil {
			e.serverKV.WithLabelValues(plus(lv, level)...).Set(sv.KVCache.Avg)
		}
	}
}

// setBreakdown publishes where the run's TTFT went, or removes the last
// run's figures when this one has none: an old breakdown beside a new run
// would explain what it did not see.
func (e *Exporter) setBreakdown(lv []string, sv *stats.Server) {
	match := prometheus.Labels{"profile": lv[0], "endpoint": lv[1]}
	e.breakdown.DeletePartialMatch(match)
	e.dominant.DeletePartialMatch(match)
	if sv == nil || sv.Breakdown == nil {
		return
	}
	b := sv.Breakdown
	set := func(stat string, sp *stats.Split) {
		e.breakdown.WithLabelValues(plus(lv, "queue", stat)...).Set(sp.Queue / 1000)
		e.breakdown.WithLabelValues(plus(lv, "elsewhere", stat)...).Set(sp.Elsewhere / 1000)
		if sp.Prefill != nil {
			e.breakdown.WithLabelValues(plus(lv, "prefill", stat)...).Set(*sp.Prefill / 1000)
		}
		if sp.Outside != nil {
			e.breakdown.WithLabelValues(plus(lv, "server_other", stat)...).Set(*sp.ServerOther / 1000)
			e.breakdown.WithLabelValues(plus(lv, "outside_server", stat)...).Set(*sp.Outside / 1000)
		}
	}
	set("mean", &b.Mean)
	if b.P50 != nil {
		set("p50", b.P50)
	}
	setDominant(e.dominant, lv, b)
}

// setDominant sets g's series of labels lv: 1 for b's dominant phase, 0
// for the others it has.
func setDominant(g *prometheus.GaugeVec, lv []string, b *stats.Breakdown) {
	for _, phase := range []string{"queue", "prefill", "elsewhere"} {
		if phase == "prefill" && b.Mean.Prefill == nil {
			continue
		}
		v := 0.0
		if phase == b.Dominant {
			v = 1
		}
		g.WithLabelValues(plus(lv, phase)...).Set(v)
	}
}

// setLevelCauses publishes the dominant phase of each level of the run
// (of the run itself where it has one level): a sweep's level 2 of 4
// slots queues little, its top levels much, and a page on level 2 must
// not quote the run's whole.
func (e *Exporter) setLevelCauses(lv []string, s *stats.Summary) {
	e.dominantByLevel.DeletePartialMatch(prometheus.Labels{"profile": lv[0], "endpoint": lv[1]})
	levels := s.Stages
	if len(levels) == 0 {
		levels = []stats.Summary{*s}
	}
	for _, st := range levels {
		if st.Server != nil && st.Server.Breakdown != nil {
			setDominant(e.dominantByLevel, plus(lv, LevelLabel(st.Level)), st.Server.Breakdown)
		}
	}
}

// answered ends the failing state of k's endpoint: an answer came.
func (e *Exporter) answered(k runKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.failingNow[k]; ok {
		e.failing.DeletePartialMatch(prometheus.Labels{"profile": k.profile, "endpoint": k.endpoint})
		delete(e.failingNow, k)
		e.nFailing.Add(-1)
	}
}

// setFailing records what a run says of its endpoint: failing with the
// reason of most of its failures when it was aborted by the failure
// policy or had no request succeed (its error's probe.RunError), else
// not. A cancelled run says nothing.
func (e *Exporter) setFailing(k runKey, f probe.Finished) {
	if f.Verdict == probe.Cancelled {
		return
	}
	var re *probe.RunError
	reason := ""
	if errors.As(f.Err, &re) && re.Reason != result.ReasonNone {
		reason = re.Reason.String()
	}
	if reason == "" {
		if f.Summary != nil && f.Summary.Success+f.Summary.WrongAnswers > 0 {
			e.answered(k)
		}
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	old, ok := e.failingNow[k]
	if ok && old == reason {
		return
	}
	e.failing.DeletePartialMatch(prometheus.Labels{"profile": k.profile, "endpoint": k.endpoint})
	e.failing.WithLabelValues(k.profile, k.endpoint, reason).Set(1)
	if !ok {
		e.nFailing.Add(1)
	}
	e.failingNow[k] = reason
}

// RunSkipped counts a scheduled tick that started no run.
func (e *Exporter) RunSkipped(profile, endpoint, reason string) {
	e.skipped.WithLabelValues(profile, endpoint, reason).Inc()
}

// AbortedInARow publishes a job's aborted runs in a row.
func (e *Exporter) AbortedInARow(profile, endpoint string, n int) {
	e.aborts.WithLabelValues(profile, endpoint).Set(float64(n))
}

// NextRun publishes when a job runs next; a zero time (a manual job)
// removes the series, as there is no next run to show.
func (e *Exporter) NextRun(profile, endpoint string, at time.Time) {
	if at.IsZero() {
		e.next.DeleteLabelValues(profile, endpoint)
		return
	}
	e.next.WithLabelValues(profile, endpoint).Set(float64(at.UnixNano()) / 1e9)
}

// ConfigReloaded records the outcome of a configuration (re)load.
// ArtifactWriteFailed counts a run whose artifacts were not written.
func (e *Exporter) ArtifactWriteFailed(profile, endpoint string) {
	e.artifactFailures.WithLabelValues(profile, endpoint).Inc()
}

func (e *Exporter) ConfigReloaded(ok bool) {
	if ok {
		e.reloadOK.Set(1)
		e.reloadTime.SetToCurrentTime()
	} else {
		e.reloadOK.Set(0)
	}
}

// DroppedCounter is the counter a queue in front of sink increments.
func (e *Exporter) DroppedCounter(sink string) prometheus.Counter {
	return e.dropped.WithLabelValues(sink)
}

// OTLPDropped counts n spans or metric points (signal "traces" or
// "metrics") that an OTLP export lost: otlp.Config.Dropped.
func (e *Exporter) OTLPDropped(signal string, n int64) {
	e.otlpDropped.WithLabelValues(signal).Add(float64(n))
}

// Forget deletes every series of a profile against an endpoint (every
// endpoint when endpoint is ""), for a job removed from the configuration.
func (e *Exporter) Forget(profile, endpoint string) {
	match := prometheus.Labels{"profile": profile}
	if endpoint != "" {
		match["endpoint"] = endpoint
	}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		e.ttft, e.ttst, e.itl, e.gaps, e.dur, e.lag, e.phases, e.requests, e.checks, e.errors, e.anomalies, e.good, e.sloReqs, e.inTok, e.cachedTok, e.outTok,
		e.runs, e.skipped, e.lastTS, e.lastOK, e.lastPassed, e.lastDur, e.lastAtt, e.lastGood, e.lastThr, e.objective, e.info, e.next,
		e.aborts, e.capacity, e.cliff, e.breakdown, e.dominant, e.served, e.serverRequests, e.serverKV, e.artifactFailures,
		e.attInterval, e.probeDelay, e.probeStarved, e.failing, e.clock, e.dominantByLevel,
		e.cacheSpeedup, e.cacheInterval, e.cacheVerdict, e.idAgreement, e.idInterval, e.idVerdict, e.idMoved, e.idLogprob,
		e.rateLimit[0], e.rateLimit[1], e.rateLimit[2], e.cost,
	} {
		v.DeletePartialMatch(match)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := range e.series {
		if k.profile == profile && (endpoint == "" || k.endpoint == endpoint) {
			delete(e.series, k)
		}
	}
	for k := range e.checkSeries {
		if k.profile == profile && (endpoint == "" || k.endpoint == endpoint) {
			delete(e.checkSeries, k)
		}
	}
	for k := range e.live {
		if k.profile == profile && (endpoint == "" || k.endpoint == endpoint) {
			delete(e.live, k)
		}
	}
	for k := range e.failingNow {
		if k.profile == profile && (endpoint == "" || k.endpoint == endpoint) {
			delete(e.failingNow, k)
			e.nFailing.Add(-1)
		}
	}
}

// liveCollector reads in-flight requests and target load from runs in
// progress at scrape time, which costs the request path nothing.
type liveCollector Exporter

var (
	inFlightDesc   = prometheus.NewDesc(catalog.InFlight.Name, catalog.InFlight.Help, catalog.InFlight.Labels, nil)
	targetConcDesc = prometheus.NewDesc(catalog.TargetConcurrency.Name, catalog.TargetConcurrency.Help, catalog.TargetConcurrency.Labels, nil)
	targetRateDesc = prometheus.NewDesc(catalog.TargetRate.Name, catalog.TargetRate.Help, catalog.TargetRate.Labels, nil)
)

func (c *liveCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- inFlightDesc
	ch <- targetConcDesc
	ch <- targetRateDesc
}

func (c *liveCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, run := range c.live {
		var inFlight, conc, rate float64
		if run != nil {
			p := run.Progress()
			inFlight = float64(p.InFlight)
			conc = p.Level // a ramp's current point
			if p.Stage.Rate > 0 {
				conc, rate = float64(p.Stage.MaxConcurrency), p.Level
			}
		}
		ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, inFlight, k.profile, k.endpoint)
		ch <- prometheus.MustNewConstMetric(targetConcDesc, prometheus.GaugeValue, conc, k.profile, k.endpoint)
		ch <- prometheus.MustNewConstMetric(targetRateDesc, prometheus.GaugeValue, rate, k.profile, k.endpoint)
	}
}

// setPrefixCache exports a prefix-cache probe's last verdict: its
// speed-up where a triple was complete, its interval where two were, and
// the verdict as a state set.
func (e *Exporter) setPrefixCache(lv []string, pc *stats.PrefixCache) {
	match := prometheus.Labels{"profile": lv[0], "endpoint": lv[1]}
	if pc == nil {
		return
	}
	e.cacheSpeedup.DeletePartialMatch(match)
	e.cacheInterval.DeletePartialMatch(match)
	if pc.Triples > 0 {
		e.cacheSpeedup.WithLabelValues(lv...).Set(pc.Speedup)
	}
	if pc.Triples > 1 {
		e.cacheInterval.WithLabelValues(plus(lv, "low")...).Set(pc.Interval.Low)
		e.cacheInterval.WithLabelValues(plus(lv, "high")...).Set(pc.Interval.High)
	}
	for _, v := range []stats.Outcome{stats.CacheWorking, stats.CacheBroken, stats.Undecided} {
		on := 0.0
		if pc.Verdict == v {
			on = 1
		}
		e.cacheVerdict.WithLabelValues(plus(lv, string(v))...).Set(on)
	}
}

// setIdentity exports a model-identity probe's last verdict: the share
// of prompts that agreed and its interval once a reference is learned,
// the verdict as a state set, and the prompt that moved most.
func (e *Exporter) setIdentity(lv []string, mi *stats.ModelIdentity) {
	if mi == nil {
		return
	}
	match := prometheus.Labels{"profile": lv[0], "endpoint": lv[1]}
	for _, g := range []*prometheus.GaugeVec{e.idAgreement, e.idInterval, e.idMoved, e.idLogprob} {
		g.DeletePartialMatch(match)
	}
	if mi.Prompts > 0 {
		e.idAgreement.WithLabelValues(lv...).Set(mi.Agreement)
		e.idInterval.WithLabelValues(plus(lv, "low")...).Set(mi.Interval.Low)
		e.idInterval.WithLabelValues(plus(lv, "high")...).Set(mi.Interval.High)
	}
	if m := mi.Moved; m != nil {
		e.idMoved.WithLabelValues(plus(lv, m.Prompt)...).Set(1)
	}
	if l := mi.Logprobs; l != nil {
		e.idLogprob.WithLabelValues(lv...).Set(l.Distance)
	}
	for _, v := range []stats.Outcome{stats.SameModel, stats.ModelChanged, stats.Undecided, stats.Learning} {
		on := 0.0
		if mi.Verdict == v {
			on = 1
		}
		e.idVerdict.WithLabelValues(plus(lv, string(v))...).Set(on)
	}
}
