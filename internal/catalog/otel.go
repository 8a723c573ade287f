package catalog

// Instrument describes one OpenTelemetry instrument tokenprobe pushes.
type Instrument struct {
	Name, Kind, Unit, Attributes, Help string
}

// The attributes every OTLP request instrument carries.
const otelAttrs = "gen_ai.operation.name, gen_ai.provider.name, gen_ai.request.model, server.address, server.port, tokenprobe.profile, tokenprobe.endpoint, tokenprobe.load_level"

// OTel lists the OTLP instruments, GenAI semantic conventions (v1.41.0)
// first. Histograms are exponential.
var OTel = []Instrument{
	{"gen_ai.client.operation.duration", "histogram", "s", otelAttrs + ", error.type on failures",
		"Request latency of successes (to the last content chunk); time to failure of errors."},
	{"gen_ai.client.operation.time_to_first_chunk", "histogram", "s", otelAttrs, "TTFT of successful streamed requests."},
	{"gen_ai.client.operation.time_per_output_chunk", "histogram", "s", otelAttrs, "Every gap between consecutive content chunks."},
	{"gen_ai.client.token.usage", "histogram", "{token}", otelAttrs + ", gen_ai.token.type (input, output)", "Tokens per successful request."},
	{"tokenprobe.requests", "counter", "{request}", otelAttrs + ", tokenprobe.outcome, error.type", "Requests finished, by outcome and error reason."},
	{"tokenprobe.requests.good", "counter", "{request}", otelAttrs, "Requests that succeeded and met every SLO (goodput is its rate)."},
	{"tokenprobe.slo.requests", "counter", "{request}", otelAttrs + ", tokenprobe.slo, tokenprobe.slo.result", "Requests counted against one SLO threshold, met or missed."},
	{"tokenprobe.answer.checks", "counter", "{request}", otelAttrs + ", tokenprobe.check, tokenprobe.check.result", "Answers judged by each answer check, pass or fail; a failure makes the request a wrong_answer."},
	{"tokenprobe.cost", "counter", "{currency}", "tokenprobe.profile, tokenprobe.endpoint, tokenprobe.currency",
		"What the probe's answered requests cost at the endpoint's price; as tokenprobe_cost_total."},
	{"tokenprobe.rate_limit.limit", "gauge", "{request_or_token}", "tokenprobe.profile, tokenprobe.endpoint, tokenprobe.rate_limit.kind (requests, tokens, input_tokens, output_tokens)",
		"The provider's rate limit in its window, as the endpoint's last answer that said it; as tokenprobe_rate_limit_limit."},
	{"tokenprobe.rate_limit.remaining", "gauge", "{request_or_token}", "tokenprobe.profile, tokenprobe.endpoint, tokenprobe.rate_limit.kind",
		"What remains of the rate limit in its window, as the endpoint's last answer said; as tokenprobe_rate_limit_remaining."},
	{"tokenprobe.rate_limit.reset", "gauge", "s", "tokenprobe.profile, tokenprobe.endpoint, tokenprobe.rate_limit.kind",
		"Seconds until the rate limit's window is full again; as tokenprobe_rate_limit_reset_seconds."},
	{"tokenprobe.requests.in_flight", "gauge", "{request}", "tokenprobe.profile, tokenprobe.endpoint", "Requests sent and not yet finished."},
	{"tokenprobe.dispatch_lag", "histogram", "s", otelAttrs, "How late the probe sent each request against its schedule."},
	{"tokenprobe.ttft.breakdown", "gauge", "s", "tokenprobe.profile, tokenprobe.endpoint, tokenprobe.ttft.phase (queue, prefill, elsewhere), tokenprobe.statistic (mean, p50), tokenprobe.ttft.dominant (true on the largest mean part)",
		"Where the last run's TTFT went, from the server's own metrics; as tokenprobe_run_last_ttft_breakdown_seconds."},
}
