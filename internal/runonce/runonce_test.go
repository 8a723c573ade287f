package runonce

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/exporter/otlp/otlptest"
	"github.com/tokenprobe/tokenprobe/internal/browsertest"
	"github.com/tokenprobe/tokenprobe/internal/hostile"
	"github.com/tokenprobe/tokenprobe/internal/redact"
	"github.com/tokenprobe/tokenprobe/internal/sim"
	"github.com/tokenprobe/tokenprobe/internal/sink/records"
	"github.com/tokenprobe/tokenprobe/internal/timingtest"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

const fastSim = `
endpoints:
  - name: sim
    simulator: {slots: 4, decode_base: 2ms, prefill_base: 1ms, prefill_per_token: 10us, seed: 1}
`

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokenprobe.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runCLI(t *testing.T, o Options) (int, string, string) {
	t.Helper()
	return runCLIContext(context.Background(), t, o)
}

func runCLIContext(ctx context.Context, t *testing.T, o Options) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	o.Out, o.Progress = &out, &errOut
	code := Run(ctx, o)
	return code, out.String(), errOut.String()
}

// closedPort is a local address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	addr, err := hostile.ClosedAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func TestExitCodes(t *testing.T) {
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	closed := closedPort(t)
	// impossible misses its TTFT by 200 ms a request, far past what a
	// busy machine's stalls of the probe could explain (a miss within the
	// probe's own delay is no evidence against the server).
	cfg := writeConfig(t, fastSim+`  - name: slow
    simulator: {slots: 4, decode_base: 2ms, prefill_base: 300ms, seed: 1}
profiles:
  - name: easy
    endpoints: [sim]
    load: {concurrency: 2, requests: 40}
    workload: {output_tokens: {mean: 8}}
    slo: {ttft: 5s, objective: 0.9}
  - name: impossible
    endpoints: [slow]
    load: {concurrency: 2, requests: 10}
    workload: {output_tokens: {mean: 8}}
    slo: {ttft: 100ms, objective: 0.9}
  - name: few
    endpoints: [sim]
    load: {concurrency: 2, requests: 10}
    workload: {output_tokens: {mean: 8}}
    slo: {ttft: 5s, objective: 0.9}
`)
	cases := []struct {
		name     string
		o        Options
		code     int
		inOutput string
	}{
		{"objective met", Options{ConfigFile: cfg, Profiles: []string{"easy"}}, ExitOK, "objective 90.0%: PASSED"},
		{"objective missed", Options{ConfigFile: cfg, Profiles: []string{"impossible"}}, ExitSLOFailed, "objective 90.0%: FAILED"},
		{"one of three missed", Options{ConfigFile: cfg}, ExitSLOFailed, "profile impossible"},
		// Ten good requests cannot show 90%: the run says so and exits 4,
		// or as --not-enough-evidence says.
		{"not enough evidence", Options{ConfigFile: cfg, Profiles: []string{"few"}}, ExitUndecided, "95% interval 72.2% to 100.0% of 10 requests (objective 90.0%: NOT ENOUGH EVIDENCE)"},
		{"a note before it, at the count", Options{ConfigFile: cfg, Profiles: []string{"few"}}, ExitUndecided, "note: " + cfg + ":20:28: profiles[2].load.requests: a run of 10 requests can never show the 90.0% objective met: it takes at least 35"},
		{"not enough evidence as a pass", Options{ConfigFile: cfg, Profiles: []string{"few"}, Undecided: UndecidedPass}, ExitOK, "about 35 requests would decide it"},
		{"not enough evidence as a failure", Options{ConfigFile: cfg, Profiles: []string{"few"}, Undecided: UndecidedFail}, ExitSLOFailed, "NOT ENOUGH EVIDENCE"},
		{"a failure outranks not enough evidence", Options{ConfigFile: cfg, Profiles: []string{"few", "impossible"}}, ExitSLOFailed, "profile impossible"},
		{"unknown profile", Options{ConfigFile: cfg, Profiles: []string{"nope"}}, ExitConfig, `no profile is named "nope" (profiles: easy, impossible, few)`},
		{"unknown endpoint", Options{ConfigFile: cfg, Endpoint: "vllm"}, ExitConfig, `no profile runs on endpoint "vllm"`},
		{"invalid config", Options{ConfigFile: writeConfig(t, "endpoints: []\nprofiles: [{name: p, load: {rate: -1}}]\n")}, ExitConfig, "tokenprobe.yaml:2:"},
		{"missing file", Options{ConfigFile: "/nonexistent/tokenprobe.yaml"}, ExitConfig, "no such file"},
		// Broken runs are errors with or without an slo block.
		{"all failed, no slo", Options{ConfigFile: writeConfig(t, `
endpoints: [{name: e, base_url: "`+notFound.URL+`", model: m}]
profiles: [{name: p, load: {concurrency: 2, requests: 6}}]
`)}, ExitRuntime, "404 from a base_url without /v1"},
		{"unreachable", Options{ConfigFile: writeConfig(t, `
endpoints: [{name: e, base_url: "http://`+closed+`/v1", model: m}]
profiles: [{name: p, load: {concurrency: 2, requests: 6}}]
`)}, ExitRuntime, "no request succeeded"},
		{"aborted", Options{ConfigFile: writeConfig(t, `
endpoints: [{name: e, base_url: "http://`+closed+`/v1", model: m}]
profiles: [{name: p, load: {concurrency: 8, duration: 30s}}]
`)}, ExitRuntime, "aborted: "},
		{"interrupted", Options{ConfigFile: cfg, Profiles: []string{"easy"}}, ExitRuntime, "tokenprobe: interrupted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.name == "interrupted" {
				cancel() // before the first run; TestInterruptKeepsTheResults interrupts one going
			}
			code, out, errOut := runCLIContext(ctx, t, c.o)
			if code != c.code || !strings.Contains(out+errOut, c.inOutput) {
				t.Fatalf("exit %d, want %d; output lacks %q:\n%s\n%s", code, c.code, c.inOutput, out, errOut)
			}
		})
	}
}

// The artifacts of a run agree with each other: one record per measured
// request, and the summary's counts recomputed from the records.
func TestArtifacts(t *testing.T) {
	cfg := writeConfig(t, `
endpoints:
  - name: sim
    simulator: {slots: 8, decode_base: 2ms, seed: 3, faults: {error_500: 0.2, malformed: 0.1}}
profiles:
  - name: mixed
    load: {rate: 50, arrival: poisson, requests: 60, warmup_requests: 5, seed: 2}
    workload: {input_tokens: {mean: 50, stddev: 10}, output_tokens: {mean: 10}}
    slo: {ttft: 1s, itl: 100ms}
`)
	dir := t.TempDir()
	code, out, errOut := runCLI(t, Options{ConfigFile: cfg, ArtifactsDir: dir, ProgressEvery: 50 * time.Millisecond})
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "done · ") {
		t.Errorf("no progress lines: %s", errOut)
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "*", "mixed-sim"))
	if len(runs) != 1 {
		t.Fatalf("run folders: %v", runs)
	}
	var s stats.Summary
	readJSON(t, filepath.Join(runs[0], "summary.json"), &s)
	var n, success, good, errs int
	reasons := map[string]int{}
	for _, r := range readRecords(t, filepath.Join(runs[0], "records.jsonl")) {
		n++
		switch r.Outcome {
		case "success":
			success++
			if r.TTFTMs == nil || r.ITLMs == nil || len(r.InterChunkMs) != r.ContentChunks-1 {
				t.Errorf("success record lacks timings: %+v", r)
			}
		case "error":
			errs++
			reasons[r.Reason]++
		}
		if r.Good {
			good++
		}
	}
	if n != 60 || n != s.Requests || success != s.Success || errs != s.Errors || good != s.Good {
		t.Fatalf("records: %d requests %d success %d errors %d good; summary %+v", n, success, errs, good, s)
	}
	if reasons["server_error"] != s.ByReason["server_error"] || reasons["stream"] != s.ByReason["stream"] || errs == 0 {
		t.Fatalf("reasons %v vs %v", reasons, s.ByReason)
	}
	var all []stats.Summary
	readJSON(t, filepath.Join(filepath.Dir(runs[0]), "summary.json"), &all)
	if len(all) != 1 || all[0].Requests != 60 {
		t.Fatalf("top-level summary: %+v", all)
	}
	if _, err := os.Stat(filepath.Join(runs[0], "report.txt")); err != nil {
		t.Fatal(err)
	}
}

// summaries reads the top-level summary.json of the one invocation whose
// artifacts are under dir, and returns the folder it is in.
func summaries(t *testing.T, dir string) ([]stats.Summary, string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*", "summary.json"))
	if len(files) != 1 {
		t.Fatalf("summaries: %v", files)
	}
	var all []stats.Summary
	readJSON(t, files[0], &all)
	return all, filepath.Dir(files[0])
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// `tokenprobe run` on the shipped demo reproduces the queueing cliff the
// README shows: past the simulator's 4 slots TTFT p50 grows more than 5x,
// ITL p50 less than 1.5x, and goodput at the TTFT objective collapses while
// throughput does not.
func TestDemoShowsTheCliff(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo for about 20 s")
	}
	timingtest.Retry(t, 2, func(a *timingtest.Attempt) {
		dir := t.TempDir()
		code, out, errOut := runCLI(t, Options{ConfigFile: "../../configs/demo.yaml", Profiles: []string{"baseline", "overload"}, ArtifactsDir: dir})
		if code != ExitSLOFailed && code != ExitOK {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
		all, _ := summaries(t, dir)
		if len(all) != 2 || all[0].Profile != "baseline" || all[1].Profile != "overload" {
			t.Fatalf("summaries: %+v", all)
		}
		low, high := all[0], all[1]
		t.Logf("baseline: TTFT p50 %.0f ms, ITL p50 %.1f ms, %.2f req/s, goodput %.2f", low.TTFT.P50, low.ITL.P50, low.RequestThroughput, low.Goodput)
		t.Logf("overload: TTFT p50 %.0f ms, ITL p50 %.1f ms, %.2f req/s, goodput %.2f", high.TTFT.P50, high.ITL.P50, high.RequestThroughput, high.Goodput)
		if code != ExitSLOFailed {
			a.Errorf("exit %d, want %d (overload misses its objective)", code, ExitSLOFailed)
		}
		if high.TTFT.P50 < 5*low.TTFT.P50 || high.ITL.P50 > 1.5*low.ITL.P50 {
			a.Errorf("no cliff: TTFT %.0f -> %.0f ms, ITL %.1f -> %.1f ms", low.TTFT.P50, high.TTFT.P50, low.ITL.P50, high.ITL.P50)
		}
		if !low.Passed || high.Passed || high.Goodput > 0.5*low.Goodput || high.RequestThroughput < low.RequestThroughput {
			a.Errorf("goodput %.2f -> %.2f, throughput %.2f -> %.2f", low.Goodput, high.Goodput, low.RequestThroughput, high.RequestThroughput)
		}
	})
}

// With an otlp block, a one-shot run pushes every measured request before
// it exits.
func TestPushesOTLP(t *testing.T) {
	rc := otlptest.Start()
	defer rc.Close()
	cfg := writeConfig(t, fastSim+`
otlp: {endpoint: "`+rc.URL+`", interval: 1h}
profiles:
  - name: pushed
    load: {concurrency: 3, requests: 25}
    workload: {output_tokens: {mean: 6}}
`)
	code, out, errOut := runCLI(t, Options{ConfigFile: cfg})
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	got, _ := rc.Last()
	if n := otlptest.HistogramCount(got["gen_ai.client.operation.duration"]); n != 25 {
		t.Fatalf("collector got %d operations, want 25 (metrics: %d)", n, len(got))
	}
	if n := otlptest.HistogramCount(got["gen_ai.client.operation.time_per_output_chunk"]); n != 25*5 {
		t.Fatalf("collector got %d chunk gaps, want 125", n)
	}
}

// With a tracing block, a run's sampled requests are spans in the
// collector whose trace ids are the records' and the traceparents', and
// under each the built-in simulator's server span.
func TestPushesSpans(t *testing.T) {
	rc := otlptest.Start()
	defer rc.Close()
	cfg := writeConfig(t, fastSim+`
otlp: {endpoint: "`+rc.URL+`", interval: 1h}
tracing: {sample: 1}
profiles:
  - name: traced
    load: {concurrency: 2, requests: 10}
    workload: {output_tokens: {mean: 4}}
`)
	dir := t.TempDir()
	if code, out, errOut := runCLI(t, Options{ConfigFile: cfg, ArtifactsDir: dir}); code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	// The probe's spans by trace, and the simulator's server spans (a
	// simulator block's, as vLLM's) by their parent.
	spans, servers := map[string]string{}, map[string]string{}
	for _, s := range rc.Spans() {
		if s.Name == "llm_request" {
			servers[hex.EncodeToString(s.TraceId)] = hex.EncodeToString(s.ParentSpanId)
			continue
		}
		spans[hex.EncodeToString(s.TraceId)] = hex.EncodeToString(s.SpanId)
	}
	recs, _ := filepath.Glob(filepath.Join(dir, "*", "*", "records.jsonl"))
	if len(recs) != 1 {
		t.Fatalf("records %v", recs)
	}
	b, _ := os.ReadFile(recs[0])
	n := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		var rec struct {
			TraceID string `json:"trace_id"`
			SpanID  string `json:"span_id"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.TraceID == "" || spans[rec.TraceID] != rec.SpanID {
			t.Errorf("record with trace %q span %q: the collector has span %q for it", rec.TraceID, rec.SpanID, spans[rec.TraceID])
		}
		if servers[rec.TraceID] != rec.SpanID {
			t.Errorf("record with trace %q span %q: the simulator's server span has parent %q", rec.TraceID, rec.SpanID, servers[rec.TraceID])
		}
		n++
	}
	if n != 10 || len(spans) != 11 { // ten requests and their run
		t.Fatalf("%d records, %d traces in the collector; want 10 and 11", n, len(spans))
	}
}

// Replaying the first minutes of the shared Mooncake trace sends every
// request of the window at its timestamp divided by the speed-up, and the
// report shows how late. The schedule is checked exactly, from the records
// (scheduled = start - dispatch lag) against the trace file read here; the
// lateness only against a bound that catches a dispatcher falling behind
// for good (requests waiting on each other, a schedule drifting), as this
// test shares two cores with other test binaries under the race detector.
// The 5 ms dispatch-lag bar is measured by `make bench` (docs/BENCHMARKS.md).
func TestMooncakeReplayKeepsToSchedule(t *testing.T) {
	const trace = "../../../shared/datasets/mooncake_conversation_trace.jsonl"
	if _, err := os.Stat(trace); err != nil {
		if os.Getenv("TOKENPROBE_REQUIRE_DATASETS") != "" {
			t.Fatalf("%s: %v", trace, err)
		}
		t.Skip("the shared datasets are not beside the checkout")
	}
	if testing.Short() {
		t.Skip("replays 60 s of trace")
	}
	abs, _ := filepath.Abs(trace)
	stamps := traceTimestamps(t, abs)
	for _, c := range []struct {
		name    string
		to      time.Duration
		speedup int
	}{{"own pace", 30 * time.Second, 1}, {"10x", 300 * time.Second, 10}} {
		t.Run(c.name, func(t *testing.T) {
			var want []time.Duration // send offsets, from the file
			for _, ms := range stamps {
				if at := time.Duration(ms) * time.Millisecond; at < c.to {
					want = append(want, at/time.Duration(c.speedup))
				}
			}
			cfg := writeConfig(t, fmt.Sprintf(`
endpoints:
  - name: sim
    simulator: {slots: 1024, prefill_base: 1ms, prefill_per_token: 1us, decode_base: 2ms, tokens_per_chunk: 16}
profiles:
  - name: mooncake
    workload:
      trace: {file: %q, speedup: %d, to: %s}
`, abs, c.speedup, c.to))
			dir := t.TempDir()
			code, out, errOut := runCLI(t, Options{ConfigFile: cfg, ArtifactsDir: dir})
			if code != ExitOK {
				t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
			}
			all, folder := summaries(t, dir)
			s := all[0]
			t.Logf("%d requests, dispatch lag p50 %.3f ms p99 %.3f ms max %.3f ms, %d errors", s.Requests, s.DispatchLag.P50, s.DispatchLag.P99, s.DispatchLag.Max, s.Errors)
			if s.Requests != len(want) || s.Success != len(want) {
				t.Errorf("%d requests, %d successes; the window holds %d", s.Requests, s.Success, len(want))
			}
			if !strings.Contains(out, "Dispatch lag p99") {
				t.Error("the report does not show the dispatch lag")
			}
			// The sim counts a word a token: prompt sizing is exact.
			if s.InputLengthError.Count == 0 || s.InputLengthError.Max != 0 || s.InputLengthError.Min != 0 {
				t.Errorf("input length error %+v", s.InputLengthError)
			}

			var scheduled []time.Duration
			for _, r := range readRecords(t, filepath.Join(folder, "mooncake-sim", "records.jsonl")) {
				if r.DispatchLagMs < 0 {
					t.Errorf("request %d sent %.3f ms before its time", r.ID, -r.DispatchLagMs)
				}
				scheduled = append(scheduled, time.Duration(math.Round(r.ScheduledMs*float64(time.Millisecond))))
			}
			if len(scheduled) != len(want) {
				t.Fatalf("%d records, want %d", len(scheduled), len(want))
			}
			slices.Sort(scheduled)
			// Each request's place in the replay, on the monotonic clock
			// (a wall clock the machine steps moves none of them), is the
			// trace's own offset over the speedup; the send itself is held
			// by the lag, next.
			for i := range want {
				got, at := scheduled[i]-scheduled[0], want[i]-want[0]
				if d := got - at; d < -time.Microsecond || d > time.Microsecond {
					t.Fatalf("request %d scheduled %v into the replay, the trace says %v (off by %v)", i, got, at, d)
				}
			}
			// Lateness that grows over the replay, or most requests late by
			// a whole gap of the trace, is a broken dispatcher; a pause of
			// the machine is neither.
			switch {
			case raceDetector && c.speedup > 1:
				// Under -race, building 14,000-word prompts 30 times a second
				// outruns the lookahead (a CI run: p50 262 ms, max 8.5 s); the
				// lag measures the detector.
				t.Logf("race detector on: dispatch lag not held to a bound at %dx", c.speedup)
			case s.DispatchLag.P50 > 100 || s.DispatchLag.Max > 2000:
				t.Errorf("dispatch lag p50 %.1f ms, max %.1f ms: the schedule is not kept", s.DispatchLag.P50, s.DispatchLag.Max)
			}
		})
	}
}

// traceTimestamps reads the timestamps (ms) of a Mooncake trace file.
func traceTimestamps(t *testing.T, path string) []int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []int64
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var row struct {
			Timestamp int64 `json:"timestamp"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		out = append(out, row.Timestamp)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// records reads a run's records.jsonl.
func readRecords(t *testing.T, path string) []records.Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []records.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r records.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A concurrency sweep against the simulator with 4 slots finds capacity at
// SLO at the slot count (within one level), and the TTFT cliff just past it.
// TTFT is about 10 ms up to 4 in flight and about 90 ms past them (a
// request waits for a slot's 90 ms of work): the 60 ms SLO is 50 ms away
// from the floor, more than a busy machine's pauses.
func TestSweepFindsTheKnee(t *testing.T) {
	cfg := writeConfig(t, `
endpoints:
  - name: sim
    simulator: {slots: 4, prefill_base: 5ms, prefill_per_token: 50us, decode_base: 5ms, seed: 1}
profiles:
  - name: sweep
    load:
      sweep: {concurrency: [1, 2, 4, 8, 16], requests: 40}
    workload: {input_tokens: {mean: 100}, output_tokens: {mean: 16}}
    slo: {ttft: 60ms, objective: 0.9}
`)
	var runDir string
	timingtest.Retry(t, 3, func(a *timingtest.Attempt) {
		dir := t.TempDir()
		code, out, errOut := runCLI(t, Options{ConfigFile: cfg, ArtifactsDir: dir})
		if code != ExitSLOFailed {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
		var all []stats.Summary
		all, runDir = summaries(t, dir)
		k := all[0].Knee
		if k == nil || len(all[0].Stages) != 5 {
			t.Fatalf("no knee, %d stages", len(all[0].Stages))
		}
		t.Logf("capacity at SLO %g, cliff at %g (TTFT x%.1f, ITL x%.2f)", k.CapacityAtSLO, k.CliffLevel, k.TTFTRatio, k.ITLRatio)
		if k.CapacityAtSLO < 2 || k.CapacityAtSLO > 8 {
			a.Errorf("capacity at SLO %g, want 4 (the slot count) within one level", k.CapacityAtSLO)
		}
		if k.CliffLevel < 4 || k.CliffLevel > 16 {
			a.Errorf("cliff at %g, want just past the 4 slots", k.CliffLevel)
		}
		if !a.Failed() && (!strings.Contains(out, "Capacity at SLO") || !strings.Contains(out, "TTFT cliff")) {
			t.Errorf("the report does not show the knee:\n%s", out)
		}
	})
	if t.Failed() {
		return
	}

	// The HTML report, rendered by a real browser, has the curves against
	// load with the cliff marked, and the distributions.
	html := filepath.Join(runDir, "report.html")
	dom := browsertest.Render(t, browsertest.Chromium(t), "file://"+html, "--dump-dom")
	curves := regexp.MustCompile(`(?s)<div class="charts curves">.*?</div>`).FindString(dom)
	if strings.Count(curves, "<svg") != 3 || strings.Count(curves, `class="series"`) != 6 || !strings.Contains(curves, "TTFT cliff") {
		t.Fatalf("the report's curves: %d charts, %d series, cliff marked %v", strings.Count(curves, "<svg"),
			strings.Count(curves, `class="series"`), strings.Contains(curves, "TTFT cliff"))
	}
	if strings.Count(dom, "distribution") < 3 {
		t.Error("the report lacks the distributions")
	}
}

// With a dcgm-exporter to read, the report carries GPU figures over the
// run, energy per output token among them.
func TestRunReportsGPUFromADCGMExporter(t *testing.T) {
	var mu sync.Mutex
	energy := 5e9 // mJ, rising 200 J per scrape
	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		energy += 2e5
		e := energy
		mu.Unlock()
		l := `{gpu="0",UUID="GPU-1",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA H200",Hostname="n1"}`
		fmt.Fprintf(w, "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\nDCGM_FI_DEV_GPU_UTIL%s 75\n# TYPE DCGM_FI_DEV_POWER_USAGE gauge\nDCGM_FI_DEV_POWER_USAGE%s 500\n# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION%s %g\n", l, l, l, e)
	}))
	defer exporter.Close()
	cfg := writeConfig(t, fastSim+`
gpu: {source: dcgm-exporter, url: "`+exporter.URL+`/metrics", interval: 50ms}
profiles:
  - name: g
    load: {concurrency: 2, requests: 30}
    workload: {output_tokens: {mean: 10}}
`)
	dir := t.TempDir()
	code, out, errOut := runCLI(t, Options{ConfigFile: cfg, ArtifactsDir: dir})
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	all, _ := summaries(t, dir)
	g := all[0].GPU
	if g == nil || g.Samples < 2 || g.UtilAvg != 75 || g.PowerAvg != 500 || g.EnergyJoules < 200 {
		t.Fatalf("GPU report %+v", g)
	}
	// Energy per token is the counter's rise over the run's output tokens.
	if want := g.EnergyJoules / float64(all[0].OutputTokens); all[0].OutputTokens != 300 || g.JoulesPerOutputToken != want {
		t.Fatalf("%d output tokens, %v J/token, want %v", all[0].OutputTokens, g.JoulesPerOutputToken, want)
	}
	if !strings.Contains(out, "GPU energy") {
		t.Errorf("the report lacks the GPU energy line:\n%s", out)
	}
}

// Keys that hostile endpoints echo back (in a 401 body, an error event, a
// good stream's content) appear in no output of a one-shot run either:
// console, progress, records, summaries, reports.
func TestEchoedKeyAppearsInNoOutput(t *testing.T) {
	const key, headerSecret = "sk-echoed-planted-4d2c8b", "gw-cookie-planted-e1f07a"
	// A query value under a name no credential list holds: the 401 echoes
	// the request line, query and all.
	const queryValue = "qv-planted-7f3e91"
	t.Setenv("TOKENPROBE_RUNONCE_KEY", key)
	t.Setenv("TOKENPROBE_RUNONCE_COOKIE", headerSecret)
	h, err := hostile.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var b strings.Builder
	b.WriteString("endpoints:\n")
	names := []string{hostile.Echo401, hostile.EchoEvent, hostile.EchoContent}
	for _, n := range names {
		fmt.Fprintf(&b, "  - {name: %s, base_url: '%s?session=%s&api-version=2024-06-01', model: m, api_key_env: TOKENPROBE_RUNONCE_KEY, headers: {Cookie: {env: TOKENPROBE_RUNONCE_COOKIE}}}\n", n, h.URL(n), queryValue)
	}
	b.WriteString("profiles:\n  - name: p\n    endpoints: [" + strings.Join(names, ", ") + "]\n    load: {concurrency: 2, requests: 6}\n")
	dir := t.TempDir()
	_, out, errOut := runCLI(t, Options{ConfigFile: writeConfig(t, b.String()), ArtifactsDir: dir, ProgressEvery: 10 * time.Millisecond})
	texts := outputs(dir, out, errOut)
	redacted := 0
	for name, text := range texts {
		if strings.HasSuffix(name, "records.jsonl") && strings.Contains(text, redact.Marker) {
			redacted++
		}
	}
	if !strings.Contains(out, "auth") || redacted != 2 {
		t.Fatalf("the echoed errors were not recorded (%d records files with redacted errors, want 2):\n%s", redacted, out)
	}
	for name, text := range texts {
		for _, secret := range []string{key, headerSecret, key[:10], headerSecret[:10], queryValue} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contains %q", name, secret)
			}
		}
	}
}

// outputs is every text a one-shot run wrote: its console, its progress
// and every file under its artifacts folder, by name.
func outputs(dir, out, errOut string) map[string]string {
	texts := map[string]string{"stdout": out, "stderr": errOut}
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			b, _ := os.ReadFile(p)
			texts[p] = string(b)
		}
		return nil
	})
	return texts
}

// A planted API key appears in none of a one-shot run's outputs: records,
// summaries, report, progress and console, with failures to log.
func TestKeyAppearsInNoOutput(t *testing.T) {
	const key = "sk-runonce-planted-91ab"
	t.Setenv("TOKENPROBE_RUNONCE_KEY", key)
	cfg := writeConfig(t, `
endpoints:
  - name: sim
    api_key_env: TOKENPROBE_RUNONCE_KEY
    simulator: {slots: 4, decode_base: 1ms, seed: 2, faults: {error_500: 0.2, error_429: 0.2, malformed: 0.2}}
profiles:
  - name: p
    load: {concurrency: 2, requests: 40}
    workload: {output_tokens: {mean: 6}}
`)
	dir := t.TempDir()
	_, out, errOut := runCLI(t, Options{ConfigFile: cfg, ArtifactsDir: dir, ProgressEvery: 10 * time.Millisecond})
	texts := outputs(dir, out, errOut)
	if len(texts) < 5 || !strings.Contains(out, "rate_limit") {
		t.Fatalf("%d outputs; errors not reported: %s", len(texts), out)
	}
	for name, text := range texts {
		if strings.Contains(text, key) {
			t.Errorf("%s contains the API key", name)
		}
	}
}

// Runs started in the same second keep their own artifacts: the second
// gets the next folder instead of overwriting the first's summary.
func TestRunsInTheSameSecondDoNotShareAFolder(t *testing.T) {
	parent := t.TempDir()
	start := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	var dirs []string
	for range 3 {
		dir, err := newRunDir(parent, start)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, filepath.Base(dir))
	}
	if dirs[0] != "20261123-100000" || dirs[1] != "20261123-100000-2" || dirs[2] != "20261123-100000-3" {
		t.Fatalf("folders %v", dirs)
	}
}

// The shipped known-answer profile passes against the simulator that
// knows its answers, and fails on the expect check, exit 1, when the
// simulator answers in words of no language.
func TestKnownAnswers(t *testing.T) {
	shipped, err := os.ReadFile("../../configs/known-answers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	datasets, err := filepath.Abs("../../configs/datasets")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		faults string
		code   int
		inOut  string
	}{
		{"", ExitOK, "expect                     36 of 36 (100.0%)"},
		{"\n      faults: {garbage: 1}", ExitSLOFailed, "expect                     0 of 36 (0.0%)"},
	} {
		body := strings.ReplaceAll(string(shipped), "datasets/", datasets+"/")
		body = strings.Replace(body, "      answers: "+datasets+"/known-answers.sim.jsonl", "      answers: "+datasets+"/known-answers.sim.jsonl"+c.faults, 1)
		body = strings.Replace(body, "decode_base: 10ms", "decode_base: 1ms", 1)
		code, out, errOut := runCLI(t, Options{ConfigFile: writeConfig(t, body)})
		if code != c.code || !strings.Contains(out, c.inOut) {
			t.Errorf("faults %q: exit %d, want %d; output lacks %q:\n%s\n%s", c.faults, code, c.code, c.inOut, out, errOut)
		}
	}
}

// The seeds' own workflow: one user, then many, as two profiles of one
// invocation. The report compares them as a staircase's stages and calls
// the cliff (sixteen in flight on two slots: most wait a whole answer).
func TestAcrossProfilesFindsTheCliff(t *testing.T) {
	cfg := writeConfig(t, `
endpoints:
  - name: sim
    simulator: {slots: 2, prefill_base: 10ms, decode_base: 2ms, seed: 1}
profiles:
  - name: baseline
    load: {concurrency: 1, requests: 10}
    workload: {output_tokens: {mean: 20}}
  - name: overload
    load: {concurrency: 16, requests: 48}
    workload: {output_tokens: {mean: 20}}
`)
	// Whether the cliff shows is a real-time ratio (TTFT against ITL),
	// which a busy machine can blur for a moment: timingtest tries again.
	timingtest.Retry(t, 3, func(a *timingtest.Attempt) {
		code, out, errOut := runCLI(t, Options{ConfigFile: cfg})
		// Without an slo block there is nothing to attain: not "100%".
		if !strings.Contains(out, "SLO attainment               no SLO") || strings.Contains(out, "SLO attainment               100.0%") {
			t.Errorf("a run without an SLO:\n%s", out)
		}
		if code != ExitOK || !strings.Contains(out, "Across profiles on sim: baseline (concurrency 1), overload (concurrency 16)") {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
		if !regexp.MustCompile(`TTFT cliff +at concurrency 16: TTFT p50 x[0-9.]+, ITL p50 x[0-9.]+ \(a queue, not a slower model\)`).MatchString(out) {
			a.Errorf("no cliff found:\n%s", out)
		}
	})
}

// A run whose answers are wrong fails, SLO or not: exit 1, passed false,
// the console naming the share and the tolerance (one in a hundred by
// default); a profile that tolerates them passes.
func TestWrongAnswersFailARunWithoutAnSLO(t *testing.T) {
	for _, c := range []struct {
		tolerance string
		code      int
		line      string
	}{
		{"", ExitSLOFailed, "Wrong answers                100.0% of the requests (tolerance 1.0%: FAILED)"},
		{", max_wrong_ratio: 1", ExitOK, "Wrong answers                100.0% of the requests (tolerance 100.0%: within it)"},
	} {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "t.yaml")
		body := `endpoints:
  - name: sim
    simulator: {slots: 4, prefill_base: 1ms, decode_base: 1ms, seed: 1, faults: {garbage: 1}}
profiles:
  - name: garbage
    endpoints: [sim]
    load: {concurrency: 2, requests: 10}
    workload: {input_tokens: {mean: 10}, output_tokens: {mean: 8}}
    checks: {matches: ["\\bthe\\b"]` + c.tolerance + `}
`
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		code := Run(context.Background(), Options{ConfigFile: cfg, ArtifactsDir: filepath.Join(dir, "a"), Out: &out, Progress: io.Discard})
		if code != c.code || !strings.Contains(out.String(), c.line) {
			t.Errorf("tolerance %q: exit %d, want %d and %q:\n%s", c.tolerance, code, c.code, c.line, out.String())
		}
	}
}

// One verdict per run, said the same way everywhere: for each outcome the
// exit code, the console's Verdict line, summary.json's passed and
// verdict, and report.html's verdict agree, all from the summary's one
// decision (stats.Summary.VerdictLine).
func TestOneVerdictEverywhere(t *testing.T) {
	closed := closedPort(t)
	// slow misses a 100 ms TTFT by 200 ms a request: past what a busy
	// machine's stalls of the probe could explain.
	const sim = `
endpoints:
  - name: sim
    simulator: {slots: 2, prefill_base: 1ms, decode_base: 1ms, seed: 1%s}
  - name: slow
    simulator: {slots: 2, prefill_base: 300ms, decode_base: 1ms, seed: 1}
`
	for _, c := range []struct {
		name, faults, profile string
		code                  int
		passed                bool
		verdict               string
	}{
		{"all good", "", `{name: p, load: {concurrency: 2, requests: 40}, workload: {output_tokens: {mean: 4}}, slo: {ttft: 5s, objective: 0.9}}`,
			ExitOK, true, "PASSED: SLO attainment 100.0% of 40 requests (95% interval 91.2% to 100.0%) meets the 90.0% objective"},
		{"too few to tell", "", `{name: p, load: {concurrency: 2, requests: 8}, workload: {output_tokens: {mean: 4}}, slo: {ttft: 5s, objective: 0.9}}`,
			ExitUndecided, false, "NOT ENOUGH EVIDENCE: SLO attainment 100.0% of 8 requests (95% interval 67.6% to 100.0%) holds the 90.0% objective: about 35 requests would decide it at this attainment"},
		{"objective missed", "", `{name: p, endpoints: [slow], load: {concurrency: 2, requests: 8}, workload: {output_tokens: {mean: 4}}, slo: {ttft: 100ms, objective: 0.9}}`,
			ExitSLOFailed, false, "FAILED: SLO attainment 0.0% of 8 requests (95% interval 0.0% to 32.4%) is under the 90.0% objective"},
		{"every answer wrong, no SLO", ", faults: {garbage: 1}", `{name: p, load: {concurrency: 2, requests: 8}, workload: {output_tokens: {mean: 4}}, checks: {matches: ["\\bthe\\b"]}}`,
			ExitSLOFailed, false, "FAILED: 100.0% wrong answers, over the 1.0% tolerated"},
		{"aborted", "", `{name: p, endpoints: [dead], load: {concurrency: 4, duration: 30s}}`,
			ExitRuntime, false, "ERROR: aborted by the failure policy: "},
		{"search found", "", `{name: p, load: {search: {concurrency: [1, 4]}, requests: 40}, workload: {output_tokens: {mean: 4}}, slo: {ttft: 5s, objective: 0.9}}`,
			ExitOK, true, "PASSED: the search found a capacity of 4 shown to meet the 90.0% objective"},
		{"search found nothing", "", `{name: p, endpoints: [slow], load: {search: {concurrency: [1, 4]}, requests: 6}, workload: {output_tokens: {mean: 4}}, slo: {ttft: 100ms, objective: 0.9}}`,
			ExitSLOFailed, false, "FAILED: no level the search tried met the 90.0% objective"},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := fmt.Sprintf(sim, c.faults) + "  - {name: dead, base_url: \"http://" + closed + "/v1\", model: m}\nprofiles:\n  - " + c.profile + "\n"
			if !strings.Contains(c.profile, "endpoints:") {
				body = strings.Replace(body, "{name: p,", "{name: p, endpoints: [sim],", 1)
			}
			dir := t.TempDir()
			code, out, errOut := runCLI(t, Options{ConfigFile: writeConfig(t, body), ArtifactsDir: dir})
			if code != c.code {
				t.Errorf("exit %d, want %d\n%s\n%s", code, c.code, out, errOut)
			}
			line := regexp.MustCompile(`(?m)^Verdict +(.*)$`).FindStringSubmatch(out)
			if line == nil || !strings.HasPrefix(line[1], c.verdict) {
				t.Errorf("console verdict %q, want %q\n%s", line, c.verdict, out)
			}
			sums, _ := filepath.Glob(filepath.Join(dir, "*", "summary.json"))
			if len(sums) != 1 {
				t.Fatalf("summaries %v", sums)
			}
			b, _ := os.ReadFile(sums[0])
			var all []stats.Summary
			if err := json.Unmarshal(b, &all); err != nil || len(all) != 1 {
				t.Fatalf("summary.json: %v %s", err, b)
			}
			if all[0].Passed != c.passed || line != nil && all[0].Verdict != line[1] {
				t.Errorf("summary.json passed %v verdict %q; console %q", all[0].Passed, all[0].Verdict, line)
			}
			html, _ := os.ReadFile(filepath.Join(filepath.Dir(sums[0]), "report.html"))
			if !strings.Contains(string(html), ">"+htmlEscape(all[0].Verdict)+"</p>") {
				t.Errorf("report.html lacks the verdict %q", all[0].Verdict)
			}
		})
	}
}

func htmlEscape(s string) string {
	var b strings.Builder
	template.HTMLEscape(&b, []byte(s))
	return b.String()
}

// TestCostToTheCent: a run against an endpoint with a price reports in
// summary.json what a hand computation from its records gives, to the
// cent, and the report says it.
func TestCostToTheCent(t *testing.T) {
	cfg := writeConfig(t, `
endpoints:
  - name: sim
    simulator: {slots: 8, decode_base: 1ms, seed: 3, faults: {error_500: 0.2}}
    price: {input_per_million: 2500, output_per_million: 10000, currency: EUR}
profiles:
  - name: priced
    load: {concurrency: 4, requests: 40}
    workload: {input_tokens: {mean: 200, stddev: 50}, output_tokens: {mean: 20, stddev: 5}, seed: 4}
`)
	dir := t.TempDir()
	code, out, errOut := runCLI(t, Options{ConfigFile: cfg, ArtifactsDir: dir})
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "*", "priced-sim"))
	if len(runs) != 1 {
		t.Fatalf("run folders: %v", runs)
	}
	var s stats.Summary
	readJSON(t, filepath.Join(runs[0], "summary.json"), &s)
	hand, errors := 0.0, 0
	for _, r := range readRecords(t, filepath.Join(runs[0], "records.jsonl")) {
		switch r.Outcome {
		case "success", "wrong_answer":
			hand += float64(r.InputTokens)*2500/1e6 + float64(r.OutputTokens)*10000/1e6
		default:
			errors++
		}
	}
	if errors == 0 || hand == 0 {
		t.Fatalf("no failed request or no cost to tell apart: %d errors, %.2f", errors, hand)
	}
	if math.Abs(s.Cost-hand) >= 0.005 || s.Currency != "EUR" {
		t.Errorf("summary cost %.4f %s, the records' %.4f EUR", s.Cost, s.Currency, hand)
	}
	if want := fmt.Sprintf("%.4f EUR", s.Cost); !strings.Contains(out, want) {
		t.Errorf("the report does not say the cost %s:\n%s", want, out)
	}
}

// TestEachProvidersFailuresByName: the simulator playing each provider,
// with a scripted mix of failures, gives each its reason by name in the
// console and in summary.json.
func TestEachProvidersFailuresByName(t *testing.T) {
	want := []string{"auth", "rate_limit", "quota", "overloaded", "content_filter", "context_length", "model_not_found"}
	for _, provider := range []string{"openai", "azure", "anthropic"} {
		cfg := writeConfig(t, fmt.Sprintf(`
endpoints:
  - name: hosted
    simulator: {slots: 8, decode_base: 1ms, seed: 9, provider: %s, faults: {auth: 0.1, error_429: 0.1, retry_after: 1ms, quota: 0.1, overloaded: 0.1, content_filter: 0.1, context_length: 0.1, model_not_found: 0.1}}
profiles:
  - name: mix
    load: {concurrency: 4, requests: 200}
    failure: {backoff: {base: 1ms, max: 1ms}, retry_after_max: 1ms, abort: {min_requests: 0}, max_error_ratio: 1}
    workload: {input_tokens: {mean: 20}, output_tokens: {mean: 4}}
`, provider))
		dir := t.TempDir()
		code, out, errOut := runCLI(t, Options{ConfigFile: cfg, ArtifactsDir: dir})
		runs, _ := filepath.Glob(filepath.Join(dir, "*", "mix-hosted"))
		if len(runs) != 1 {
			t.Fatalf("%s: exit %d, run folders %v\n%s\n%s", provider, code, runs, out, errOut)
		}
		var s stats.Summary
		readJSON(t, filepath.Join(runs[0], "summary.json"), &s)
		for _, reason := range want {
			if s.ByReason[reason] == 0 {
				t.Errorf("%s: summary.json counts no %s: %v", provider, reason, s.ByReason)
			}
			if !strings.Contains(out, reason+": ") {
				t.Errorf("%s: the console names no %s:\n%s", provider, reason, out)
			}
		}
		if n := s.ByReason["bad_request"] + s.ByReason["server_error"]; n != 0 {
			t.Errorf("%s: %d failures read as no cause: %v", provider, n, s.ByReason)
		}
	}
}

// A run from flags gets its note on too few requests at the flag, as the
// README's command line with a count too small would write it.
func TestAdviceNamesTheFlag(t *testing.T) {
	a := &AdHoc{URL: "http://localhost:8000", Model: "my-model", Concurrency: 8, Requests: 20, Goodput: "ttft:500ms itl:50ms", Objective: 0.9}
	b, err := a.YAML()
	if err != nil {
		t.Fatal(err)
	}
	o := Options{ConfigFile: "flags", Config: b}
	cfg, profiles, err := load(o)
	if err != nil {
		t.Fatal(err)
	}
	got := advice(o, cfg, profiles)
	want := "--requests: a run of 20 requests can never show the 90.0% objective met: it takes at least 35"
	if len(got) != 1 || !strings.HasPrefix(got[0].Error(), want) {
		t.Fatalf("advice %v, want one starting %q", got, want)
	}
}

// A run aborted in its warmup, with fifty requests queued at a server
// that would hold them an hour, exits once its report is written (its
// requests in flight cancelled, not waited for), and its report counts
// the warmup's failures that decided it: the report of such a run said
// "Requests 0" and "Errors by reason none".
func TestAbortedRunExitsWithItsReport(t *testing.T) {
	cfg := writeConfig(t, `
endpoints:
  - name: slow
    timeout: 300ms
    simulator: {slots: 1, prefill_base: 1h, seed: 1}
profiles:
  - name: p
    load: {concurrency: 50, duration: 10m, warmup_requests: 30}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	code, out, errOut := runCLIContext(ctx, t, Options{ConfigFile: cfg, ArtifactsDir: dir})
	if ctx.Err() != nil {
		t.Fatal("the aborted run waited for its requests in flight")
	}
	if code != ExitRuntime || !strings.Contains(out, "aborted: ") {
		t.Fatalf("exit %d, want %d and an abort:\n%s\n%s", code, ExitRuntime, out, errOut)
	}
	sums, _ := summaries(t, dir)
	w := sums[0].Warmup
	if w == nil || w.Errors < 20 || w.ByReason["timeout"] != w.Errors || sums[0].Requests != 0 {
		t.Fatalf("warmup %+v, %d measured requests: want the warmup's timeouts that aborted it, and no measured request", w, sums[0].Requests)
	}
	if want := fmt.Sprintf("Warmup                       %d (0 success, %d error (timeout %d)", w.Requests, w.Errors, w.Errors); !strings.Contains(out, want) {
		t.Errorf("the report lacks %q:\n%s", want, out)
	}
}

// A model name a server answers with is printed escaped and cut, for
// every API: the run's header printed it raw (a newline, an escape
// sequence, a NUL, 100 KB), and a server could forge console lines.
func TestAHostileServedModelNameForgesNoConsoleLine(t *testing.T) {
	name := "forged\nlevel=error msg=\"forged line\"\r\x1b[2Jcleared\x00" + strings.Repeat("x", 100<<10)
	s, err := sim.Start("127.0.0.1:0", sim.Config{Slots: 4, DecodeBase: time.Millisecond, Seed: 1, Faults: sim.Faults{WrongModel: name, WrongModelRate: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, api := range openai.APIs {
		t.Run(string(api), func(t *testing.T) {
			cfg := writeConfig(t, fmt.Sprintf("endpoints:\n  - {name: e, base_url: 'http://%s/v1', model: m, api: %s}\nprofiles:\n  - {name: p, load: {concurrency: 1, requests: 2}}\n", s.Addr(), api))
			_, out, errOut := runCLI(t, Options{ConfigFile: cfg})
			all := out + errOut
			if strings.ContainsAny(all, "\x1b\x00\r") || strings.Contains(all, "\nlevel=error") || strings.Contains(all, strings.Repeat("x", 1000)) {
				t.Errorf("the served model name reached the console raw:\n%.600q", all)
			}
			if api != openai.Embeddings && !strings.Contains(all, `answers name forged\nlevel=error`) {
				t.Errorf("the served model name is not shown escaped:\n%.600s", all)
			}
		})
	}
}
