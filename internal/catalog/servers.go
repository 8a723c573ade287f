package catalog

// Server is an inference server's own series that the server recording
// rules and dashboards read beside tokenprobe's: the names
// servermetrics.Table reads during runs.
type Server struct {
	// Server is the value of the rules' server label and of the
	// dashboards' $server variable.
	Server      string
	Queue, TTFT string // histograms, in seconds
	// E2E is the end-to-end latency histogram: its count is the requests
	// the server finished, the population of every mean (a server may
	// observe the queue time only of requests that waited).
	E2E              string
	Running, Waiting string // gauges
	// KVCache is the KV cache usage gauge, under each name it has had.
	KVCache []string
}

// Servers lists the servers the rules and dashboards know.
var Servers = []Server{
	{Server: "vllm", Queue: "vllm:request_queue_time_seconds", TTFT: "vllm:time_to_first_token_seconds", E2E: "vllm:e2e_request_latency_seconds",
		Running: "vllm:num_requests_running", Waiting: "vllm:num_requests_waiting",
		KVCache: []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}},
	{Server: "sglang", Queue: "sglang:queue_time_seconds", TTFT: "sglang:time_to_first_token_seconds", E2E: "sglang:e2e_request_latency_seconds",
		Running: "sglang:num_running_reqs", Waiting: "sglang:num_queue_reqs", KVCache: []string{"sglang:token_usage"}},
}

// ServerNames lists the Server values of Servers.
func ServerNames() []string {
	out := make([]string, len(Servers))
	for i, s := range Servers {
		out[i] = s.Server
	}
	return out
}
