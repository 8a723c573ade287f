package stats

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/ratelimit"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
)

// Shard is one share of a study's load: Index of Count.
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// Merged says what a merged run (`tokenprobe merge`, `tokenprobe run
// --processes`) joined: how many shards, and how far apart their first
// requests were (over a second or two, they did not load the endpoint at
// once).
type Merged struct {
	Shards        int     `json:"shards"`
	StartSpreadMs float64 `json:"start_spread_ms"`
}

// Summary is a run's report (METRICS.md section 4). Times are in
// milliseconds, rates per second.
type Summary struct {
	Profile  string  `json:"profile"`
	Endpoint string  `json:"endpoint"`
	Model    string  `json:"model"`
	Level    float64 `json:"level,omitempty"`
	// LevelRange is a staged run's lowest and highest level, in place of
	// Level.
	LevelRange []float64 `json:"level_range,omitempty"`
	// LevelName is what the levels count: "concurrency", "request rate",
	// or "load level" when a run's stages mix them.
	LevelName string `json:"level_name,omitempty"`
	// Location is where the probe ran from (--probe.location).
	Location string `json:"location,omitempty"`
	// Shard is which share of a study this run was (`tokenprobe run
	// --shard.index`), absent for a whole run; a merged run lists none.
	Shard *Shard `json:"shard,omitempty"`
	// Merged is present on a run merged from shards.
	Merged *Merged `json:"merged,omitempty"`

	Requests  int `json:"requests"`
	Success   int `json:"success"`
	Errors    int `json:"errors"`
	Cancelled int `json:"cancelled"`
	// WrongAnswers counts requests answered in full whose answer failed a
	// check: failed, never good, their timing in the distributions.
	WrongAnswers int            `json:"wrong_answers"`
	ByReason     map[string]int `json:"errors_by_reason"`
	// Checks are the answer checks' pass and fail counts, in the order
	// they ran, with the first failure's message.
	Checks []CheckStat `json:"checks,omitempty"`
	// Failures describes the errors by reason: statuses, the most
	// frequent message and a hint at the likely mistake.
	Failures []Failure `json:"failures,omitempty"`
	// RateLimits are what the provider's rate-limit headers said during
	// the run, by kind, beside the probe's own use: absent where the
	// server sent none.
	RateLimits []RateLimit `json:"rate_limits,omitempty"`
	// Error is why the run is an error although it ran: aborted by the
	// failure policy, no request succeeded, or too many failed.
	Error       string `json:"error,omitempty"`
	Aborted     bool   `json:"aborted,omitempty"`
	Interrupted bool   `json:"interrupted,omitempty"`
	// Warmup counts the warmup's requests, which are in no figure above
	// but count for the failure policy: a run aborted in its warmup
	// shows here the requests that aborted it.
	Warmup *Warmup `json:"warmup,omitempty"`
	// FailureWaitSeconds is the time workers waited after failed requests
	// (backoff and Retry-After), summed over workers; it is intended, so
	// it is in no latency figure.
	FailureWaitSeconds float64 `json:"failure_wait_s,omitempty"`
	// Retried counts requests sent a second time because the server had
	// closed the kept-alive connection they were first sent on.
	Retried int `json:"retried_requests,omitempty"`
	// Dropped counts arrivals an open loop did not send, by reason
	// ("retry_after": the server asked for a pause).
	Dropped map[string]int `json:"dropped_arrivals,omitempty"`

	TTFT        Dist `json:"ttft_ms"`
	TTST        Dist `json:"ttst_ms"`
	TTFO        Dist `json:"time_to_first_output_token_ms"`
	ITL         Dist `json:"itl_ms"`
	InterChunk  Dist `json:"inter_chunk_latency_ms"`
	E2E         Dist `json:"request_latency_ms"`
	ISL         Dist `json:"input_sequence_length"`
	OSL         Dist `json:"output_sequence_length"`
	UserTPS     Dist `json:"output_tokens_per_second_per_user"`
	DispatchLag Dist `json:"dispatch_lag_ms"`
	// InputLengthError is reported minus intended input tokens, where the
	// server reported usage: how far the prompt sizing is off.
	InputLengthError Dist `json:"input_length_error_tokens"`
	// The network's share: DNS, Connect and TLS over the requests that
	// opened a connection, Network (their sum, 0 on a kept connection)
	// and FirstByte (start to the response's first byte) over every
	// measured request.
	DNS       Dist `json:"dns_ms"`
	Connect   Dist `json:"connect_ms"`
	TLS       Dist `json:"tls_ms"`
	Network   Dist `json:"network_ms"`
	FirstByte Dist `json:"first_byte_ms"`

	// InputTokens and OutputTokens are totals over successful requests.
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// CachedInputTokens is the part of InputTokens the server read from
	// its prompt cache, as its usage says.
	CachedInputTokens int `json:"cached_input_tokens,omitempty"`
	// Cost is what the run's answered requests cost at the endpoint's
	// price, in Currency; absent without a price.
	Cost     float64 `json:"cost,omitempty"`
	Currency string  `json:"currency,omitempty"`

	DurationSeconds       float64 `json:"benchmark_duration_s"`
	RequestThroughput     float64 `json:"request_throughput"`
	OutputTokenThroughput float64 `json:"output_token_throughput"`
	// InputTokenThroughput is an embeddings model's throughput.
	InputTokenThroughput float64 `json:"input_token_throughput"`
	Goodput              float64 `json:"goodput"`
	Good                 int     `json:"good"`
	// Attainment is good / (success + error + wrong answer); PerSLO the same
	// per threshold.
	Attainment float64            `json:"slo_attainment"`
	PerSLO     map[string]float64 `json:"slo_attainment_by_slo,omitempty"`
	Objective  float64            `json:"slo_objective,omitempty"`
	// SLOThresholds are the profile's SLO limits by kind: milliseconds,
	// tokens per second for output_tokens_per_second.
	SLOThresholds map[string]float64 `json:"slo_thresholds,omitempty"`
	// Passed is true when the run met its objective with 95% confidence
	// (Evidence), or had none; false when wrong answers are more than
	// MaxWrongRatio of the requests, SLO or not; for a capacity search,
	// when no level it tried was shown to meet the objective; and when the
	// run could not be carried out (Error).
	Passed bool `json:"passed"`
	// Undecided is true when the run neither met nor missed its objective
	// with 95% confidence: not enough evidence (Evidence says why and how
	// many requests would decide it). Passed is false then.
	Undecided bool `json:"not_enough_evidence,omitempty"`
	// Evidence is how sure the verdict on the objective is: the
	// attainment's 95% interval and the outcome it decides; absent
	// without an objective.
	Evidence *Evidence `json:"evidence,omitempty"`
	// Probe is how promptly the probe's own process ran during the run:
	// the delay its timestamps could have had.
	Probe *Probe `json:"probe,omitempty"`
	// PrefixCache is a prefix-cache probe's verdict (nil for any other
	// profile).
	PrefixCache *PrefixCache `json:"prefix_cache,omitempty"`
	// ModelIdentity is a model-identity probe's verdict (nil for any
	// other profile).
	ModelIdentity *ModelIdentity `json:"model_identity,omitempty"`
	// Verdict is VerdictLine, written into summary.json.
	Verdict string `json:"verdict,omitempty"`
	// MaxWrongRatio is the share of wrong answers the run tolerates
	// before it fails (checks.max_wrong_ratio).
	MaxWrongRatio float64 `json:"max_wrong_ratio"`
	// Stages holds one summary per stage of a multi-stage run, in order.
	Stages []Summary `json:"stages,omitempty"`
	// Knee is read off Stages: capacity at SLO and where TTFT breaks.
	Knee *Knee `json:"knee,omitempty"`
	// Search is a capacity search's result, its steps in Stages.
	Search *Search `json:"search,omitempty"`
	// ServedModel is the model the endpoint's answers named (what the
	// default model check learned), where it differs from Model.
	ServedModel string `json:"served_model,omitempty"`
	// ServedModels are the models the run's answers named, the most
	// frequent first (at most 8 names; answers naming others are counted
	// in ServedOther): a gateway substituting a model for some answers
	// shows here with its share.
	ServedModels []ServedModel `json:"served_models,omitempty"`
	ServedOther  int           `json:"served_other,omitempty"`
	// GPU is what the GPUs did over the run, when a GPU source is set.
	GPU *GPU `json:"gpu,omitempty"`
	// Server is what the endpoint's server said about the run, when its
	// metrics are read (server_metrics).
	Server *Server `json:"server,omitempty"`
	// Start is the first request's send time, End the last one's end:
	// the window the server's figures are read over.
	Start time.Time `json:"start,omitzero"`
	End   time.Time `json:"end,omitzero"`
}

// GPU is what the GPUs did during one run, from DCGM or a dcgm-exporter.
type GPU struct {
	Source  string `json:"source"`
	GPUs    int    `json:"gpus"`
	Samples int    `json:"samples"`
	// Averages and peaks over the run and over all GPUs (utilisation and
	// SM active as dcgm-exporter gives them: percent, and a ratio).
	UtilAvg  float64 `json:"gpu_util_avg_percent"`
	UtilPeak float64 `json:"gpu_util_peak_percent"`
	// SM active is DCGM's profiling field: nil where the source has none
	// (NVML), never a 0 that was not read.
	SMActiveAvg  *float64 `json:"sm_active_avg,omitempty"`
	SMActivePeak *float64 `json:"sm_active_peak,omitempty"`
	PowerAvg     float64  `json:"power_avg_watts"`
	PowerPeak    float64  `json:"power_peak_watts"`
	MemUsedPeak  float64  `json:"fb_used_peak_mib"`
	// EnergyJoules is the energy counter's rise over the run, all GPUs.
	EnergyJoules float64 `json:"energy_joules,omitempty"`
	// Per output token and its inverse, when energy and tokens are known.
	JoulesPerOutputToken float64 `json:"joules_per_output_token,omitempty"`
	OutputTokensPerJoule float64 `json:"output_tokens_per_joule,omitempty"`
	Err                  string  `json:"error,omitempty"`
}

// Aggregator accumulates measured requests into a Summary. It is not safe
// for concurrent use; a run feeds it from one collector goroutine.
type Aggregator struct {
	s                            Summary
	rateLimits                   [ratelimit.NumKinds]rateLimitSeen // by ratelimit.Kind
	ttft, ttst, ttfo, itl, e2e   samples
	gaps                         gapSketch // one per chunk: bounded
	isl, osl, tps, lag, inErr    samples
	dns, connect, tls, net, head samples
	first, last                  time.Time
	good, counted                int
	met                          map[slo.Kind]int
	checked                      map[slo.Kind]bool
	inTokens, outTokens, cached  int
	failures                     map[result.Reason]*failureGroup
	checks                       []CheckStat
	// misses are how much each request that missed only its timing
	// thresholds missed them by (slo.Verdict.Miss), in milliseconds: the
	// misses the probe's own delay could account for.
	misses []float32
	probe  *Probe
	served map[string]int // by model name, at most maxServedNames
	// triples are a prefix-cache probe's, by CacheTriple (nil for any
	// other profile); cacheMin its bar.
	triples  map[int]*cacheTriple
	cacheMin float64
}

// Probe is how promptly the probe's own process ran over a run
// (internal/probehealth): how late its timer wake-ups came, which is the
// delay any timestamp it took could have had.
type Probe struct {
	DelayP50Ms  float64 `json:"delay_p50_ms"`
	DelayMeanMs float64 `json:"delay_mean_ms"`
	DelayP99Ms  float64 `json:"delay_p99_ms"`
	DelayMaxMs  float64 `json:"delay_max_ms"`
	// Samples is the wake-ups measured (about 100 a second).
	Samples int `json:"samples"`
	// StealPercent is the CPU the hypervisor gave other tenants over the
	// run; -1 where the kernel does not say.
	StealPercent float64 `json:"steal_percent"`
	// Starved is set when the probe cannot vouch for its timing: its
	// delay p99 is over StarvedShare of the run's median TTFT (request
	// latency without TTFT) and over StarvedFloorMs, or the hypervisor
	// took StarvedStealPercent of the CPU. Why says which.
	Starved bool   `json:"starved"`
	Why     string `json:"why,omitempty"`
}

// The probe is starved when its delay p99 is over a tenth of the run's
// median TTFT, and over 2 ms (a timer's own jitter on an idle machine
// is a fraction of that), or when the hypervisor took a tenth of the CPU:
// past that the probe's own stalls, not the server, can move the tail
// figures by more than a tenth.
const (
	StarvedShare        = 0.1
	StarvedFloorMs      = 2.0
	StarvedStealPercent = 10.0
)

// SetProbe gives the aggregator the probe's delay over the requests it
// holds: Summary judges the run with it.
func (a *Aggregator) SetProbe(p Probe) { a.probe = &p }

// explained counts the misses within delayMs.
func (a *Aggregator) explained(delayMs float64) int {
	n := 0
	for _, m := range a.misses {
		if float64(m) <= delayMs {
			n++
		}
	}
	return n
}

// Judge is the verdict on the objective of the requests added so far,
// with the probe's delay p99 delayMs.
func (a *Aggregator) Judge(delayMs float64) Evidence {
	return Judge(a.good, a.counted, a.explained(delayMs), a.s.Objective)
}

// Counts are the good requests added so far, those counted against the
// SLO, and the misses within delayMs.
func (a *Aggregator) Counts(delayMs float64) (good, counted, explained int) {
	return a.good, a.counted, a.explained(delayMs)
}

// CheckStat is one answer check over a run.
type CheckStat struct {
	Name string `json:"name"`
	Pass int    `json:"pass"`
	Fail int    `json:"fail"`
	// FirstFailure is the first failing answer's message: what the check
	// wanted and the answer's first MaxMessage characters.
	FirstFailure string `json:"first_failure,omitempty"`
}

func (a *Aggregator) check(r *result.Request, c result.Check) {
	i := slices.IndexFunc(a.checks, func(s CheckStat) bool { return s.Name == c.Name })
	if i < 0 {
		a.checks = append(a.checks, CheckStat{Name: c.Name})
		i = len(a.checks) - 1
	}
	st := &a.checks[i]
	if c.Pass {
		st.Pass++
		return
	}
	st.Fail++
	if st.FirstFailure == "" {
		// The check's own message: a request failing two checks carries
		// each one's, and r.Err is only the first's.
		msg := c.Message
		if msg == "" {
			msg = r.Err
		}
		st.FirstFailure = cut(msg, MaxMessage)
	}
}

// NewAggregator starts a summary for one profile x endpoint (x level).
func NewAggregator(profile, endpoint, model string, level, objective float64) *Aggregator {
	return &Aggregator{
		s:       Summary{Profile: profile, Endpoint: endpoint, Model: model, Level: level, Objective: objective, ByReason: map[string]int{}},
		met:     map[slo.Kind]int{},
		checked: map[slo.Kind]bool{},
	}
}

// SetMaxWrongRatio sets the share of wrong answers the run tolerates
// (0: none).
func (a *Aggregator) SetMaxWrongRatio(r float64) { a.s.MaxWrongRatio = r }

// WrongShare is the share of wrong answers among the requests that
// succeeded, failed or answered wrongly (0 when there were none).
func (s *Summary) WrongShare() float64 {
	counted := s.Success + s.Errors + s.WrongAnswers
	if counted == 0 {
		return 0
	}
	return float64(s.WrongAnswers) / float64(counted)
}

// WrongAnswersOver reports whether the run's wrong answers are more than
// it tolerates.
func (s *Summary) WrongAnswersOver() bool { return s.WrongShare() > s.MaxWrongRatio }

// VerdictLine is the run's verdict in one line, with why: the words the
// console, summary.json, report.html and the run page all show, made
// here and nowhere else from Passed and what decided it.
func (s *Summary) VerdictLine() string {
	switch {
	case s.Interrupted:
		return "INTERRUPTED: stopped before its end; its figures cover what ran"
	case s.Error != "" && s.Aborted:
		return "ERROR: aborted by the failure policy: " + s.Error
	case s.Error != "":
		return "ERROR: " + s.Error
	}
	var why []string
	if s.WrongAnswersOver() {
		why = append(why, fmt.Sprintf("%.1f%% wrong answers, over the %.1f%% tolerated", 100*s.WrongShare(), 100*s.MaxWrongRatio))
	}
	switch {
	case s.Search != nil && s.Objective > 0 && s.Search.Capacity > 0:
		why = append(why, fmt.Sprintf("the search found a capacity of %g shown to meet the %.1f%% objective", s.Search.Capacity, 100*s.Objective))
	case s.Search != nil && s.Objective > 0 && s.Undecided:
		why = append(why, fmt.Sprintf("no level the search tried was shown to meet the %.1f%% objective, and %s", 100*s.Objective, s.Search.undecidedSteps()))
	case s.Search != nil && s.Objective > 0:
		why = append(why, fmt.Sprintf("no level the search tried met the %.1f%% objective", 100*s.Objective))
	case s.Objective > 0 && s.Evidence != nil:
		why = append(why, s.Evidence.sentence(s.Attainment, s.Objective, s.Probe))
	case !s.WrongAnswersOver():
		why = append(why, "no SLO objective to meet, and the answers are right")
	}
	word := "PASSED"
	switch {
	case s.Undecided && !s.WrongAnswersOver():
		word = "NOT ENOUGH EVIDENCE"
	case !s.Passed:
		word = "FAILED"
	}
	return word + ": " + strings.Join(why, "; ")
}

// sentence says what the evidence decides, with its interval.
func (e *Evidence) sentence(attainment, objective float64, p *Probe) string {
	of := fmt.Sprintf("SLO attainment %s of %d requests (95%% interval %s to %s)", Pct(attainment), e.Counted, Pct(e.Attainment.Low), Pct(e.Attainment.High))
	switch e.Outcome {
	case Met:
		return fmt.Sprintf("%s meets the %s objective", of, Pct(objective))
	case Missed:
		return fmt.Sprintf("%s is under the %s objective", of, Pct(objective))
	}
	switch {
	case e.Counted == 0:
		return "no request was counted against the objective"
	case e.Attainment.High < objective && p != nil:
		return fmt.Sprintf("%s is under the %s objective, but %d of the misses are within the probe's own delay (p99 %s%s): the probe, not the server, may have missed them; rerun where the probe has the CPU",
			of, Pct(objective), e.ProbeExplains, FormatMillis(p.DelayP99Ms), starvedWhy(p))
	case e.RequestsToDecide > 0:
		return fmt.Sprintf("%s holds the %s objective: about %d requests would decide it at this attainment", of, Pct(objective), e.RequestsToDecide)
	}
	return fmt.Sprintf("%s holds the %s objective, on which no number of requests decides it", of, Pct(objective))
}

func starvedWhy(p *Probe) string {
	if p.Starved {
		return "; the probe was starved: " + p.Why
	}
	return ""
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Add counts one measured (non-warmup) request.
func (a *Aggregator) Add(r *result.Request, v slo.Verdict) {
	a.s.Requests++
	if r.Cost > 0 {
		a.s.Cost += r.Cost
		a.s.Currency = r.Currency
	}
	if r.RateLimit != nil {
		a.addRateLimit(r)
	}
	if r.Retried {
		a.s.Retried++
	}
	if a.first.IsZero() || r.Start.Before(a.first) {
		a.first = r.Start
	}
	if r.End.After(a.last) {
		a.last = r.End
	}
	a.lag.add(ms(r.DispatchLag()))
	switch r.Outcome {
	case result.Cancelled:
		a.s.Cancelled++
		return
	case result.Error:
		a.s.Errors++
		a.s.ByReason[r.Reason.String()]++
		a.addFailure(r)
	case result.Success:
		a.s.Success++
	case result.WrongAnswer:
		a.s.WrongAnswers++
	}
	a.addServed(r)
	for _, c := range r.Checks {
		a.check(r, c)
	}
	if v.Counted {
		a.counted++
		if v.Good {
			a.good++
		} else if v.Miss != slo.Unexcused {
			a.misses = append(a.misses, float32(ms(v.Miss)))
		}
		for _, k := range slo.Kinds {
			if v.Checked[k] {
				a.checked[k] = true
				if v.Met[k] {
					a.met[k]++
				}
			}
		}
	}
	if !r.Measured() {
		return
	}
	if r.HasTTFT() {
		a.ttft.add(ms(r.TTFT))
	}
	a.addCache(r)
	if r.HasTTST() {
		a.ttst.add(ms(r.TTST))
	}
	if r.HasTTFO {
		a.ttfo.add(ms(r.TTFO))
	}
	if itl, ok := r.ITL(); ok {
		a.itl.add(ms(itl))
	}
	for _, g := range r.Gaps {
		a.gaps.add(ms(g))
	}
	a.e2e.add(ms(r.E2E))
	if !r.Reused {
		a.dns.add(ms(r.DNS))
		a.connect.add(ms(r.Connect))
		a.tls.add(ms(r.TLS))
	}
	a.net.add(ms(r.DNS + r.Connect + r.TLS))
	if r.FirstByte > 0 {
		a.head.add(ms(r.FirstByte))
	}
	a.isl.add(float64(r.InputTokens))
	a.osl.add(float64(r.OutputTokens))
	a.outTokens += r.OutputTokens
	a.inTokens += r.InputTokens
	a.cached += r.CachedInputTokens
	if tps, ok := r.OutputTokensPerSecond(); ok {
		a.tps.add(tps)
	}
	if r.InputSource == result.SourceUsage && r.IntendedInputTokens > 0 {
		a.inErr.add(float64(r.InputTokens - r.IntendedInputTokens))
	}
}

// Good returns the good requests and those counted against the SLO
// (success and error) so far.
func (a *Aggregator) Good() (good, counted int) { return a.good, a.counted }

// Summary computes the report. It sorts the accumulated values, so call it
// once, after the last Add.
func (a *Aggregator) Summary() Summary {
	s := a.s
	s.TTFT, s.TTST, s.TTFO, s.ITL = Compute(a.ttft.flat()), Compute(a.ttst.flat()), Compute(a.ttfo.flat()), Compute(a.itl.flat())
	s.InterChunk, s.E2E = a.gaps.dist(), Compute(a.e2e.flat())
	s.ISL, s.OSL, s.UserTPS = Compute(a.isl.flat()), Compute(a.osl.flat()), Compute(a.tps.flat())
	s.DispatchLag, s.InputLengthError = Compute(a.lag.flat()), Compute(a.inErr.flat())
	s.DNS, s.Connect, s.TLS, s.Network, s.FirstByte = Compute(a.dns.flat()), Compute(a.connect.flat()), Compute(a.tls.flat()), Compute(a.net.flat()), Compute(a.head.flat())
	s.Start, s.End = a.first, a.last
	if !a.first.IsZero() && a.last.After(a.first) {
		s.DurationSeconds = a.last.Sub(a.first).Seconds()
	}
	if s.DurationSeconds > 0 {
		s.RequestThroughput = float64(s.Success) / s.DurationSeconds
		s.OutputTokenThroughput = float64(a.outTokens) / s.DurationSeconds
		s.InputTokenThroughput = float64(a.inTokens) / s.DurationSeconds
		s.Goodput = float64(a.good) / s.DurationSeconds
	}
	s.Good = a.good
	s.Failures = a.failureSummary()
	s.RateLimits = a.rateLimitSummary(s.DurationSeconds, s.Requests)
	s.Checks = slices.Clone(a.checks)
	s.ServedModels = a.servedSummary()
	s.InputTokens, s.OutputTokens, s.CachedInputTokens = a.inTokens, a.outTokens, a.cached
	if a.counted > 0 {
		s.Attainment = float64(a.good) / float64(a.counted)
		for k := range a.checked {
			if s.PerSLO == nil {
				s.PerSLO = map[string]float64{}
			}
			s.PerSLO[k.String()] = float64(a.met[k]) / float64(a.counted)
		}
	}
	starved := ""
	if a.probe != nil {
		p := *a.probe
		p.judge(&s)
		s.Probe = &p
		if p.Starved {
			starved = p.Why
		}
	}
	s.PrefixCache = a.prefixCache(starved)
	s.Passed = s.Objective == 0
	if s.Objective > 0 {
		delay := 0.0
		if s.Probe != nil {
			delay = s.Probe.DelayP99Ms
		}
		e := a.Judge(delay)
		s.Evidence = &e
		s.Passed, s.Undecided = e.Outcome == Met, e.Outcome == Undecided
	}
	if s.WrongAnswersOver() {
		// Right answers are part of the verdict: a run whose answers are
		// wrong fails a gate whether or not an SLO is set.
		s.Passed, s.Undecided = false, false
	}
	return s
}

// judge decides whether the probe can vouch for s's timing.
func (p *Probe) judge(s *Summary) {
	typical, what := s.TTFT.P50, "TTFT"
	if s.TTFT.Count == 0 {
		typical, what = s.E2E.P50, "request latency"
	}
	switch {
	case p.StealPercent >= StarvedStealPercent:
		p.Starved = true
		p.Why = fmt.Sprintf("the hypervisor took %.0f%% of the CPU", p.StealPercent)
	case p.DelayP99Ms > StarvedFloorMs && typical > 0 && p.DelayP99Ms > StarvedShare*typical:
		p.Starved = true
		p.Why = fmt.Sprintf("its own delay p99 %s is %.0f%% of the median %s %s", FormatMillis(p.DelayP99Ms), 100*p.DelayP99Ms/typical, what, FormatMillis(typical))
	}
}

// Warmup is what became of a run's warmup requests.
type Warmup struct {
	Requests     int            `json:"requests"`
	Success      int            `json:"success"`
	Errors       int            `json:"errors"`
	Cancelled    int            `json:"cancelled"`
	WrongAnswers int            `json:"wrong_answers"`
	ByReason     map[string]int `json:"errors_by_reason,omitempty"`
}

// Add counts res, a warmup request.
func (w *Warmup) Add(res *result.Request) {
	w.Requests++
	switch res.Outcome {
	case result.Success:
		w.Success++
	case result.WrongAnswer:
		w.WrongAnswers++
	case result.Cancelled:
		w.Cancelled++
	case result.Error:
		w.Errors++
		if w.ByReason == nil {
			w.ByReason = map[string]int{}
		}
		w.ByReason[res.Reason.String()]++
	}
}
