// Package servermetrics reads an inference server's own Prometheus
// metrics while tokenprobe probes it, and sets what the server saw beside
// what the client measured: how much of the client's TTFT the server spent
// queueing the request, how much in prefill, and how much was elsewhere.
package servermetrics

import (
	"slices"
	"strings"
)

// Kind is a family of servers that name their series alike.
type Kind string

const (
	VLLM     Kind = "vllm"
	SGLang   Kind = "sglang"
	TGI      Kind = "tgi"
	LlamaCpp Kind = "llamacpp"
	NIM      Kind = "nim"
	// TRTLLM is TensorRT-LLM's trtllm-serve (its page is /prometheus/metrics).
	TRTLLM Kind = "trtllm"
	// Dynamo is NVIDIA Dynamo's HTTP frontend.
	Dynamo Kind = "dynamo"
	// Auto picks the kind from the names the server exposes.
	Auto Kind = "auto"
)

// Kinds lists the kinds a configuration may name, Auto last.
func Kinds() []Kind { return []Kind{VLLM, SGLang, TGI, LlamaCpp, NIM, TRTLLM, Dynamo, Auto} }

// Role is one thing tokenprobe reads from a server, whatever the server
// calls it.
type Role string

// Histograms, in seconds: each request's time in that phase.
const (
	Queue   Role = "queue_time"
	Prefill Role = "prefill_time"
	TTFT    Role = "ttft"
	ITL     Role = "itl"
	E2E     Role = "e2e_latency"
)

// Gauges, sampled during the run.
const (
	Running       Role = "running_requests"
	Waiting       Role = "waiting_requests"
	KVCache       Role = "kv_cache_usage"
	PrefixHitRate Role = "prefix_cache_hit_rate"
)

// Counters, read as their rise over the run.
const (
	PrefixHits       Role = "prefix_cache_hits"
	PrefixQueries    Role = "prefix_cache_queries"
	Preemptions      Role = "preemptions"
	PromptTokens     Role = "prompt_tokens"
	GenerationTokens Role = "generation_tokens"
)

// Roles lists every role in the order reports show them.
func Roles() []Role {
	return []Role{Queue, Prefill, TTFT, ITL, E2E, Running, Waiting, KVCache, PrefixHitRate, PrefixHits, PrefixQueries,
		Preemptions, PromptTokens, GenerationTokens}
}

// IsHistogram reports whether the role is read from a histogram.
func (r Role) IsHistogram() bool { return slices.Contains([]Role{Queue, Prefill, TTFT, ITL, E2E}, r) }

// IsGauge reports whether the role is a level sampled over the run.
func (r Role) IsGauge() bool {
	return slices.Contains([]Role{Running, Waiting, KVCache, PrefixHitRate}, r)
}

// Series is one name a server exposes a role under.
type Series struct {
	Name string
	// Match is label values a sample must carry to count.
	Match map[string]string
	// Note says which versions use the name, or how it differs.
	Note string
}

// Table maps every kind's roles to the series that carry them, the
// current name first: the first a server exposes is read. A role with no
// entry is one the kind does not expose. docs/MEASUREMENT.md prints this
// table (`make docs`).
var Table = map[Kind]map[Role][]Series{
	VLLM: {
		Queue:   {{Name: "vllm:request_queue_time_seconds"}},
		Prefill: {{Name: "vllm:request_prefill_time_seconds"}},
		TTFT:    {{Name: "vllm:time_to_first_token_seconds"}},
		ITL: {
			{Name: "vllm:inter_token_latency_seconds", Note: "V1 engine"},
			{Name: "vllm:time_per_output_token_seconds", Note: "before 0.11"},
		},
		E2E:     {{Name: "vllm:e2e_request_latency_seconds"}},
		Running: {{Name: "vllm:num_requests_running"}},
		Waiting: {{Name: "vllm:num_requests_waiting"}},
		KVCache: {
			{Name: "vllm:kv_cache_usage_perc", Note: "V1 engine"},
			{Name: "vllm:gpu_cache_usage_perc", Note: "before 0.10"},
		},
		PrefixHitRate:    {{Name: "vllm:gpu_prefix_cache_hit_rate", Note: "before 0.10; later from the hits and queries counters"}},
		PrefixHits:       {{Name: "vllm:prefix_cache_hits_total"}},
		PrefixQueries:    {{Name: "vllm:prefix_cache_queries_total"}},
		Preemptions:      {{Name: "vllm:num_preemptions_total"}},
		PromptTokens:     {{Name: "vllm:prompt_tokens_total"}},
		GenerationTokens: {{Name: "vllm:generation_tokens_total"}},
	},
	SGLang: {
		Queue: {{Name: "sglang:queue_time_seconds"}},
		TTFT:  {{Name: "sglang:time_to_first_token_seconds", Note: "from arrival: includes the queue"}},
		ITL: {
			{Name: "sglang:inter_token_latency_seconds"},
			{Name: "sglang:time_per_output_token_seconds", Note: "older releases"},
		},
		E2E:              {{Name: "sglang:e2e_request_latency_seconds"}},
		Running:          {{Name: "sglang:num_running_reqs"}},
		Waiting:          {{Name: "sglang:num_queue_reqs"}},
		KVCache:          {{Name: "sglang:token_usage", Note: "tokens in use over the pool"}},
		PrefixHitRate:    {{Name: "sglang:cache_hit_rate"}},
		PromptTokens:     {{Name: "sglang:prompt_tokens_total"}},
		GenerationTokens: {{Name: "sglang:generation_tokens_total"}},
	},
	TGI: {
		Queue:            {{Name: "tgi_request_queue_duration"}},
		Prefill:          {{Name: "tgi_batch_inference_duration", Match: map[string]string{"method": "prefill"}, Note: "per batch, not per request"}},
		ITL:              {{Name: "tgi_request_mean_time_per_token_duration", Note: "each request's mean"}},
		E2E:              {{Name: "tgi_request_duration"}},
		Running:          {{Name: "tgi_batch_current_size"}},
		Waiting:          {{Name: "tgi_queue_size"}},
		PromptTokens:     {{Name: "tgi_request_input_length", Note: "the sum of its histogram"}},
		GenerationTokens: {{Name: "tgi_request_generated_tokens", Note: "the sum of its histogram"}},
	},
	LlamaCpp: {
		Running:          {{Name: "llamacpp:requests_processing"}},
		Waiting:          {{Name: "llamacpp:requests_deferred"}},
		KVCache:          {{Name: "llamacpp:kv_cache_usage_ratio", Note: "removed in later builds"}},
		PromptTokens:     {{Name: "llamacpp:prompt_tokens_total", Note: "de3ff81: without the tokens read from its prompt cache (llamacpp:prompt_tokens_cached_total)"}},
		GenerationTokens: {{Name: "llamacpp:tokens_predicted_total"}},
	},
	// trtllm-serve's names are its own (tensorrt_llm/metrics/collector.py),
	// labelled model_name and engine_type; no running or waiting gauges.
	TRTLLM: {
		Queue: {{Name: "trtllm_request_queue_time_seconds"}},
		TTFT:  {{Name: "trtllm_time_to_first_token_seconds"}},
		ITL:   {{Name: "trtllm_time_per_output_token_seconds", Note: "each request's mean (TPOT)"}},
		E2E:   {{Name: "trtllm_e2e_request_latency_seconds"}},
	},
	// Dynamo's frontend measures what it forwards to its workers
	// (lib/runtime/src/metrics/prometheus_names.rs, prefix dynamo_frontend_);
	// the engine's own queue is on the workers' pages, not this one.
	Dynamo: {
		TTFT:             {{Name: "dynamo_frontend_time_to_first_token_seconds"}},
		ITL:              {{Name: "dynamo_frontend_inter_token_latency_seconds"}},
		E2E:              {{Name: "dynamo_frontend_request_duration_seconds"}},
		Running:          {{Name: "dynamo_frontend_inflight_requests"}},
		Waiting:          {{Name: "dynamo_frontend_queued_requests", Note: "waiting at the frontend for a first token"}},
		KVCache:          {{Name: "dynamo_component_kvstats_gpu_cache_usage_percent", Note: "the workers', where the page is a merged one"}},
		PromptTokens:     {{Name: "dynamo_frontend_input_sequence_tokens", Note: "the sum of its histogram"}},
		GenerationTokens: {{Name: "dynamo_frontend_output_sequence_tokens", Note: "the sum of its histogram"}},
	},
	// NIM for LLMs names the vLLM series without their prefix; NIMs
	// built on a recent vLLM also expose vLLM's own, read next.
	NIM: {
		Queue: {{Name: "vllm:request_queue_time_seconds"}},
		Prefill: {
			{Name: "vllm:request_prefill_time_seconds"},
		},
		TTFT: {{Name: "time_to_first_token_seconds"}, {Name: "vllm:time_to_first_token_seconds"}},
		ITL:  {{Name: "time_per_output_token_seconds"}, {Name: "vllm:inter_token_latency_seconds"}},
		E2E:  {{Name: "e2e_request_latency_seconds"}, {Name: "vllm:e2e_request_latency_seconds"}},
		Running: {
			{Name: "num_requests_running"}, {Name: "vllm:num_requests_running"},
		},
		Waiting: {
			{Name: "num_requests_waiting"}, {Name: "vllm:num_requests_waiting"},
		},
		KVCache:          {{Name: "gpu_cache_usage_perc"}, {Name: "vllm:kv_cache_usage_perc"}},
		PromptTokens:     {{Name: "prompt_tokens_total"}, {Name: "vllm:prompt_tokens_total"}},
		GenerationTokens: {{Name: "generation_tokens_total"}, {Name: "vllm:generation_tokens_total"}},
	},
}

// Clock says where a kind's own TTFT starts and which of its series
// counts the requests it finished: the population every mean of the split
// is over.
type Clock struct {
	// TTFTFrom is where the kind's source starts its TTFT clock: "arrival"
	// (the server's TTFT includes its queue), or "" where the kind has no
	// TTFT series. It documents the kind; the split does not assume it,
	// but reads each window's clock from the server's own means
	// (calibrate): servers that name their series as vLLM does need not
	// start the clock where vLLM does.
	TTFTFrom string
	// Source is where in the server's code the clock is started.
	Source string
	// Population is the histogram whose count is the requests the server
	// finished in a window.
	Population Role
	// PrefillPerBatch says the prefill histogram observes batches, not
	// requests: its mean is over its own count, each request of a batch
	// having waited the batch's whole prefill.
	PrefillPerBatch bool
}

// Clocks are each kind's TTFT clock and population; docs/MEASUREMENT.md
// prints them with the table.
var Clocks = map[Kind]Clock{
	VLLM: {TTFTFrom: "arrival", Population: E2E,
		Source: "vllm/v1/metrics/stats.py: the first token latency is the time since the request's arrival_time (V0 did the same)"},
	SGLang: {TTFTFrom: "arrival", Population: E2E,
		Source: "python/sglang/srt/managers/tokenizer_manager.py: first_token_time - created_time, created when the tokenizer manager receives the request"},
	TGI:      {Population: E2E, PrefillPerBatch: true, Source: "no TTFT histogram"},
	LlamaCpp: {Source: "no per-request histograms"},
	NIM:      {TTFTFrom: "arrival", Population: E2E, Source: "NIM for LLMs runs vLLM's engine and its metrics: vLLM's clock"},
	TRTLLM: {TTFTFrom: "arrival", Population: E2E,
		Source: "tensorrt_llm/metrics/collector.py: from the request's arrival time as the executor stamps it (not confirmed on a server here: each window's clock is read from the means)"},
	Dynamo: {TTFTFrom: "arrival", Population: E2E,
		Source: "lib/llm/src/http/service/metrics.rs: from the frontend's receipt of the request, so the workers' queues are inside it; it has no queue histogram to split by"},
}

// StartTime is the series a restart changes, where the server exports it
// (every server on Python's prometheus_client, and Go's client_golang).
const StartTime = "process_start_time_seconds"

// Detect names the kind whose series a server exposes, from the names of
// its metric families, or "" when none is recognised.
func Detect(names []string) Kind {
	count := map[Kind]int{}
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, "vllm:"):
			count[VLLM]++
		case strings.HasPrefix(n, "sglang:"):
			count[SGLang]++
		case strings.HasPrefix(n, "tgi_"):
			count[TGI]++
		case strings.HasPrefix(n, "llamacpp:"):
			count[LlamaCpp]++
		case strings.HasPrefix(n, "trtllm_"):
			count[TRTLLM]++
		case strings.HasPrefix(n, "dynamo_frontend_"):
			count[Dynamo]++
		case n == "num_requests_running" || n == "time_to_first_token_seconds" || n == "gpu_cache_usage_perc":
			count[NIM] += 100 // NIM's own names outrank the vLLM ones it may also expose
		}
	}
	best, most := Kind(""), 0
	for _, k := range []Kind{NIM, VLLM, SGLang, TGI, LlamaCpp, TRTLLM, Dynamo} {
		if count[k] > most {
			best, most = k, count[k]
		}
	}
	return best
}
