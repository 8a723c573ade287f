package prom

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/tokenprobe/tokenprobe/internal/catalog"
	"github.com/tokenprobe/tokenprobe/internal/runner"
	"github.com/tokenprobe/tokenprobe/internal/sim"
	"github.com/tokenprobe/tokenprobe/probe"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/ratelimit"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/stats"
	"github.com/tokenprobe/tokenprobe/probe/workload"
)

var update = flag.Bool("update", false, "rewrite golden files")

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// scripted is a fixed set of results covering each outcome and SLO case.
func scripted() []result.Request {
	t0 := time.Unix(1700000000, 0)
	base := result.Request{Profile: "chat", Endpoint: "vllm", Model: "llama", Level: 8, Streaming: true,
		Scheduled: t0, Start: t0.Add(ms(0.2)), Outcome: result.Success, InputTokens: 100, InputSource: result.SourceUsage}
	ok := base
	ok.ID, ok.ContentChunks, ok.OutputTokens = 1, 5, 5
	ok.TTFT, ok.TTST, ok.E2E, ok.Gaps = ms(120), ms(20), ms(200), []time.Duration{ms(20), ms(20), ms(20), ms(20)}
	slow := ok
	slow.ID, slow.TTFT, slow.E2E = 2, ms(900), ms(980)
	slow.Anomaly = result.AnomalyDrain // measured in full, the body left hanging after [DONE]
	slow.Retried = true                // and sent twice, its first connection closed by the server
	oneTok := base
	oneTok.ID, oneTok.ContentChunks, oneTok.OutputTokens, oneTok.TTFT, oneTok.E2E = 3, 1, 1, ms(50), ms(50)
	fail := base
	fail.ID, fail.Outcome, fail.Reason = 4, result.Error, result.ReasonRateLimit
	cancelled := base
	cancelled.ID, cancelled.Outcome = 5, result.Cancelled
	other := ok
	other.ID, other.Level = 6, 32
	return []result.Request{ok, slow, oneTok, fail, cancelled, other}
}

var testSLO = slo.Set{Thresholds: []slo.Threshold{{Kind: slo.TTFT, Max: ms(500)}, {Kind: slo.ITL, Max: ms(50)}}}

func feed(t *testing.T) (*prometheus.Registry, *Exporter) {
	t.Helper()
	reg := prometheus.NewRegistry()
	e, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	e.Describe(Description{Profile: "chat", Endpoint: "vllm", Model: "llama", URL: "http://vllm:8000/v1", API: "chat", Objective: 0.95, ServerInstance: "vllm:8000"})
	for _, r := range scripted() {
		e.Observe(&r, testSLO.Evaluate(&r))
	}
	return reg, e
}

func TestGoldenExposition(t *testing.T) {
	reg, _ := feed(t)
	var b strings.Builder
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	// Timestamps are of the moment the test ran, and the probe's own
	// delay of whatever ran before in this process: checked apart.
	got := timestamps.ReplaceAllString(b.String(), "$1 <time>")
	got = probeDelay.ReplaceAllString(got, "$1 <count>")
	golden := "testdata/exposition.golden.txt"
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("exposition differs from %s (go test -run Golden -update to accept):\n%s", golden, got)
	}
}

var timestamps = regexp.MustCompile(`(?m)^(tokenprobe_\w+_timestamp_seconds\{[^}]*\}) \S+$`)

var probeDelay = regexp.MustCompile(`(?m)^(tokenprobe_probe_scheduling_delay_seconds_\w+(\{[^}]*\})?) \S+$`)

// A job described and never passed has its last success at its start, so
// that "no successful run for an hour" fires for a job that never passes.
func TestLastSuccessStartsAtTheJobsStart(t *testing.T) {
	reg, _ := feed(t)
	v := gathered(t, reg, "tokenprobe_run_last_success_timestamp_seconds")
	if now := float64(time.Now().Unix()); v < now-60 || v > now+1 {
		t.Fatalf("last success %v, want about now (%v)", v, now)
	}
}

func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.Metric[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

func TestCounts(t *testing.T) {
	reg, _ := feed(t)
	c := func(name, labels string) float64 {
		t.Helper()
		return sumWhere(t, reg, name, labels)
	}
	// 6 results: successes 1, 2, 3, 6; one 429; one cancelled.
	if c("tokenprobe_requests_total", `outcome="success"`) != 4 || c("tokenprobe_requests_total", `outcome="cancelled"`) != 1 {
		t.Error("requests by outcome")
	}
	if c("tokenprobe_request_errors_total", `reason="rate_limit"`) != 1 || c("tokenprobe_request_errors_total", `reason="timeout"`) != 0 {
		t.Error("errors by reason")
	}
	// An anomaly is counted beside the outcome, which it leaves alone.
	if c("tokenprobe_server_anomalies_total", `kind="drain",load_level="8"`) != 1 || c("tokenprobe_server_anomalies_total", `load_level="32"`) != 0 {
		t.Error("anomalies by kind")
	}
	// Good: 1 and 6 (2 misses TTFT, 3 has no ITL, 4 failed, 5 cancelled).
	if c("tokenprobe_good_requests_total", "") != 2 {
		t.Errorf("good %v", c("tokenprobe_good_requests_total", ""))
	}
	// Counted against SLOs: 5 (the cancelled one is not); TTFT met by 1, 3, 6.
	if c("tokenprobe_slo_requests_total", `slo="ttft",result="met"`) != 3 || c("tokenprobe_slo_requests_total", `slo="ttft",result="missed"`) != 2 {
		t.Error("ttft slo counts")
	}
	if c("tokenprobe_slo_requests_total", `slo="itl",result="met"`) != 3 || c("tokenprobe_slo_requests_total", `slo="itl",result="missed"`) != 2 {
		t.Error("itl slo counts")
	}
	if c("tokenprobe_output_tokens_total", "") != 16 || c("tokenprobe_input_tokens_total", "") != 400 {
		t.Error("token counts")
	}
	if c("tokenprobe_time_to_first_token_seconds_count", `load_level="8"`) != 3 || c("tokenprobe_time_to_first_token_seconds_count", `load_level="32"`) != 1 {
		t.Error("ttft counts by load level")
	}
	// Inter-chunk gaps: 4 per five-chunk request, three of them.
	if c("tokenprobe_inter_chunk_latency_seconds_count", "") != 12 {
		t.Error("inter-chunk count")
	}
}

func TestEverySeriesIsInTheCatalog(t *testing.T) {
	reg, _ := feed(t)
	mfs, _ := reg.Gather()
	names := catalog.Names()
	for _, mf := range mfs {
		if _, ok := names[mf.GetName()]; !ok {
			t.Errorf("%s is exported but not in the catalog", mf.GetName())
		}
	}
}

func TestLint(t *testing.T) {
	reg, _ := feed(t)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

func scrape(t *testing.T, reg *prometheus.Registry, accept string) (*http.Response, []byte) {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

func TestProtobufScrapeHasNativeHistograms(t *testing.T) {
	reg, _ := feed(t)
	resp, body := scrape(t, reg, `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited`)
	format := expfmt.ResponseFormat(resp.Header)
	dec := expfmt.NewDecoder(strings.NewReader(string(body)), format)
	found := false
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			break
		}
		if mf.GetName() != "tokenprobe_time_to_first_token_seconds" {
			continue
		}
		for _, m := range mf.Metric {
			h := m.GetHistogram()
			// Native: a schema and spans, with the trace exemplars the
			// native exposition carries; classic buckets are there too.
			if h.Schema != nil && len(h.PositiveSpan) > 0 && len(h.Bucket) > 0 && len(h.Exemplars) > 0 {
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("no native TTFT histogram with exemplars in the protobuf scrape (format %s)", format)
	}
}

// The TTFT, ITL and latency histograms carry exemplars that lead to the
// request's trace (trace_id, span_id) and its record (request_id).
func TestOpenMetricsScrapeHasExemplars(t *testing.T) {
	reg, e := feed(t)
	r := scripted()[0]
	r.ID, r.Trace = 99, result.Trace{TraceID: [16]byte{0x4b, 0xf9, 15: 0x36}, SpanID: [8]byte{0x00, 0xf0, 7: 0xb7}}
	e.series[seriesKey{r.Profile, r.Endpoint, r.Model, r.Level}].lastExemplar.Store(0) // due now
	e.Observe(&r, testSLO.Evaluate(&r))
	_, body := scrape(t, reg, "application/openmetrics-text; version=1.0.0")
	want := []string{`request_id="99"`, `span_id="00f00000000000b7"`, `trace_id="4bf90000000000000000000000000036"`}
	for _, h := range []string{"tokenprobe_time_to_first_token_seconds_bucket{", "tokenprobe_inter_token_latency_seconds_bucket{", "tokenprobe_request_duration_seconds_bucket{"} {
		found := false
		for _, line := range strings.Split(string(body), "\n") {
			_, ex, _ := strings.Cut(line, " # {")
			found = found || strings.HasPrefix(line, h) && strings.Contains(ex, want[0]) && strings.Contains(ex, want[1]) && strings.Contains(ex, want[2])
		}
		if !found {
			t.Errorf("no trace exemplar on %s:\n%.3000s", h, body)
		}
	}
}

func TestForgetDeletesAProfile(t *testing.T) {
	reg, e := feed(t)
	other := result.Request{Profile: "batch", Endpoint: "vllm", Model: "llama", Outcome: result.Success, Streaming: true, ContentChunks: 1, OutputTokens: 1}
	e.Observe(&other, slo.Verdict{Counted: true, Good: true})
	e.Describe(Description{Profile: "batch", Endpoint: "vllm", Model: "llama", URL: "http://vllm:8000/v1", API: "chat", ServerInstance: "vllm:8000"})
	e.Forget("chat", "")
	mfs, _ := reg.Gather()
	batch := false
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "profile" && l.GetValue() == "chat" {
					t.Fatalf("%s still has a chat series", mf.GetName())
				}
				batch = batch || l.GetValue() == "batch"
			}
		}
	}
	if !batch {
		t.Fatal("the other profile's series went too")
	}
}

// Every counter agrees exactly with the results a real run produced against
// the simulator with faults switched on.
func TestCountersAgreeWithResults(t *testing.T) {
	s, err := sim.Start("127.0.0.1:0", sim.Config{Slots: 8, DecodeBase: time.Millisecond, Seed: 5,
		Faults: sim.Faults{Error500: 0.1, Error429: 0.1, Malformed: 0.1, Disconnect: 0.05}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	reg := prometheus.NewRegistry()
	e, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	run := &probe.Run{
		Profile: "p", Plan: probe.Plan{Stages: []probe.Stage{{Concurrency: 6, Requests: 200}}},
		Workload: workload.NewSynthetic(workload.Lengths{Mean: 20, Stddev: 5}, workload.Lengths{Mean: 8, Stddev: 3}, true, 1),
		SLO:      slo.Set{Thresholds: []slo.Threshold{{Kind: slo.TTFT, Max: ms(20)}}},
		Endpoint: &client.Endpoint{Name: "sim", BaseURL: s.URL(), API: openai.Chat, Model: "m", Timeout: 10 * time.Second, IncludeUsage: true},
		Client:   client.New(client.Options{}),
		Sinks:    []probe.Sink{e, rec},
	}
	f := runner.Execute(context.Background(), run, runner.Options{})
	sum, err := *f.Summary, f.Err
	if err != nil {
		t.Fatal(err)
	}
	c := func(name, labels string) float64 { return sumWhere(t, reg, name, labels) }
	if int(c("tokenprobe_requests_total", `outcome="success"`)) != sum.Success || int(c("tokenprobe_requests_total", `outcome="error"`)) != sum.Errors {
		t.Errorf("outcomes: exported %v/%v, summary %d/%d", c("tokenprobe_requests_total", `outcome="success"`), c("tokenprobe_requests_total", `outcome="error"`), sum.Success, sum.Errors)
	}
	if int(c("tokenprobe_good_requests_total", "")) != sum.Good || sum.Good != rec.good {
		t.Errorf("good: exported %v, summary %d, results %d", c("tokenprobe_good_requests_total", ""), sum.Good, rec.good)
	}
	for reason, n := range sum.ByReason {
		if got := c("tokenprobe_request_errors_total", `reason="`+reason+`"`); int(got) != n {
			t.Errorf("%s: exported %v, summary %d", reason, got, n)
		}
	}
	if sum.Errors == 0 || len(sum.ByReason) < 3 {
		t.Errorf("faults did not show: %+v", sum.ByReason)
	}
	if c("tokenprobe_runs_total", `result="passed"`) != 1 || c("tokenprobe_run_last_slo_attainment_ratio", "") != sum.Attainment {
		t.Error("run metrics")
	}
}

type recorder struct {
	mu   sync.Mutex
	good int
}

func (r *recorder) Observe(_ *result.Request, v slo.Verdict) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v.Good {
		r.good++
	}
}

// sumWhere adds up the samples of a metric (or its _count/_sum series)
// whose labels contain every name="value" pair in labels.
func sumWhere(t *testing.T, reg *prometheus.Registry, name, labels string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	family, suffix := name, ""
	for _, s := range []string{"_count", "_sum"} {
		if strings.HasSuffix(name, s) && strings.HasSuffix(strings.TrimSuffix(name, s), "_seconds") {
			family, suffix = strings.TrimSuffix(name, s), s
		}
	}
	var total float64
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
	metrics:
		for _, m := range mf.Metric {
			have := map[string]string{}
			for _, l := range m.Label {
				have[l.GetName()] = l.GetValue()
			}
			for _, pair := range strings.Split(labels, ",") {
				if pair == "" {
					continue
				}
				k, v, _ := strings.Cut(pair, "=")
				if have[k] != strings.Trim(v, `"`) {
					continue metrics
				}
			}
			switch {
			case suffix == "_count":
				total += float64(m.GetHistogram().GetSampleCount())
			case suffix == "_sum":
				total += m.GetHistogram().GetSampleSum()
			case m.Counter != nil:
				total += m.GetCounter().GetValue()
			case m.Gauge != nil:
				total += m.GetGauge().GetValue()
			}
		}
	}
	return total
}

// A run whose server was read publishes where its TTFT went, and the next
// run without a breakdown takes those figures away rather than leave them
// explaining a run they did not see.
func TestTTFTBreakdownOfTheLastRun(t *testing.T) {
	reg, e := feed(t)
	run := &probe.Run{Profile: "chat", Endpoint: &client.Endpoint{Name: "vllm"}}
	prefill := 200.0
	sum := &stats.Summary{Server: &stats.Server{Breakdown: &stats.Breakdown{
		Mean: stats.Split{TTFT: 4700, Queue: 4300, Prefill: &prefill, Elsewhere: 200}, Dominant: "queue"}}}
	e.RunFinished(run, probe.Finished{Summary: sum, Verdict: probe.Passed})
	want := `
# HELP tokenprobe_run_last_ttft_breakdown_seconds ` + catalog.RunLastTTFTBreakdown.Help + `
# TYPE tokenprobe_run_last_ttft_breakdown_seconds gauge
tokenprobe_run_last_ttft_breakdown_seconds{endpoint="vllm",phase="elsewhere",profile="chat",stat="mean"} 0.2
tokenprobe_run_last_ttft_breakdown_seconds{endpoint="vllm",phase="prefill",profile="chat",stat="mean"} 0.2
tokenprobe_run_last_ttft_breakdown_seconds{endpoint="vllm",phase="queue",profile="chat",stat="mean"} 4.3
# HELP tokenprobe_run_last_ttft_dominant_phase ` + catalog.RunLastTTFTDominant.Help + `
# TYPE tokenprobe_run_last_ttft_dominant_phase gauge
tokenprobe_run_last_ttft_dominant_phase{endpoint="vllm",phase="elsewhere",profile="chat"} 0
tokenprobe_run_last_ttft_dominant_phase{endpoint="vllm",phase="prefill",profile="chat"} 0
tokenprobe_run_last_ttft_dominant_phase{endpoint="vllm",phase="queue",profile="chat"} 1
`
	names := []string{catalog.RunLastTTFTBreakdown.Name, catalog.RunLastTTFTDominant.Name}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	// A sweep's server load, per level.
	sweep := &stats.Summary{Stages: []stats.Summary{
		{Level: 1, Server: &stats.Server{Running: &stats.Level{Avg: 1}, Waiting: &stats.Level{Avg: 0}, KVCache: &stats.Level{Avg: 0.1}}},
		{Level: 8, Server: &stats.Server{Running: &stats.Level{Avg: 4}, Waiting: &stats.Level{Avg: 3.5}, KVCache: &stats.Level{Avg: 0.4}}},
	}}
	e.RunFinished(run, probe.Finished{Summary: sweep, Verdict: probe.Passed})
	load := `
# HELP tokenprobe_run_last_server_requests ` + catalog.RunLastServerRequests.Help + `
# TYPE tokenprobe_run_last_server_requests gauge
tokenprobe_run_last_server_requests{endpoint="vllm",load_level="1",profile="chat",state="running"} 1
tokenprobe_run_last_server_requests{endpoint="vllm",load_level="1",profile="chat",state="waiting"} 0
tokenprobe_run_last_server_requests{endpoint="vllm",load_level="8",profile="chat",state="running"} 4
tokenprobe_run_last_server_requests{endpoint="vllm",load_level="8",profile="chat",state="waiting"} 3.5
# HELP tokenprobe_run_last_server_kv_cache_usage_ratio ` + catalog.RunLastServerKVCache.Help + `
# TYPE tokenprobe_run_last_server_kv_cache_usage_ratio gauge
tokenprobe_run_last_server_kv_cache_usage_ratio{endpoint="vllm",load_level="1",profile="chat"} 0.1
tokenprobe_run_last_server_kv_cache_usage_ratio{endpoint="vllm",load_level="8",profile="chat"} 0.4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(load), catalog.RunLastServerRequests.Name, catalog.RunLastServerKVCache.Name); err != nil {
		t.Fatal(err)
	}
	names = append(names, catalog.RunLastServerRequests.Name, catalog.RunLastServerKVCache.Name)
	e.RunFinished(run, probe.Finished{Summary: &stats.Summary{}, Verdict: probe.Passed})
	if n, err := testutil.GatherAndCount(reg, names...); err != nil || n != 0 {
		t.Fatalf("%d series left after a run without a breakdown (%v)", n, err)
	}
}

// Every series a profile's runs add to exists at zero once it is loaded:
// per level of its plan, per outcome and reason, per SLO it sets, and its
// run results. rate() ignores a series' first sample, so a series created
// by its first observation would hide its whole first run.
func TestDescribeMakesEverySeriesAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	e.Describe(Description{Profile: "sweep", Endpoint: "vllm", Model: "llama", API: "chat", Levels: []float64{1, 8}, SLOs: []slo.Kind{slo.TTFT}})
	count := func(name string, match map[string]string) int { return len(samples(t, reg, name, match)) }
	for _, level := range []string{"1", "8"} {
		at := map[string]string{"load_level": level}
		if n := count(catalog.Requests.Name, at); n != len(result.Outcomes) {
			t.Errorf("level %s: %d request series, want one per outcome", level, n)
		}
		if n := count(catalog.TTFT.Name, at); n != 1 {
			t.Errorf("level %s: %d TTFT histograms", level, n)
		}
		if n := count(catalog.Good.Name, at); n != 1 {
			t.Errorf("level %s: %d good-request series", level, n)
		}
		if n := count(catalog.SLORequests.Name, map[string]string{"load_level": level, "slo": "ttft"}); n != 2 {
			t.Errorf("level %s: %d TTFT SLO series, want met and missed", level, n)
		}
		if n := count(catalog.SLORequests.Name, map[string]string{"load_level": level, "slo": "itl"}); n != 0 {
			t.Errorf("level %s: %d ITL SLO series for a profile without an ITL SLO", level, n)
		}
	}
	if n := count(catalog.Runs.Name, map[string]string{"profile": "sweep"}); n != 5 {
		t.Errorf("%d run result series, want 5", n)
	}
	// A reload that moves the endpoint's server leaves one info series.
	e.Describe(Description{Profile: "sweep", Endpoint: "vllm", Model: "llama", API: "chat", ServerInstance: "vllm-2:8000", Levels: []float64{1, 8}, SLOs: []slo.Kind{slo.TTFT}})
	if n := count(catalog.ProfileInfo.Name, map[string]string{"profile": "sweep"}); n != 1 {
		t.Errorf("%d info series after a reload, want 1", n)
	}
	// A removed profile's series go.
	e.Forget("sweep", "")
	if n := count(catalog.Requests.Name, nil) + count(catalog.Runs.Name, nil); n != 0 {
		t.Errorf("%d series left after Forget", n)
	}
}

// A wrong answer counts as its outcome and in its failing check's series,
// and its timing is in the histograms as a success's is.
func TestWrongAnswers(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	e.Describe(Description{Profile: "p", Endpoint: "gw", Model: "big", Levels: []float64{1}, Checks: []string{"model"}})
	r := &result.Request{Profile: "p", Endpoint: "gw", Model: "big", Level: 1, Streaming: true, Outcome: result.WrongAnswer,
		ContentChunks: 3, OutputTokens: 3, TTFT: 50 * time.Millisecond, E2E: 90 * time.Millisecond,
		Checks: []result.Check{{Name: "model", Pass: false}}}
	e.Observe(r, slo.Verdict{Counted: true})
	want := `
# HELP tokenprobe_answer_checks_total ` + catalog.AnswerChecks.Help + `
# TYPE tokenprobe_answer_checks_total counter
tokenprobe_answer_checks_total{check="model",endpoint="gw",model="big",profile="p",result="fail"} 1
tokenprobe_answer_checks_total{check="model",endpoint="gw",model="big",profile="p",result="pass"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), catalog.AnswerChecks.Name); err != nil {
		t.Fatal(err)
	}
	if ms := samples(t, reg, catalog.Requests.Name, map[string]string{"outcome": "wrong_answer"}); len(ms) != 1 || ms[0].GetCounter().GetValue() != 1 {
		t.Errorf("wrong_answer requests %v", ms)
	}
	if ms := samples(t, reg, catalog.TTFT.Name, nil); len(ms) != 1 || ms[0].GetHistogram().GetSampleCount() != 1 {
		t.Errorf("TTFT %v: want the wrong answer's, once", ms)
	}
}

// samples are the series of metric name that carry the labels of match.
func samples(t *testing.T, reg *prometheus.Registry, name string, match map[string]string) []*dto.Metric {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []*dto.Metric
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range match {
				if labels[k] != v {
					continue metrics
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// An embeddings job has latency and token series and no TTFT, TTST, ITL
// or gap series, neither made ahead nor by its requests.
func TestEmbeddingsHaveNoTTFTSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	e.Describe(Description{Profile: "rag", Endpoint: "embed", Model: "bge", API: "embeddings", Levels: []float64{2}})
	r := result.Request{Profile: "rag", Endpoint: "embed", Model: "bge", API: "embeddings", Level: 2, Outcome: result.Success,
		E2E: 30 * time.Millisecond, InputTokens: 400}
	e.Observe(&r, slo.Verdict{})
	for name, want := range map[string]int{
		"tokenprobe_request_duration_seconds": 1, "tokenprobe_time_to_first_token_seconds": 0,
		"tokenprobe_inter_token_latency_seconds": 0, "tokenprobe_time_to_second_token_seconds": 0,
	} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != want {
			t.Errorf("%s: %d series, want %d", name, n, want)
		}
	}
}

// The phases of a request that opened a connection go into dns, connect
// and tls; every answered request's head into first_byte.
func TestPhasesHistogram(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	fresh := result.Request{Profile: "p", Endpoint: "e", Model: "m", Outcome: result.Success, E2E: time.Second,
		DNS: time.Millisecond, Connect: 2 * time.Millisecond, TLS: 3 * time.Millisecond, FirstByte: 200 * time.Millisecond}
	kept := fresh
	kept.Reused, kept.DNS, kept.Connect, kept.TLS = true, 0, 0, 0
	e.Observe(&fresh, slo.Verdict{})
	e.Observe(&kept, slo.Verdict{})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "tokenprobe_request_phase_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "phase" {
					got[l.GetValue()] = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	if want := map[string]uint64{"dns": 1, "connect": 1, "tls": 1, "first_byte": 2}; !maps.Equal(got, want) {
		t.Fatalf("phase counts %v, want %v", got, want)
	}
}

// The models that answered are the last run's, at most four per profile
// and endpoint, their server-given names cut to 128 bytes.
func TestServedModelOfTheLastRun(t *testing.T) {
	reg, e := feed(t)
	run := &probe.Run{Profile: "chat", Endpoint: &client.Endpoint{Name: "gw"}}
	gather := func() string {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, mf := range mfs {
			if mf.GetName() != catalog.RunLastServedModel.Name {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "served_model" {
						got = append(got, l.GetValue())
					}
				}
			}
		}
		return strings.Join(got, ",")
	}
	e.RunFinished(run, probe.Finished{Summary: &stats.Summary{ServedModels: []stats.ServedModel{{Name: "llama-3-70b", Requests: 9}}}, Verdict: probe.Passed})
	if got := gather(); got != "llama-3-70b" {
		t.Fatalf("served models %q", got)
	}
	e.RunFinished(run, probe.Finished{Summary: &stats.Summary{ServedModels: []stats.ServedModel{{Name: "tiny-fallback", Requests: 9}}}, Verdict: probe.Passed})
	if got := gather(); got != "tiny-fallback" {
		t.Fatalf("after a second run, served models %q, want the last run's only", got)
	}
	e.RunFinished(run, probe.Finished{Summary: &stats.Summary{ServedModels: []stats.ServedModel{{Name: strings.Repeat("é", 100), Requests: 1}}}, Verdict: probe.Passed})
	if got := gather(); len(got) > 128 || !utf8.ValidString(got) || got == "" {
		t.Fatalf("a 200-byte name exported as %d bytes (valid UTF-8: %v)", len(got), utf8.ValidString(got))
	}
	many := make([]stats.ServedModel, 8)
	for i := range many {
		many[i] = stats.ServedModel{Name: fmt.Sprintf("m%d", i), Requests: 8 - i}
	}
	e.RunFinished(run, probe.Finished{Summary: &stats.Summary{ServedModels: many}, Verdict: probe.Passed})
	if got := gather(); got != "m0,m1,m2,m3" {
		t.Fatalf("eight models exported as %q, want the four most frequent", got)
	}
	e.RunFinished(run, probe.Finished{Summary: &stats.Summary{}, Verdict: probe.Failed})
	if got := gather(); got != "" {
		t.Fatalf("a run no answer of which named a model left %q", got)
	}
}

// TestRateLimitGauges: an answer's rate-limit headers set the endpoint's
// gauges, a field it did not send keeps its last value, and an endpoint
// whose answers send none has no such series.
func TestRateLimitGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	answer := func(endpoint string, headers ...[2]string) {
		r := result.Request{Profile: "chat", Endpoint: endpoint, Model: "gpt", Outcome: result.Success, End: now}
		if len(headers) > 0 {
			var rl ratelimit.Reading
			for _, h := range headers {
				rl.Header([]byte(h[0]), []byte(h[1]))
			}
			r.RateLimit = &rl
		}
		e.Observe(&r, slo.Verdict{})
	}
	answer("openai", [2]string{"x-ratelimit-limit-tokens", "150000"}, [2]string{"x-ratelimit-remaining-tokens", "149000"}, [2]string{"x-ratelimit-reset-tokens", "6m0s"})
	answer("openai", [2]string{"x-ratelimit-remaining-tokens", "12000"})
	answer("local")
	want := `
# HELP tokenprobe_rate_limit_limit ` + catalog.RateLimitLimit.Help + `
# TYPE tokenprobe_rate_limit_limit gauge
tokenprobe_rate_limit_limit{endpoint="openai",kind="tokens",profile="chat"} 150000
# HELP tokenprobe_rate_limit_remaining ` + catalog.RateLimitRemaining.Help + `
# TYPE tokenprobe_rate_limit_remaining gauge
tokenprobe_rate_limit_remaining{endpoint="openai",kind="tokens",profile="chat"} 12000
# HELP tokenprobe_rate_limit_reset_seconds ` + catalog.RateLimitReset.Help + `
# TYPE tokenprobe_rate_limit_reset_seconds gauge
tokenprobe_rate_limit_reset_seconds{endpoint="openai",kind="tokens",profile="chat"} 360
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), catalog.RateLimitLimit.Name, catalog.RateLimitRemaining.Name, catalog.RateLimitReset.Name); err != nil {
		t.Error(err)
	}
}

// The endpoint's failing state: set with the reason of most failures by
// an aborted run (or one no request of which succeeded), kept through
// runs that fail the same way and through the backoff between them,
// changed with the reason, left alone by a cancelled run, and removed by
// the first answer, right or wrong, before its run ends.
func TestEndpointFailingLastsUntilAnAnswer(t *testing.T) {
	reg, e := feed(t)
	run := &probe.Run{Profile: "chat", Endpoint: &client.Endpoint{Name: "gw"}}
	state := func() string {
		t.Helper()
		var got []string
		for _, m := range samples(t, reg, catalog.EndpointFailing.Name, map[string]string{"endpoint": "gw"}) {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					got = append(got, fmt.Sprintf("%s=%g", l.GetValue(), m.GetGauge().GetValue()))
				}
			}
		}
		return strings.Join(got, ",")
	}
	aborted := func(r result.Reason) probe.Finished {
		return probe.Finished{Summary: &stats.Summary{Errors: 20}, Verdict: probe.Errored, Err: &probe.RunError{Why: "x", Aborted: true, Reason: r}}
	}
	e.RunFinished(run, aborted(result.ReasonAuth))
	if got := state(); got != "auth=1" {
		t.Fatalf("after a run aborted on 401s: %q", got)
	}
	e.RunFinished(run, aborted(result.ReasonAuth))
	e.RunFinished(run, probe.Finished{Verdict: probe.Cancelled, Err: probe.ErrInterrupted})
	if got := state(); got != "auth=1" {
		t.Fatalf("after a second such run and a cancelled one: %q", got)
	}
	e.RunFinished(run, aborted(result.ReasonConnect))
	if got := state(); got != "connect=1" {
		t.Fatalf("after a run aborted on refused connects: %q", got)
	}
	// A timeout, then an error answer: no answer yet.
	for _, o := range []result.Request{
		{Profile: "chat", Endpoint: "gw", Outcome: result.Error, Reason: result.ReasonTimeout},
		{Profile: "chat", Endpoint: "vllm", Outcome: result.Success}, // another endpoint's answer
	} {
		e.Observe(&o, slo.Verdict{})
	}
	if got := state(); got != "connect=1" {
		t.Fatalf("after a failure and another endpoint's answer: %q", got)
	}
	e.Observe(&result.Request{Profile: "chat", Endpoint: "gw", Outcome: result.WrongAnswer}, slo.Verdict{})
	if got := state(); got != "" {
		t.Fatalf("after an answer: %q, want no series", got)
	}
	e.RunFinished(run, probe.Finished{Summary: &stats.Summary{Success: 3, Errors: 1}, Verdict: probe.Passed})
	if got := state(); got != "" {
		t.Fatalf("after a run with answers: %q", got)
	}
}

// Each level's cause: a sweep whose level 2 went to the prefill and level
// 8 to the queue exports each level's, and a next run without a breakdown
// removes them.
func TestDominantPhaseByLevel(t *testing.T) {
	reg, e := feed(t)
	run := &probe.Run{Profile: "chat", Endpoint: &client.Endpoint{Name: "vllm"}}
	level := func(l float64, dominant string) stats.Summary {
		p := 1.0
		return stats.Summary{Level: l, Server: &stats.Server{Breakdown: &stats.Breakdown{Mean: stats.Split{Prefill: &p}, Dominant: dominant}}}
	}
	e.RunFinished(run, probe.Finished{Summary: &stats.Summary{Stages: []stats.Summary{level(2, "prefill"), level(8, "queue"), {Level: 16}}}, Verdict: probe.Passed})
	got := map[string]bool{}
	for _, m := range samples(t, reg, catalog.RunLastTTFTDominantByLevel.Name, nil) {
		if m.GetGauge().GetValue() != 1 {
			continue
		}
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		got[l["load_level"]+" "+l["phase"]] = true
	}
	if want := map[string]bool{"2 prefill": true, "8 queue": true}; !maps.Equal(got, want) {
		t.Fatalf("dominant phases by level %v, want %v", got, want)
	}
	e.RunFinished(run, probe.Finished{Summary: &stats.Summary{}, Verdict: probe.Passed})
	if n := len(samples(t, reg, catalog.RunLastTTFTDominantByLevel.Name, nil)); n > 0 {
		t.Fatalf("a run without a breakdown left %d series", n)
	}
}

// A prefix-cache run's verdict is a state set of three, its speed-up and
// interval beside it; a run with one triple has no interval, and a
// profile that is no prefix-cache probe has none of these series.
func TestPrefixCacheVerdictOfTheLastRun(t *testing.T) {
	reg, e := feed(t)
	run := &probe.Run{Profile: "cache", Endpoint: &client.Endpoint{Name: "ls"}}
	values := func() map[string]float64 { return gauges(t, reg, "tokenprobe_run_last_prefix_cache_") }
	e.RunFinished(run, probe.Finished{Summary: &stats.Summary{PrefixCache: &stats.PrefixCache{Triples: 8, Speedup: 0.94,
		Interval: stats.Interval{Low: 0.77, High: 1.14}, MinSpeedup: 1.25, Verdict: stats.CacheBroken}}, Verdict: probe.Passed})
	want := map[string]float64{"speedup_ratio": 0.94, "speedup_interval_ratio/low": 0.77, "speedup_interval_ratio/high": 1.14,
		"verdict/broken": 1, "verdict/working": 0, "verdict/not_enough_evidence": 0}
	if got := values(); !maps.Equal(got, want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	e.RunFinished(run, probe.Finished{Summary: &stats.Summary{PrefixCache: &stats.PrefixCache{Triples: 1, Speedup: 2, MinSpeedup: 1.25, Verdict: stats.Undecided}}, Verdict: probe.Passed})
	want = map[string]float64{"speedup_ratio": 2, "verdict/broken": 0, "verdict/working": 0, "verdict/not_enough_evidence": 1}
	if got := values(); !maps.Equal(got, want) {
		t.Fatalf("after one triple, series %v, want %v", got, want)
	}
	other := &probe.Run{Profile: "chat", Endpoint: &client.Endpoint{Name: "ls"}}
	e.Forget("cache", "")
	e.RunFinished(other, probe.Finished{Summary: &stats.Summary{}, Verdict: probe.Passed})
	if got := values(); len(got) != 0 {
		t.Fatalf("a profile without prefix_cache has %v", got)
	}
}

// A model-identity run's verdict is a state set of four, with the share
// of prompts that agreed, its interval, the log-probabilities' distance
// and the prompt that moved most; a
// run that learns has no share, and the moved prompt goes with the run
// that named it.
func TestModelIdentityOfTheLastRun(t *testing.T) {
	reg, e := feed(t)
	run := &probe.Run{Profile: "identity", Endpoint: &client.Endpoint{Name: "vllm"}}
	values := func() map[string]float64 { return gauges(t, reg, "tokenprobe_run_last_model_identity_") }
	e.RunFinished(run, probe.Finished{Summary: &stats.Summary{ModelIdentity: &stats.ModelIdentity{Prompts: 16, Agreeing: 0, Agreement: 0,
		Interval: stats.Interval{Low: 0, High: 0.194}, MinAgreement: 0.5, Verdict: stats.ModelChanged, Moved: &stats.MovedPrompt{Prompt: "p1"},
		Logprobs: &stats.LogprobDrift{Prompts: 11, Distance: 0.0016}}}, Verdict: probe.Passed})
	want := map[string]float64{"agreement_ratio": 0, "agreement_interval_ratio/low": 0, "agreement_interval_ratio/high": 0.194, "moved_prompt_info/p1": 1,
		"logprob_distance_nats": 0.0016, "verdict/same": 0, "verdict/changed": 1, "verdict/not_enough_evidence": 0, "verdict/learning": 0}
	if got := values(); !maps.Equal(got, want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	e.RunFinished(run, probe.Finished{Summary: &stats.Summary{ModelIdentity: &stats.ModelIdentity{Verdict: stats.Learning, LearnedRuns: 1, LearnRuns: 3}}, Verdict: probe.Passed})
	want = map[string]float64{"verdict/same": 0, "verdict/changed": 0, "verdict/not_enough_evidence": 0, "verdict/learning": 1}
	if got := values(); !maps.Equal(got, want) {
		t.Fatalf("a learning run: series %v, want %v", got, want)
	}
}

// gauges are the values of the gauges named with prefix, each keyed by
// the rest of its name and its verdict, bound or prompt label.
func gauges(t *testing.T, reg prometheus.Gatherer, prefix string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), prefix) {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := strings.TrimPrefix(mf.GetName(), prefix)
			for _, l := range m.GetLabel() {
				if n := l.GetName(); n == "verdict" || n == "bound" || n == "prompt" {
					key += "/" + l.GetValue()
				}
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}
