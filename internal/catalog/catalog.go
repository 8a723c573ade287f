// Package catalog is the one list of the metrics tokenprobe exports to
// Prometheus: name, type, unit, labels and meaning. The exporter registers
// its collectors from it, docs/METRICS.md is generated from it, and the
// dashboard and alert generators check their queries against it, so a
// renamed metric breaks a test instead of a dashboard.
package catalog

import (
	"math"
	"slices"
	"strconv"
)

// Type is a Prometheus metric type.
type Type string

const (
	Counter   Type = "counter"
	Gauge     Type = "gauge"
	Histogram Type = "histogram"
)

// Metric describes one metric family.
type Metric struct {
	Name   string
	Type   Type
	Unit   string // base unit: seconds, tokens, requests, ratio, ...
	Labels []string
	Help   string
	// Buckets are the classic bucket boundaries of a histogram (native
	// buckets are kept beside them).
	Buckets []float64
}

// The labels every request metric carries. They come from the
// configuration, so their values are bounded: never a URL, a prompt, a
// request id or an error text.
var (
	RequestLabels = []string{"profile", "endpoint", "model", "load_level"}
	RunLabels     = []string{"profile", "endpoint"}
)

func with(base []string, more ...string) []string { return append(slices.Clone(base), more...) }

// Bucket boundaries: the OpenTelemetry GenAI semantic-convention advice
// merged with the usual SLO thresholds (TTFT 200 ms, 500 ms, 1 s, 2 s; ITL
// 20, 50, 100 ms; request latency 1 to 60 s), so a threshold reads straight
// off a bucket.
var (
	// gen_ai.server.time_to_first_token advice, plus 0.2, 0.3, 2 and
	// longer, and between them boundaries no more than 10% apart from 5 ms
	// to 60 s: classic-bucket quantiles within 10% of the exact figures
	// for the tight distributions a queue makes (docs/METRICS.md).
	TTFTBuckets = fine([]float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.2, 0.25, 0.3, 0.5, 0.75, 1, 2, 2.5, 5, 7.5, 10, 20, 30, 60}, 0.005, 60)
	// ITL gets the same treatment from 1 ms to 1 s.
	ITLBuckets = fine(TokenGapBuckets, 0.001, 1)
	// gen_ai.server.time_per_output_token advice, plus finer steps below 10 ms.
	TokenGapBuckets = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5}
	// gen_ai.client.operation.duration advice, plus round thresholds.
	DurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.5, 0.64, 1, 1.28, 2, 2.56, 5, 5.12, 10, 10.24, 20.48, 30, 40.96, 60, 81.92, 120}
	// Dispatch lag: the probe's own lateness, from 50 us up.
	LagBuckets = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}
	// PhaseBuckets span a local connection (tens of microseconds) to a
	// slow head (seconds).
	// ProbeDelayBuckets: the probe's own scheduling delay, from a timer's
	// jitter on an idle host to a host that stalls it for seconds.
	ProbeDelayBuckets = []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5}
	PhaseBuckets      = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)

// fine adds to the round boundaries of a layout the points of a
// geometric series of ratio 1.1 from lo to hi (three significant digits)
// that are not within 2% of a round one: neighbours in [lo, hi] are about
// 10% apart (at most 13%), and the round thresholds stay boundaries.
func fine(round []float64, lo, hi float64) []float64 {
	out := slices.Clone(round)
	for x := lo; x <= hi*1.0001; x *= 1.1 {
		v := roundTo3(x)
		near := false
		for _, r := range round {
			if math.Abs(v-r) <= 0.02*r {
				near = true
				break
			}
		}
		if !near {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// roundTo3 is x to three significant digits, as the float nearest the
// decimal, so that le labels read 0.00121, not 0.0012100000000000001.
func roundTo3(x float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 3, 64), 64)
	return v
}

// The request metrics.
var (
	TTFT = Metric{Name: "tokenprobe_time_to_first_token_seconds", Type: Histogram, Unit: "seconds", Labels: RequestLabels, Buckets: TTFTBuckets,
		Help: "Time from sending a request to its first content chunk (TTFT), successful streamed requests."}
	TTST = Metric{Name: "tokenprobe_time_to_second_token_seconds", Type: Histogram, Unit: "seconds", Labels: RequestLabels, Buckets: TokenGapBuckets,
		Help: "Time from the first to the second content chunk (TTST), successful streamed requests with two chunks or more."}
	ITL = Metric{Name: "tokenprobe_inter_token_latency_seconds", Type: Histogram, Unit: "seconds", Labels: RequestLabels, Buckets: ITLBuckets,
		Help: "Per-request inter-token latency, (E2E - TTFT) / (output tokens - 1), successful streamed requests with two tokens or more."}
	InterChunk = Metric{Name: "tokenprobe_inter_chunk_latency_seconds", Type: Histogram, Unit: "seconds", Labels: RequestLabels, Buckets: TokenGapBuckets,
		Help: "Every gap between two consecutive content chunks of successful streamed requests; shows stalls a per-request mean hides."}
	Duration = Metric{Name: "tokenprobe_request_duration_seconds", Type: Histogram, Unit: "seconds", Labels: RequestLabels, Buckets: DurationBuckets,
		Help: "Request latency (E2E): from sending a request to its last content chunk, of requests answered in full (successes and wrong answers)."}
	Phases = Metric{Name: "tokenprobe_request_phase_seconds", Type: Histogram, Unit: "seconds", Labels: []string{"profile", "endpoint", "phase"}, Buckets: PhaseBuckets,
		Help: "The network's share of a request, by phase: dns, connect and tls of the requests that opened a connection, first_byte (sending to the response's first byte) of every request answered."}
	DispatchLag = Metric{Name: "tokenprobe_dispatch_lag_seconds", Type: Histogram, Unit: "seconds", Labels: RequestLabels, Buckets: LagBuckets,
		Help: "How late the probe sent each request against its schedule: the probe's own health, never the server's."}
	Requests = Metric{Name: "tokenprobe_requests_total", Type: Counter, Unit: "requests", Labels: with(RequestLabels, "outcome"),
		Help: "Requests finished, by outcome: success, error, cancelled, or wrong_answer (answered in full, but the answer failed a check: failed, never good, its timing in the histograms). Attainment's denominator is every outcome but cancelled."}
	AnswerChecks = Metric{Name: "tokenprobe_answer_checks_total", Type: Counter, Unit: "requests", Labels: []string{"profile", "endpoint", "model", "check", "result"},
		Help: "Answers judged by each answer check of the profile (model by default; finish_reason, min_output_tokens, max_output_tokens, contains, matches, not_matches, json, json_schema, tool_call, expect as the profile sets), by result: pass or fail. A request that fails any check is a wrong_answer."}
	Errors = Metric{Name: "tokenprobe_request_errors_total", Type: Counter, Unit: "requests", Labels: with(RequestLabels, "reason"),
		Help: "Failed requests by reason: timeout, connect, auth, rate_limit, quota, overloaded, content_filter, context_length, model_not_found, bad_request, server_error, stream, empty, request (the request could not be built; a wrong answer is not an error but the outcome wrong_answer). docs/RUNBOOK.md says who acts on each."}
	Anomalies = Metric{Name: "tokenprobe_server_anomalies_total", Type: Counter, Unit: "requests", Labels: with(RequestLabels, "kind"),
		Help: "Requests during which the server misbehaved without changing the request's outcome, by kind: drain (the body did not end within 100ms of the stream's end, so the connection was closed), retried (the server had closed the kept-alive connection the request was first sent on, so it was sent again on a new one; its TTFT includes the first attempt), usage (the server's token counts were absurd, a fraction, an overflow or over 4x max_tokens plus 64, so the request's tokens were counted from its chunks), status (the answer came whole with a 2xx status other than 200: Portkey's gateway answers 246 when its guardrails failed without denying)."}
	Good = Metric{Name: "tokenprobe_good_requests_total", Type: Counter, Unit: "requests", Labels: RequestLabels,
		Help: "Requests that succeeded and met every SLO of their profile (goodput is its rate). Attainment is this over success, error and wrong_answer outcomes."}
	SLORequests = Metric{Name: "tokenprobe_slo_requests_total", Type: Counter, Unit: "requests", Labels: with(RequestLabels, "slo", "result"),
		Help: "Requests counted against one SLO threshold, result met or missed; errors count as missed, cancellations not at all."}
	InputTokens = Metric{Name: "tokenprobe_input_tokens_total", Type: Counter, Unit: "tokens", Labels: RequestLabels,
		Help: "Input tokens of successful requests (the server's usage count, or the intended length)."}
	CachedInputTokens = Metric{Name: "tokenprobe_cached_input_tokens_total", Type: Counter, Unit: "tokens", Labels: RequestLabels,
		Help: "The part of tokenprobe_input_tokens_total the server's usage says it read from its prompt cache (prompt_tokens_details.cached_tokens, cache_read_input_tokens), billed apart."}
	Cost = Metric{Name: "tokenprobe_cost_total", Type: Counter, Unit: "currency", Labels: with(RunLabels, "currency"),
		Help: "What the probe's answered requests cost at the endpoint's price (price: per million input, cached input and output tokens), in currency: the probe's own spend. Absent for an endpoint without a price."}
	OutputTokens = Metric{Name: "tokenprobe_output_tokens_total", Type: Counter, Unit: "tokens", Labels: RequestLabels,
		Help: "Output tokens of successful requests (the server's usage count, or content chunks)."}
)

// The provider's rate limits, from the rate-limit headers of the
// endpoint's last answer that sent them (probe/ratelimit); created only
// for an endpoint that sends them. A limit belongs to the endpoint's key,
// so every profile on it reads the same one; profile keeps the rules'
// selector and grouping.
var (
	RateLimitLimit = Metric{Name: "tokenprobe_rate_limit_limit", Type: Gauge, Unit: "requests or tokens", Labels: with(RunLabels, "kind"),
		Help: "The provider's rate limit in its window (usually a minute), by kind: requests, tokens, input_tokens, output_tokens (x-ratelimit-limit-*, anthropic-ratelimit-*-limit), as the endpoint's last answer that said it."}
	RateLimitRemaining = Metric{Name: "tokenprobe_rate_limit_remaining", Type: Gauge, Unit: "requests or tokens", Labels: with(RunLabels, "kind"),
		Help: "What remains of the rate limit in its window, by kind, as the endpoint's last answer said (x-ratelimit-remaining-*, anthropic-ratelimit-*-remaining): everyone's use of the key counts, the probe's too."}
	RateLimitReset = Metric{Name: "tokenprobe_rate_limit_reset_seconds", Type: Gauge, Unit: "seconds", Labels: with(RunLabels, "kind"),
		Help: "Seconds until the rate limit's window is full again, by kind, at the endpoint's last answer that said it (x-ratelimit-reset-*, anthropic-ratelimit-*-reset)."}
)

// The live load metrics, read from runs in progress at scrape time.
var (
	InFlight = Metric{Name: "tokenprobe_in_flight_requests", Type: Gauge, Unit: "requests", Labels: RunLabels,
		Help: "Requests sent and not yet finished."}
	TargetConcurrency = Metric{Name: "tokenprobe_target_concurrency", Type: Gauge, Unit: "requests", Labels: RunLabels,
		Help: "Concurrency the load generator is asked for right now (closed loop; the cap of an open loop); 0 when idle."}
	TargetRate = Metric{Name: "tokenprobe_target_request_rate", Type: Gauge, Unit: "requests per second", Labels: RunLabels,
		Help: "Request rate the load generator is asked for right now (open loop); 0 when idle."}
)

// The run metrics, updated when a run ends.
var (
	Runs = Metric{Name: "tokenprobe_runs_total", Type: Counter, Unit: "runs", Labels: with(RunLabels, "result"),
		Help: "Runs finished, by result: passed (met the SLO objective, its attainment's 95% interval wholly at or above it, or had none), failed (missed it, the interval wholly under it, or answered wrongly), not_enough_evidence (the interval holds the objective, or the probe's own delay could account for the misses), error (could not run), cancelled (stopped by a reload or shutdown)."}
	RunsSkipped = Metric{Name: "tokenprobe_runs_skipped_total", Type: Counter, Unit: "runs", Labels: with(RunLabels, "reason"),
		Help: "Scheduled ticks that started no run, by reason: overlap (the previous run was still going), max_concurrent, exclusive (the endpoint was held), budget (an hourly budget, or the daily cost budget, was spent), backoff (the job backs off after aborted runs)."}
	RunsAbortedInARow = Metric{Name: "tokenprobe_runs_aborted_in_a_row", Type: Gauge, Unit: "runs", Labels: RunLabels,
		Help: "Runs of the job aborted in a row by the failure policy (its endpoint was failing); above 0 the job's schedule backs off. A run that is not aborted sets it to 0."}
	EndpointFailing = Metric{Name: "tokenprobe_endpoint_failing", Type: Gauge, Unit: "boolean", Labels: with(RunLabels, "reason"),
		Help: "1, labelled with the reason most of its failures had (auth, quota, connect, ...), while the job's endpoint is failing: its last run was aborted by the failure policy or had no request succeed, and no answer has come since. It lasts through the schedule's backoff, when no request is sent and the rate windows empty, so that a page on the cause (a revoked key, a spent quota, an endpoint refusing connections) lasts as long as the cause; the first answer removes it."}
	RunNext = Metric{Name: "tokenprobe_run_next_timestamp_seconds", Type: Gauge, Unit: "seconds", Labels: RunLabels,
		Help: "Unix time of the next scheduled run; absent for a profile that runs only when asked."}
	RunLastTimestamp = Metric{Name: "tokenprobe_run_last_timestamp_seconds", Type: Gauge, Unit: "seconds", Labels: RunLabels,
		Help: "Unix time the last run ended."}
	RunLastSuccess = Metric{Name: "tokenprobe_run_last_success_timestamp_seconds", Type: Gauge, Unit: "seconds", Labels: RunLabels,
		Help: "Unix time the last run that did not fail ended (passed, or not enough evidence either way); until one has, the time the job was configured, so that an alert on its age fires for a job whose runs keep failing."}
	RunLastPassed = Metric{Name: "tokenprobe_run_last_passed", Type: Gauge, Unit: "boolean", Labels: RunLabels,
		Help: "1 when the last run was shown to meet its SLO objective (or had none), 0 otherwise (failed, error, or not enough evidence: tokenprobe_runs_total's result says which)."}
	RunLastDuration = Metric{Name: "tokenprobe_run_last_duration_seconds", Type: Gauge, Unit: "seconds", Labels: RunLabels,
		Help: "Benchmark duration of the last run: last end minus first start of its measured requests."}
	RunLastAttainment = Metric{Name: "tokenprobe_run_last_slo_attainment_ratio", Type: Gauge, Unit: "ratio", Labels: RunLabels,
		Help: "SLO attainment of the last run: good / (success + error + wrong answers)."}
	RunLastGoodput = Metric{Name: "tokenprobe_run_last_goodput_requests_per_second", Type: Gauge, Unit: "requests per second", Labels: RunLabels,
		Help: "Goodput of the last run: good requests per second of benchmark duration."}
	RunLastThroughput = Metric{Name: "tokenprobe_run_last_throughput_requests_per_second", Type: Gauge, Unit: "requests per second", Labels: RunLabels,
		Help: "Request throughput of the last run: successful requests per second."}
	RunLastCapacity = Metric{Name: "tokenprobe_run_last_capacity_at_slo", Type: Gauge, Unit: "load level", Labels: RunLabels,
		Help: "Capacity at SLO from the last multi-stage run (a sweep): the highest load level whose attainment met the objective; 0 when none did. Absent for single-level profiles."}
	RunLastCliff = Metric{Name: "tokenprobe_run_last_ttft_cliff_level", Type: Gauge, Unit: "load level", Labels: RunLabels,
		Help: "The load level where the last multi-stage run's TTFT p50 reached 3x its first level's while ITL p50 stayed under 1.5x (a queue); 0 when there was no cliff."}
	RunLastTTFTBreakdown = Metric{Name: "tokenprobe_run_last_ttft_breakdown_seconds", Type: Gauge, Unit: "seconds", Labels: with(RunLabels, "phase", "stat"),
		Help: "Where the last run's TTFT went, from the server's own metrics (server_metrics): phase queue (waiting in the server's queue), prefill, or elsewhere (the client's TTFT less both), and where the server's own TTFT is read, elsewhere's two parts: server_other (the rest of the server's TTFT: front end, tokenising) and outside_server (the client's TTFT less the server's: network, gateways); stat mean or p50. Absent where the server exposes no queue series."}
	RunLastTTFTDominant = Metric{Name: "tokenprobe_run_last_ttft_dominant_phase", Type: Gauge, Unit: "boolean", Labels: with(RunLabels, "phase"),
		Help: "1 for the phase holding the largest part of the last run's mean TTFT (queue, prefill, elsewhere), 0 for the others; absent without a breakdown."}
	RunLastTTFTDominantByLevel = Metric{Name: "tokenprobe_run_last_ttft_dominant_phase_by_level", Type: Gauge, Unit: "boolean", Labels: with(RunLabels, "load_level", "phase"),
		Help: "1 for the phase holding the largest part of the mean TTFT at each load level of the last run (queue, prefill, elsewhere), 0 for the others: a level's cliff page quotes its own level's cause, not the run's; absent for a level without a breakdown."}
	RunLastServedModel = Metric{Name: "tokenprobe_run_last_served_model_info", Type: Gauge, Unit: "info", Labels: with(RunLabels, "served_model"),
		Help: "1 for each model the endpoint's answers named in the last run (the four most frequent, the first 128 bytes of each), read from the answers: the wrong-answer page names them, and a fallback model a gateway substitutes for some answers shows beside the one asked for. Absent where no answer named one."}
	ServerTTFTClock = Metric{Name: "tokenprobe_server_ttft_clock_info", Type: Gauge, Unit: "info", Labels: with(RunLabels, "clock"),
		Help: "1, labelled with where the endpoint's server starts its own TTFT clock, as the profile's last run that could tell found it from the server's means (server_metrics): clock arrival (its queue included: vLLM, SGLang) or scheduling (left out: llm-d-inference-sim). The rule of the time outside the server reads it: users' TTFT less the server's, and less its queue too on a scheduling clock. Absent until a run has found it."}
	RunLastServerRequests = Metric{Name: "tokenprobe_run_last_server_requests", Type: Gauge, Unit: "requests", Labels: with(RunLabels, "load_level", "state"),
		Help: "The server's own running (state running) and waiting (state waiting) requests, averaged over each load level of the last run, from its metrics (server_metrics): waiting above 0 at the level where TTFT leaves its floor is the knee."}
	RunLastServerKVCache = Metric{Name: "tokenprobe_run_last_server_kv_cache_usage_ratio", Type: Gauge, Unit: "ratio", Labels: with(RunLabels, "load_level"),
		Help: "The server's KV cache usage averaged over each load level of the last run, from its metrics (server_metrics)."}
	RunLastAttainmentInterval = Metric{Name: "tokenprobe_run_last_slo_attainment_interval_ratio", Type: Gauge, Unit: "ratio", Labels: with(RunLabels, "bound"),
		Help: "The 95% interval of the last run's SLO attainment (Wilson's, from its counted requests), bound low or high: the run met its objective when low is at or above it, missed it when high is under it, and had not enough evidence otherwise. Absent for a profile without an objective."}
	RunLastProbeDelay = Metric{Name: "tokenprobe_run_last_probe_delay_seconds", Type: Gauge, Unit: "seconds", Labels: RunLabels,
		Help: "The probe's own delay p99 over the last run: how late its timer wake-ups came, the delay any timestamp it took could have had (tokenprobe_probe_scheduling_delay_seconds, over the run)."}
	RunLastProbeStarved = Metric{Name: "tokenprobe_run_last_probe_starved", Type: Gauge, Unit: "boolean", Labels: RunLabels,
		Help: "1 when the probe could not vouch for the last run's timing: its own delay p99 was over a tenth of the run's median TTFT (and over 2 ms), or the hypervisor took a tenth of the CPU; the run page says which. A miss within the probe's delay is not counted against the server."}
	RunLastPrefixCacheSpeedup = Metric{Name: "tokenprobe_run_last_prefix_cache_speedup_ratio", Type: Gauge, Unit: "ratio", Labels: RunLabels,
		Help: "How many times faster than uncached a prefix-cache probe's warm requests were in its last run: the geometric mean over its triples of the cold and fresh requests' TTFT over the warm one's (prefix_cache profiles only)."}
	RunLastPrefixCacheInterval = Metric{Name: "tokenprobe_run_last_prefix_cache_speedup_interval_ratio", Type: Gauge, Unit: "ratio", Labels: with(RunLabels, "bound"),
		Help: "The 95% interval of tokenprobe_run_last_prefix_cache_speedup_ratio (Student's t over the triples' logarithms), bound low or high: the cache works when low is at or above the profile's min_speedup, is broken when high is under it."}
	RunLastPrefixCacheVerdict = Metric{Name: "tokenprobe_run_last_prefix_cache_verdict", Type: Gauge, Unit: "boolean", Labels: with(RunLabels, "verdict"),
		Help: "1 for the last run's prefix-cache verdict (verdict working, broken or not_enough_evidence), 0 for the other two: broken only when the whole interval is under min_speedup and the probe was not starved."}
	RunLastIdentityAgreement = Metric{Name: "tokenprobe_run_last_model_identity_agreement_ratio", Type: Gauge, Unit: "ratio", Labels: RunLabels,
		Help: "The share of a model-identity probe's prompts its last run answered, under greedy decoding, as the reference learned from the endpoint's first runs answered them (model_identity profiles only; absent while the reference is learned)."}
	RunLastIdentityInterval = Metric{Name: "tokenprobe_run_last_model_identity_agreement_interval_ratio", Type: Gauge, Unit: "ratio", Labels: with(RunLabels, "bound"),
		Help: "The 95% interval of tokenprobe_run_last_model_identity_agreement_ratio (Wilson's, over the prompts), bound low or high: the same model when low is at or above the profile's min_agreement, changed when high is under it."}
	RunLastIdentityVerdict = Metric{Name: "tokenprobe_run_last_model_identity_verdict", Type: Gauge, Unit: "boolean", Labels: with(RunLabels, "verdict"),
		Help: "1 for the last run's model-identity verdict (verdict same, changed, not_enough_evidence or learning), 0 for the other three."}
	RunLastIdentityLogprobDistance = Metric{Name: "tokenprobe_run_last_model_identity_logprob_distance_nats", Type: Gauge, Unit: "nats", Labels: RunLabels,
		Help: "The mean distance, in nats a token, between the log-probabilities of the last run's answers alike in their text and the reference's (model_identity profiles with logprobs, where the server sends them and the reference has them; absent otherwise). An answer over the larger of max_logprob_distance and 4 times the learning runs' own spread is not alike."}
	RunLastIdentityMoved = Metric{Name: "tokenprobe_run_last_model_identity_moved_prompt_info", Type: Gauge, Unit: "info", Labels: with(RunLabels, "prompt"),
		Help: "1, labelled with the built-in prompt whose answer moved most from the reference in the last run (the least of its start shared with any reference answer); absent when every prompt agreed. The prompts are the probe's own, at most 32."}
	RunObjective = Metric{Name: "tokenprobe_slo_objective_ratio", Type: Gauge, Unit: "ratio", Labels: RunLabels,
		Help: "The profile's SLO objective (fraction of requests that must be good); 0 when none."}
	ProfileInfo = Metric{Name: "tokenprobe_profile_info", Type: Gauge, Unit: "info", Labels: []string{"profile", "endpoint", "model", "url", "api", "server_instance"},
		Help: "Always 1: descriptive labels of a profile and endpoint, joined to other series with group_left. server_instance is the host:port of the inference server's own metrics (server_metrics.url's, else base_url's), the instance label Prometheus gives them: the server recording rules join the server's series to the endpoint on it."}
)

// Self metrics.
var (
	ConfigReloadOK = Metric{Name: "tokenprobe_config_last_reload_successful", Type: Gauge, Unit: "boolean",
		Help: "1 when the last configuration (re)load succeeded; 0 while a bad file is being refused and the previous configuration runs on."}
	ConfigReloadTime = Metric{Name: "tokenprobe_config_last_reload_success_timestamp_seconds", Type: Gauge, Unit: "seconds",
		Help: "Unix time of the last successful configuration (re)load."}
	ArtifactFailures = Metric{Name: "tokenprobe_artifact_write_failures_total", Type: Counter, Unit: "runs", Labels: []string{"profile", "endpoint"},
		Help: "Runs whose artifacts (serve --artifacts-dir) could not be written, a full disk or a lost folder: the run's page says why, and what was half written is removed."}
	WebRefused = Metric{Name: "tokenprobe_web_requests_refused_total", Type: Counter, Unit: "requests", Labels: []string{"reason"},
		Help: "Requests the web server refused with 403 and no log line: reason cross_site (a state-changing request a browser sent from another site), host (a Host name --web.allowed-hosts does not list, or without it a browser's state-changing request under a name other than an address, localhost or the host's own: DNS rebinding) or lifecycle_disabled (POST /-/reload or /api/v1/runs without --web.enable-lifecycle)."}
	Dropped = Metric{Name: "tokenprobe_observations_dropped_total", Type: Counter, Unit: "observations", Labels: []string{"sink"},
		Help: "Request results a sink could not take because its queue was full; the load generator never waits for a sink."}
	ProbeDelay = Metric{Name: "tokenprobe_probe_scheduling_delay_seconds", Type: Histogram, Unit: "seconds", Buckets: ProbeDelayBuckets,
		Help: "How late the probe's own timer wake-ups came (one every 10 ms while any run goes): the delay any timestamp it took could have had, from a busy host, a CPU limit or a hypervisor. The latency rules read TTFT less its p99 (tokenprobe:probe_delay_p99:rate5m); over a tenth of a profile's median TTFT the probe is starved (TokenprobeProbeStarved)."}
	OTLPDropped = Metric{Name: "tokenprobe_otlp_dropped_total", Type: Counter, Unit: "items", Labels: []string{"signal"},
		Help: "Spans (signal traces) and metric data points (signal metrics) an OTLP export failed to deliver: the collector refused them, was down, or did not answer within the export's timeout and retries; and, at shutdown, what its deadline left unsent."}
)

// All lists the catalog in documentation order. Build info
// (tokenprobe_build_info) comes from client_golang's version collector.
var All = []Metric{
	TTFT, TTST, ITL, InterChunk, Duration, Phases, DispatchLag,
	Requests, AnswerChecks, Errors, Anomalies, Good, SLORequests, InputTokens, CachedInputTokens, OutputTokens, Cost,
	RateLimitLimit, RateLimitRemaining, RateLimitReset,
	InFlight, TargetConcurrency, TargetRate,
	Runs, RunsSkipped, RunsAbortedInARow, EndpointFailing, RunNext, RunLastTimestamp, RunLastSuccess, RunLastPassed, RunLastDuration,
	RunLastAttainment, RunLastGoodput, RunLastThroughput, RunLastCapacity, RunLastCliff, RunLastTTFTBreakdown, RunLastTTFTDominant, RunLastTTFTDominantByLevel, RunLastServedModel, ServerTTFTClock,
	RunLastServerRequests, RunLastServerKVCache, RunLastAttainmentInterval, RunLastProbeDelay, RunLastProbeStarved,
	RunLastPrefixCacheSpeedup, RunLastPrefixCacheInterval, RunLastPrefixCacheVerdict,
	RunLastIdentityAgreement, RunLastIdentityInterval, RunLastIdentityVerdict, RunLastIdentityMoved, RunLastIdentityLogprobDistance,
	RunObjective, ProfileInfo,
	ConfigReloadOK, ConfigReloadTime, ArtifactFailures, WebRefused, Dropped, ProbeDelay, OTLPDropped,
}

// Extra names metrics registered outside this list (by client_golang's own
// collectors, or by the daemon) so that generators can check them too.
var Extra = []string{"tokenprobe_build_info", "tokenprobe_gpu_source_up"}

// Names returns every exported metric name, with the _bucket, _sum and
// _count series of histograms.
func Names() map[string]Metric {
	out := map[string]Metric{}
	for _, m := range All {
		out[m.Name] = m
		if m.Type == Histogram {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[m.Name+s] = m
			}
		}
	}
	for _, n := range Extra {
		out[n] = Metric{Name: n, Type: Gauge}
	}
	return out
}
