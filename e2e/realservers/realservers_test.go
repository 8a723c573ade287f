// Package realservers runs tokenprobe against real servers nobody on this
// project wrote: llama.cpp's llama-server and llm-d-inference-sim, built
// by .ci/run. Its own package, apart from e2e, so that each stays within
// go test's 10 minutes a package on a busy host.
package realservers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/tokenprobe/tokenprobe/internal/daemon"
	"github.com/tokenprobe/tokenprobe/internal/realserver"
	"github.com/tokenprobe/tokenprobe/internal/runonce"
	"github.com/tokenprobe/tokenprobe/internal/servermetrics"
	"github.com/tokenprobe/tokenprobe/internal/sink/records"
	"github.com/tokenprobe/tokenprobe/internal/syncbuf"
	"github.com/tokenprobe/tokenprobe/internal/timingtest"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// runConfig runs every profile of a configuration once, as `tokenprobe
// run -c` does, and returns the exit code, the summaries and the records.
func runConfig(ctx context.Context, t *testing.T, yaml string) (int, []stats.Summary, []records.Record, string) {
	t.Helper()
	dir := t.TempDir()
	var out strings.Builder
	code := runIn(ctx, dir, yaml, &out)
	sums, recs := readRuns(t, dir)
	if len(sums) == 0 {
		t.Fatalf("exit %d and no run's summary: %s", code, out.String())
	}
	return code, sums, recs, out.String()
}

// runIn runs a configuration with its artifacts under dir; it may run on
// a goroutine of its own (it fails no test).
func runIn(ctx context.Context, dir, yaml string, out io.Writer) int {
	cfg := filepath.Join(dir, "tokenprobe.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		fmt.Fprintln(out, err)
		return -1
	}
	return runonce.Run(ctx, runonce.Options{ConfigFile: cfg, ArtifactsDir: filepath.Join(dir, "runs"), Out: out, Progress: io.Discard})
}

// runAcrossRestart runs a configuration of one profile while srv is
// restarted (with args, when given): the restart comes once the server
// has served n (what served reads, counted since it started), and the run
// is ended once the new process has too. Bounded by what the server
// counted and by the run itself: a run that ends first fails the test
// with what the run printed, where a wait for the server alone hung until
// go test's deadline. The configuration's run must outlast both
// waits (a long duration, ended here) and the restart's errors: streams
// cut, and, through the relay into the namespace of llm-d-inference-sim,
// connections reset until the new process listens, which on a busy host
// were more than half of the first 20 requests and aborted the run on its
// error ratio (abort: {min_requests: 0}).
func runAcrossRestart(t *testing.T, cfg string, srv *realserver.Server, what string, n float64, served func() float64, args ...string) ([]stats.Summary, []records.Record, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	var out syncbuf.Buffer
	var code int
	ended := make(chan struct{})
	go func() { code = runIn(ctx, dir, cfg, &out); close(ended) }()
	runEnded := func() bool {
		select {
		case <-ended:
			return true
		default:
			return false
		}
	}
	wait := func(when string) {
		timingtest.Until(t, func() string {
			msg := fmt.Sprintf("%s to serve %g %s %s (%g so far)", srv.Name(), n, what, when, served())
			if runEnded() {
				msg = fmt.Sprintf("the run ended (exit %d) before %s:\n%s", code, msg, out.String())
			}
			return msg
		}, func() bool { return served() >= n }, runEnded)
	}
	wait("before the restart")
	srv.Restart(args...)
	wait("after the restart")
	cancel()
	<-ended
	sums, recs := readRuns(t, dir)
	if len(sums) != 1 {
		t.Fatalf("%d runs: %s", len(sums), out.String())
	}
	return sums, recs, out.String()
}

// splitsAddUp checks that every TTFT split of a run and its levels adds
// up: each part within its whole, the parts making it (every run these
// tests make against llm-d-inference-sim, most past its slots).
func splitsAddUp(t *testing.T, file string, s stats.Summary) {
	t.Helper()
	if sv := s.Server; sv != nil && sv.Breakdown != nil {
		if why := sv.Breakdown.Mean.AddsUp(); why != "" {
			t.Errorf("%s: level %g: the mean split does not add up: %s", file, s.Level, why)
		}
		if p := sv.Breakdown.P50; p != nil {
			if why := p.AddsUp(); why != "" {
				t.Errorf("%s: level %g: the median split does not add up: %s", file, s.Level, why)
			}
		}
	}
	for _, st := range s.Stages {
		splitsAddUp(t, file, st)
	}
}

// readRuns reads back every run's summary and records under dir.
func readRuns(t *testing.T, dir string) ([]stats.Summary, []records.Record) {
	t.Helper()
	var sums []stats.Summary
	var recs []records.Record
	files, _ := filepath.Glob(filepath.Join(dir, "runs", "*", "*", "summary.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s stats.Summary
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		splitsAddUp(t, f, s)
		sums = append(sums, s)
		rf, err := os.Open(filepath.Join(filepath.Dir(f), "records.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(rf)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r records.Record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			recs = append(recs, r)
		}
		rf.Close()
	}
	return sums, recs
}

// Against llama.cpp's llama-server, which names its --alias in every
// answer whatever was asked, the default model check passes every healthy
// answer of every API the server speaks (it called them all wrong before),
// the prompt's length on the Messages API is chat's (it left out the tokens
// read from the prompt cache), and the server's page, which has no
// histograms, is said to have no queue series, not to have seen no request.
func TestLlamaServerEveryAPIAnswersRightByDefault(t *testing.T) {
	srv := realserver.LlamaServer(t)
	var eps, names []string
	for _, api := range []string{"chat", "completions", "messages", "responses"} {
		name := "llamacpp-" + api
		names = append(names, name)
		eps = append(eps, fmt.Sprintf(`  - name: %s
    base_url: %s/v1
    api: %s
    model: default
    timeout: 60s
    server_metrics: {url: "%s/metrics", kind: llamacpp, interval: 200ms}
`, name, srv.URL, api, srv.URL))
	}
	cfg := "endpoints:\n" + strings.Join(eps, "") + fmt.Sprintf(`profiles:
  - name: four-users
    endpoints: [%s]
    load: {concurrency: 4, requests: 12}
    workload:
      input_tokens: {mean: 96}
      output_tokens: {mean: 16}
      seed: 7
`, strings.Join(names, ", "))
	code, sums, recs, out := runConfig(context.Background(), t, cfg)
	if code != runonce.ExitOK {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	input := map[string]int{}
	for _, s := range sums {
		if s.Success != 12 || s.WrongAnswers != 0 || s.Errors != 0 {
			t.Errorf("%s: %d success, %d wrong answers, %d errors (%v); want 12 right answers", s.Endpoint, s.Success, s.WrongAnswers, s.Errors, s.Failures)
		}
		input[s.Endpoint] = s.InputTokens
		if s.ServedModel != srv.Model || !strings.Contains(out, "model default (answers name "+srv.Model+")") {
			t.Errorf("%s: served model %q; the report must say what the answers name", s.Endpoint, s.ServedModel)
		}
		if sv := s.Server; sv == nil || !strings.Contains(sv.Note, "(llamacpp) exposes no queue-time series") {
			t.Errorf("%s: server note %+v, want that it has no queue series", s.Endpoint, sv)
		}
	}
	if input["llamacpp-messages"] != input["llamacpp-chat"] || input["llamacpp-chat"] == 0 {
		t.Errorf("input tokens by API %v: messages must count what chat counts for the same prompts", input)
	}
	for _, r := range recs {
		if r.ServedModel != srv.Model {
			t.Fatalf("record %d (%s): served model %q, the server's alias is %q", r.ID, r.Endpoint, r.ServedModel, srv.Model)
		}
		// The Messages stream ends at message_delta's stop_reason; the
		// message_stop a real server sends after it is drained cleanly.
		if r.Anomaly != "" {
			t.Errorf("record %d (%s): anomaly %q; a real server's stream ends cleanly", r.ID, r.Endpoint, r.Anomaly)
		}
	}
}

// A server that switches the model it names mid-run (llama-server
// restarted under another --alias, as a deployment swaps the model behind
// an endpoint) gives wrong answers from the switch on, each naming both
// models; the answers before it were right.
func TestAModelSwitchIsAWrongAnswerNamingBoth(t *testing.T) {
	srv := realserver.LlamaServer(t)
	first := srv.Model
	cfg := fmt.Sprintf(`endpoints:
  - name: llamacpp
    base_url: %s/v1
    model: default
    timeout: 60s
profiles:
  - name: switch
    endpoints: [llamacpp]
    load: {concurrency: 2, duration: 10m}
    workload: {input_tokens: {mean: 32}, output_tokens: {mean: 8}}
    failure: {abort: {min_requests: 0, unreachable_for: 2m}}
`, srv.URL)
	predicted := func() float64 {
		return pageTotal(t, srv, "llamacpp:tokens_predicted_total", func(m *dto.Metric) float64 { return m.GetCounter().GetValue() })
	}
	sums, recs, out := runAcrossRestart(t, cfg, srv, "tokens", 40, predicted, "--alias", "switched-llama")
	s := sums[0]
	if s.Success == 0 || s.WrongAnswers == 0 {
		t.Fatalf("%d right, %d wrong answers; want both:\n%s", s.Success, s.WrongAnswers, out)
	}
	t.Logf("%d right answers, %d wrong, %d errors across the switch", s.Success, s.WrongAnswers, s.Errors)
	want := fmt.Sprintf(`model: served "switched-llama", earlier %q`, first)
	seenSwitch := false
	for _, r := range recs {
		switch r.Outcome {
		case "success":
			if seenSwitch || r.ServedModel != first {
				t.Errorf("record %d: a right answer from %q after the switch", r.ID, r.ServedModel)
			}
		case "wrong_answer":
			seenSwitch = true
			if r.ServedModel != "switched-llama" || !strings.Contains(r.Error, want) {
				t.Errorf("record %d: wrong answer from %q: %q, want %q", r.ID, r.ServedModel, r.Error, want)
			}
		}
	}
}

// pageTotal is of summed over the samples of one family on the server's
// metrics page, read with the parser the probe reads servers with.
func pageTotal(t *testing.T, srv *realserver.Server, family string, of func(*dto.Metric) float64) float64 {
	t.Helper()
	fams, err := servermetrics.Parse(bytes.NewReader(srv.Get("/metrics")), expfmt.NewFormat(expfmt.TypeTextPlain))
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range fams {
		if f.GetName() == family {
			for _, m := range f.Metric {
				total += of(m)
			}
		}
	}
	return total
}

func histogramCount(m *dto.Metric) float64 { return float64(m.GetHistogram().GetSampleCount()) }

// llmdSim is llm-d-inference-sim with 4 slots, a 20 ms prefill and 10 ms
// between tokens: a vLLM look-alike whose TTFT clock starts at scheduling,
// whose histogram families appear at their first observation, and which
// exports no process start time.
func llmdSim(t *testing.T) *realserver.Server {
	return realserver.LLMDSim(t, "llmd-model", "--max-num-seqs", "4", "--prefill-overhead", "20ms",
		"--inter-token-latency", "10ms", "--seed", "1")
}

func llmdConfig(srv *realserver.Server, load string) string {
	return fmt.Sprintf(`endpoints:
  - name: llmd
    base_url: %[1]s/v1
    model: llmd-model
    timeout: 60s
    server_metrics: {url: "%[1]s/metrics", interval: 500ms}
profiles:
  - name: split
    endpoints: [llmd]
    load: %[2]s
    workload: {input_tokens: {mean: 64}, output_tokens: {mean: 32}, seed: 3}
`, srv.URL, load)
}

// serverQueueMean is the server's own mean queue time in ms over the
// requests it finished since it started, read from its page: its queue
// histogram's sum over its end-to-end histogram's count.
func serverQueueMean(t *testing.T, srv *realserver.Server) float64 {
	t.Helper()
	finished := pageTotal(t, srv, "vllm:e2e_request_latency_seconds", histogramCount)
	if finished == 0 {
		t.Fatalf("the server counted no finished request")
	}
	return 1000 * pageTotal(t, srv, "vllm:request_queue_time_seconds", func(m *dto.Metric) float64 { return m.GetHistogram().GetSampleSum() }) / finished
}

// A fresh llm-d-inference-sim at 16 streams on its 4 slots: its TTFT clock
// starts at scheduling, yet the first run's split reads its queue within 5%
// of the server's own mean and "elsewhere" within 10 ms (before, every run
// said the server's figures do not add up, by the whole queue).
func TestLLMDSimFirstRunSplitsTTFT(t *testing.T) {
	timingtest.Retry(t, 3, func(a *timingtest.Attempt) {
		srv := llmdSim(t)
		_, sums, _, out := runConfig(context.Background(), t, llmdConfig(srv, "{concurrency: 16, requests: 48}"))
		sv := sums[0].Server
		if sv == nil || sv.Breakdown == nil {
			t.Fatalf("no split:\n%s", out)
		}
		b := sv.Breakdown
		if b.ServerTTFTClock != "scheduling" || b.Mean.Outside == nil {
			t.Fatalf("clock %q, outside %v: %s", b.ServerTTFTClock, b.Mean.Outside, b.Verdict)
		}
		truth := serverQueueMean(t, srv)
		if truth < 100 || math.Abs(b.Mean.Queue-truth) > 0.05*truth {
			t.Errorf("queue %.1f ms, the server's own mean %.1f ms: want within 5%% (and a queue)", b.Mean.Queue, truth)
		}
		if e := b.Mean.Elsewhere; e > 10 {
			a.Errorf("elsewhere %.1f ms, want within 10 ms: %s", e, b.Verdict)
		}
	})
}

// A sweep over 1 to 16 streams of a fresh server splits TTFT at every
// level: below 4 streams nothing queues and the server has no queue family
// yet (it appears at the first queued request), which is 0 ms in the
// queue, not "exposes no queue-time series".
func TestLLMDSimSweepSplitsEveryLevel(t *testing.T) {
	srv := llmdSim(t)
	_, sums, _, out := runConfig(context.Background(), t, llmdConfig(srv, "{sweep: {concurrency: [1, 2, 4, 8, 16], requests: 16}}"))
	stages := sums[0].Stages
	if len(stages) != 5 {
		t.Fatalf("%d levels:\n%s", len(stages), out)
	}
	for _, st := range stages {
		sv := st.Server
		if sv == nil || sv.Breakdown == nil {
			t.Errorf("level %g: no split (%+v)", st.Level, sv)
			continue
		}
		if st.Level <= 4 && (sv.Breakdown.Mean.Queue != 0 || sv.Breakdown.Dominant != "prefill") {
			t.Errorf("level %g: %s", st.Level, sv.Breakdown.Verdict)
		}
		if st.Level >= 8 && sv.Breakdown.Dominant != "queue" {
			t.Errorf("level %g: %s", st.Level, sv.Breakdown.Verdict)
		}
	}
}

// A restart between two readings of a long interval, on a server that
// exports no process start time: every counter only rose, but the server
// counted fewer finished requests than the probe's answers, and the run's
// figures are withheld rather than given for the new process alone.
func TestLLMDSimRestartCannotHide(t *testing.T) {
	srv := llmdSim(t)
	cfg := strings.Replace(llmdConfig(srv, "{concurrency: 4, duration: 10m}"), "interval: 500ms", "interval: 10s", 1) +
		"    failure: {abort: {min_requests: 0, unreachable_for: 2m}}\n"
	finished := func() float64 { return pageTotal(t, srv, "vllm:e2e_request_latency_seconds", histogramCount) }
	sums, _, out := runAcrossRestart(t, cfg, srv, "requests", 8, finished)
	if sums[0].Server == nil {
		t.Fatalf("no server figures:\n%s", out)
	}
	if sv := sums[0].Server; !strings.Contains(sv.Err, "restarted") || sv.Breakdown != nil || sv.Queue != nil {
		t.Fatalf("a restart in the window: %+v\n%s", sv, out)
	}
}

// The case: the old process answered two requests, then was
// killed and came back between two readings of a 10 s interval. The
// server counted two fewer finished requests than the probe's answers,
// within the count's margin (a stage's last answers may be recorded after
// its closing reading), and exports no start time; the probe's own
// requests refused by its host and port while it was down show the
// restart, and the run's figures are withheld. Bounded by what the server
// and the daemon counted, not by fixed waits.
func TestLLMDSimRestartAfterTwoAnswersCannotHide(t *testing.T) {
	srv := llmdSim(t)
	// One stream of 64-token answers (about 0.7 s each): polled every
	// 50 ms, the second answer is seen before a third ends.
	cfg := strings.NewReplacer("interval: 500ms", "interval: 10s", "output_tokens: {mean: 32}", "output_tokens: {mean: 64}").
		Replace(llmdConfig(srv, "{concurrency: 1, duration: 12s}")) + "    schedule: {manual: true}\n"
	file := filepath.Join(t.TempDir(), "tokenprobe.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	d, err := daemon.New(daemon.Options{ConfigFile: file, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
	}()
	if _, err := d.RunNow("split", ""); err != nil {
		t.Fatal(err)
	}
	var rec daemon.RunRecord
	runEnded := func() bool {
		recent, _ := d.History().Runs()
		for _, r := range recent {
			if r.Profile == "split" && r.Finished() {
				rec = r
				return true
			}
		}
		return false
	}
	finished := func() float64 { return pageTotal(t, srv, "vllm:e2e_request_latency_seconds", histogramCount) }
	waitUntilEvery(t, 50*time.Millisecond, "the server's second answer", func() bool { return finished() >= 2 }, runEnded)
	old := finished()
	srv.Stop()
	refused := func() float64 {
		mfs, _ := reg.Gather()
		n := 0.0
		for _, mf := range mfs {
			if mf.GetName() != "tokenprobe_request_errors_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "reason" && l.GetValue() == "connect" {
						n += m.GetCounter().GetValue()
					}
				}
			}
		}
		return n
	}
	timingtest.Until(t, func() string { return "a request of the probe refused while the server is down" }, func() bool { return refused() > 0 }, runEnded)
	srv.Restart()
	timingtest.Until(t, func() string { return "the run to end" }, runEnded, nil)
	sv := rec.Summary.Server
	t.Logf("old process answered %g; the run: %d answers, %d errors; server: %+v", old, rec.Summary.Success, rec.Summary.Errors, sv)
	if old > 2 {
		t.Skipf("the old process answered %g before it was stopped: the case is two or fewer", old)
	}
	if sv == nil || !strings.Contains(sv.Err, "restarted") || sv.Breakdown != nil || sv.Queue != nil {
		t.Fatalf("a restart after two answers in a 10 s interval: %+v", sv)
	}
}

// Two llm-d-inference-sim replicas behind no load balancer, each page
// named: the run's server figures are the two pooled (their finished
// requests the probe's answers, none read as a restart) and each
// replica's against its half of the requests.
func TestLLMDSimTwoReplicasPooledAndSplit(t *testing.T) {
	a, b := llmdSim(t), llmdSim(t)
	cfg := fmt.Sprintf(`endpoints:
  - name: pair
    base_urls: [%[1]s/v1, %[2]s/v1]
    model: llmd-model
    timeout: 60s
    server_metrics: {urls: [%[1]s/metrics, %[2]s/metrics], interval: 500ms}
profiles:
  - name: split
    endpoints: [pair]
    load: {concurrency: 8, requests: 48}
    workload: {input_tokens: {mean: 64}, output_tokens: {mean: 16}, seed: 3}
`, a.URL, b.URL)
	code, sums, _, out := runConfig(context.Background(), t, cfg)
	if code != 0 || len(sums) != 1 || sums[0].Server == nil {
		t.Fatalf("exit %d, %d runs:\n%s", code, len(sums), out)
	}
	sv := sums[0].Server
	if sv.Err != "" || sv.Population != float64(sums[0].Success) || len(sv.Replicas) != 2 {
		t.Fatalf("pooled: err %q, %v finished of the probe's %d answers, %d replicas\n%s", sv.Err, sv.Population, sums[0].Success, len(sv.Replicas), out)
	}
	for i, r := range sv.Replicas {
		if r.Err != "" || r.Population != float64(sums[0].Success)/2 {
			t.Errorf("replica %d (%s): err %q, %v finished of the probe's %d answers", i+1, r.Replica, r.Err, r.Population, sums[0].Success)
		}
	}
	if sv.Breakdown == nil {
		t.Fatalf("no pooled split: %s", sv.Note)
	}
	t.Logf("pooled: %s", sv.Breakdown.Verdict)
}

// waitUntilEvery waits for cond, polling every step (timingtest.Until's
// polling grows to half a second), and fails once seen says it will not
// hold (the run ended first), or after timingtest.HangGuard.
func waitUntilEvery(t *testing.T, step time.Duration, what string, cond, seen func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timingtest.HangGuard); time.Now().Before(deadline); time.Sleep(step) {
		done := seen()
		if cond() {
			return
		}
		if done {
			t.Fatalf("%s: not seen before the run ended", what)
		}
	}
	t.Fatalf("timed out after %v (hung?) waiting for %s", timingtest.HangGuard, what)
}

// A JSON Schema check through llama-server's own grammar: the
// response_format tokenprobe sends is one llama.cpp turns into a grammar,
// and every answer, though of random weights, meets the schema. (Its Jinja
// path, the only one with tools, failed at de3ff81 on this model: "Failed
// to initialize samplers" for any JSON grammar, and tool_choice required
// answered plain text; docs/MEASUREMENT.md says so.)
func TestLlamaServerMeetsAJSONSchemaThroughItsGrammar(t *testing.T) {
	srv := realserver.LlamaServer(t, "--no-jinja", "--chat-template", "chatml")
	dir := t.TempDir()
	schema := `{"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 9}},
  "required": ["ok", "n"], "additionalProperties": false}`
	if err := os.WriteFile(filepath.Join(dir, "schema.json"), []byte(schema), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`endpoints:
  - name: llamacpp
    base_url: %s/v1
    model: default
    timeout: 60s
profiles:
  - name: schema
    endpoints: [llamacpp]
    load: {concurrency: 4, requests: 12}
    workload: {input_tokens: {mean: 32}, output_tokens: {mean: 64}}
    checks: {json_schema: %s, finish_reason: [stop]}
`, srv.URL, filepath.Join(dir, "schema.json"))
	code, sums, recs, out := runConfig(context.Background(), t, cfg)
	if code != runonce.ExitOK || sums[0].WrongAnswers != 0 || sums[0].Success != 12 {
		t.Fatalf("exit %d, %d right, %d wrong:\n%s", code, sums[0].Success, sums[0].WrongAnswers, out)
	}
	for _, r := range recs {
		if len(r.Checks) < 3 {
			t.Fatalf("record %d judged by %v: want model, finish_reason and json_schema", r.ID, r.Checks)
		}
	}
}

// TestRealServersFailuresGetTheirReasons: each failure llm-d-inference-sim
// injects (its --failure-types, OpenAI's error shapes), and llama-server's
// own refusal of a prompt over its context, reach summary.json under the
// reason an on-call engineer routes by: the reading of error bodies tried
// on servers that are not ours.
func TestRealServersFailuresGetTheirReasons(t *testing.T) {
	want := map[string]string{
		"rate_limit": "rate_limit", "invalid_api_key": "auth", "context_length": "context_length",
		"server_error":    "overloaded", // "The server is overloaded or not ready yet." with a 503
		"invalid_request": "bad_request", "model_not_found": "model_not_found",
	}
	reasons := func(sums []stats.Summary) []string {
		var out []string
		for _, f := range sums[0].Failures {
			out = append(out, fmt.Sprintf("%s×%d", f.Reason, f.Count))
		}
		return out
	}
	srv := realserver.LLMDSim(t, "llmd-model", "--failure-injection-rate", "100", "--failure-types", "rate_limit")
	for _, ft := range []string{"rate_limit", "invalid_api_key", "context_length", "server_error", "invalid_request", "model_not_found"} {
		if ft != "rate_limit" {
			srv.Restart("--failure-injection-rate", "100", "--failure-types", ft)
		}
		_, sums, _, out := runConfig(context.Background(), t, fmt.Sprintf(`endpoints:
  - {name: llmd, base_url: %s/v1, model: llmd-model, timeout: 30s}
profiles:
  - name: failing
    endpoints: [llmd]
    load: {concurrency: 1, requests: 3}
    failure: {backoff: {base: 1ms, max: 1ms}, retry_after_max: 0s}
    workload: {input_tokens: {mean: 16}, output_tokens: {mean: 4}}
`, srv.URL))
		got := reasons(sums)
		t.Logf("llm-d-inference-sim --failure-types %s: %v", ft, got)
		if len(got) != 1 || !strings.HasPrefix(got[0], want[ft]+"×") {
			t.Errorf("llm-d-inference-sim --failure-types %s: failures %v, want all %s\n%s", ft, got, want[ft], out)
		}
	}

	// llama-server's slots hold 1,024 tokens each (-c 4096 -np 4).
	llama := realserver.LlamaServer(t)
	_, sums, _, out := runConfig(context.Background(), t, fmt.Sprintf(`endpoints:
  - {name: llama, base_url: %s/v1, model: tiny-llama, timeout: 60s}
profiles:
  - name: too-long
    endpoints: [llama]
    load: {concurrency: 1, requests: 2}
    failure: {backoff: {base: 1ms, max: 1ms}}
    workload: {input_tokens: {mean: 3000}, output_tokens: {mean: 4}}
`, llama.URL))
	got := reasons(sums)
	t.Logf("llama-server, a prompt over its context: %v", got)
	if len(got) != 1 || !strings.HasPrefix(got[0], "context_length×") {
		t.Errorf("llama-server, a prompt over its context: failures %v, want all context_length\n%s", got, out)
	}
}
