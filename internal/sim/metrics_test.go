package sim

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
)

func scrape(t *testing.T, s *Server) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// The vLLM series tell the queue apart from the rest: with one slot and
// three requests at once, two wait, the queue histogram holds exactly the
// waits the model made, and the server's TTFT counts from arrival, queue
// included, as vLLM's does, so it falls short of what the client measured
// by the time outside the server alone.
func TestVLLMSeriesSeeTheQueue(t *testing.T) {
	s := start(t, Config{Slots: 1, PrefillBase: 20 * time.Millisecond, PrefillPerToken: time.Microsecond, DecodeBase: 10 * time.Millisecond, Model: "m"})
	var wg sync.WaitGroup
	rs := make([]result.Request, 3)
	for i := range rs {
		wg.Go(func() { rs[i] = do(s, openai.Chat, prompt(10, 10)) })
	}
	wg.Wait()
	var clientTTFT time.Duration
	for _, r := range rs {
		if r.Outcome != result.Success {
			t.Fatalf("%v %s", r.Outcome, r.Err)
		}
		clientTTFT += r.TTFT
	}
	f := scrape(t, s)
	hist := func(name string) *dto.Histogram {
		mf := f[name]
		if mf == nil || len(mf.Metric) != 1 || mf.Metric[0].Histogram == nil {
			t.Fatalf("%s: %v", name, mf)
		}
		return mf.Metric[0].Histogram
	}
	q := hist("vllm:request_queue_time_seconds")
	truth, n := s.QueueTime()
	if q.GetSampleCount() != 3 || n != 3 {
		t.Fatalf("queue time observed %d times, the model queued %d requests; want 3", q.GetSampleCount(), n)
	}
	// Two waited: one the first request's whole time, one two of them.
	if truth < 150*time.Millisecond || absDur(time.Duration(q.GetSampleSum()*float64(time.Second))-truth) > time.Millisecond {
		t.Fatalf("queue time sum %.4fs, the model's %v", q.GetSampleSum(), truth)
	}
	ttft := hist("vllm:time_to_first_token_seconds")
	serverTTFT := time.Duration(ttft.GetSampleSum() * float64(time.Second))
	if ttft.GetSampleCount() != 3 || serverTTFT > clientTTFT || serverTTFT < truth+60*time.Millisecond || clientTTFT-serverTTFT > 30*time.Millisecond {
		t.Fatalf("server TTFT sum %v of %d; the client's %v, the queue %v", serverTTFT, ttft.GetSampleCount(), clientTTFT, truth)
	}
	if got := f["vllm:generation_tokens_total"].Metric[0].Counter.GetValue(); got != 30 {
		t.Fatalf("generation tokens %v, want 30", got)
	}
	for _, g := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"} {
		if mf := f[g]; mf == nil || mf.Metric[0].Gauge.GetValue() != 0 {
			t.Fatalf("%s after the requests: %v, want 0", g, mf)
		}
	}
	// A request is recorded before its client reads the end, as on a
	// real server, so a scrape after the run sees every request.
	if e2e := hist("vllm:e2e_request_latency_seconds"); e2e.GetSampleCount() != 3 {
		t.Fatalf("e2e latency observed %d times right after the requests, want 3", e2e.GetSampleCount())
	}
	if l := f["vllm:e2e_request_latency_seconds"].Metric[0].Label; len(l) != 2 || l[1].GetName() != "model_name" || l[1].GetValue() != "m" {
		t.Fatalf("labels %v, want engine and model_name", l)
	}
}

func absDur(d time.Duration) time.Duration { return max(d, -d) }

func get(t *testing.T, s *Server) string {
	t.Helper()
	resp, err := http.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The habits of servers that count otherwise: a lazy server's families
// are HELP and TYPE lines until their first observation, and a server
// that observes only waiters counts fewer queue times than requests.
func TestMetricsHabits(t *testing.T) {
	s := start(t, Config{Slots: 1, PrefillBase: 20 * time.Millisecond, DecodeBase: 5 * time.Millisecond, Model: "m",
		Metrics: MetricsHabits{Lazy: true, QueueOnlyWaited: true}})
	page := get(t, s)
	if !strings.Contains(page, "# TYPE vllm:request_queue_time_seconds histogram\n") || strings.Contains(page, "vllm:request_queue_time_seconds_count") ||
		strings.Contains(page, "vllm:prompt_tokens_total{") {
		t.Fatalf("a lazy server's page before any request:\n%s", page)
	}
	if rs := do(s, openai.Chat, prompt(10, 5)); rs.Outcome != result.Success {
		t.Fatal(rs.Err)
	}
	// One request alone never waits: its queue time is not observed.
	page = get(t, s)
	if strings.Contains(page, "vllm:request_queue_time_seconds_count") || !strings.Contains(page, "vllm:e2e_request_latency_seconds_count{") {
		t.Fatalf("after one request that did not wait:\n%s", page)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { do(s, openai.Chat, prompt(10, 5)) })
	}
	wg.Wait()
	f := scrape(t, s)
	q := f["vllm:request_queue_time_seconds"].Metric[0].Histogram
	_, all := s.QueueTime()
	if all != 4 || q.GetSampleCount() < 1 || q.GetSampleCount() > 2 {
		t.Fatalf("queue time observed %d times of %d requests; want the 1 or 2 that waited", q.GetSampleCount(), all)
	}
	if f["process_start_time_seconds"] == nil {
		t.Fatal("no process_start_time_seconds")
	}
}
