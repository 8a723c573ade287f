package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tokenprobe/tokenprobe/exporter/otlp/otlptest"
	"github.com/tokenprobe/tokenprobe/internal/browsertest"
	"github.com/tokenprobe/tokenprobe/internal/hostile"
	"github.com/tokenprobe/tokenprobe/internal/memreturn"
	"github.com/tokenprobe/tokenprobe/internal/schedslice"
	"github.com/tokenprobe/tokenprobe/internal/sim"
	"github.com/tokenprobe/tokenprobe/internal/timingtest"
	"github.com/tokenprobe/tokenprobe/probe/stats"

	"github.com/tokenprobe/tokenprobe/internal/realserver"
	"github.com/tokenprobe/tokenprobe/internal/runonce"
)

func TestCheckExitCodes(t *testing.T) {
	if code := run([]string{"check", "-c", "../../configs/demo.yaml"}); code != 0 {
		t.Errorf("valid config: exit %d", code)
	}
	if code := run([]string{"check", "-c", "../../internal/config/testdata/invalid/unknown_field.yaml"}); code != runonce.ExitConfig {
		t.Errorf("invalid config: exit %d, want %d", code, runonce.ExitConfig)
	}
	if code := run([]string{"run"}); code != runonce.ExitConfig {
		t.Errorf("missing flag: exit %d, want %d", code, runonce.ExitConfig)
	}
	// A CI job checks without the production secrets: an unset key
	// variable is a warning for check, and an error for run.
	if code := run([]string{"check", "-c", "../../internal/config/testdata/invalid/missing_env.yaml"}); code != 0 {
		t.Errorf("check with a missing secret: exit %d, want 0", code)
	}
	if code := run([]string{"run", "-c", "../../internal/config/testdata/invalid/missing_env.yaml", "--artifacts-dir", ""}); code != runonce.ExitConfig {
		t.Errorf("run with a missing secret: exit %d, want %d", code, runonce.ExitConfig)
	}
}

// --sched.slice out of the kernel's bounds is a usage error; within them,
// `tokenprobe run` leaves its threads with that slice.
func TestSchedSliceFlag(t *testing.T) {
	if code := run([]string{"run", "-c", "../../configs/demo.yaml", "--sched.slice", "1s"}); code != runonce.ExitConfig {
		t.Errorf("--sched.slice 1s: exit %d, want %d", code, runonce.ExitConfig)
	}
	cfg := filepath.Join(t.TempDir(), "tokenprobe.yaml")
	writeFile(t, cfg, `
endpoints:
  - name: sim
    simulator: {decode_base: 1ms}
profiles:
  - name: one
    load: {concurrency: 1, requests: 2}
`)
	if code := run([]string{"run", "-c", cfg, "--artifacts-dir", "", "--progress-interval", "0", "--sched.slice", "300us"}); code != runonce.ExitOK {
		t.Fatalf("run: exit %d", code)
	}
	got, err := schedslice.Current()
	if err != nil {
		t.Fatal(err)
	}
	if got == 0 {
		t.Skip("this kernel has no custom scheduling slices")
	}
	if got != 300*time.Microsecond {
		t.Errorf("slice %v after --sched.slice 300us", got)
	}
}

// SIGTERM in the middle of a run: tokenprobe stops scheduling, cancels the
// run, flushes, and exits 0 within the deadline, leaving no goroutine.
func TestSIGTERMDuringARun(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tokenprobe.yaml")
	writeFile(t, cfg, `
endpoints:
  - name: sim
    simulator: {slots: 4, decode_base: 20ms}
profiles:
  - name: long
    load: {concurrency: 4, duration: 1m}
    schedule: {manual: true}
`)
	base, exit := startServe(t, cfg, "--shutdown.timeout=5s")
	resp, err := http.Post(base+"/api/v1/runs?profile=long", "", nil)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("run now: %v %v", err, resp)
	}
	resp.Body.Close()
	waitFor(t, "requests in flight", func() bool {
		return strings.Contains(body(base+"/metrics"), `tokenprobe_in_flight_requests{endpoint="sim",profile="long"} 4`)
	})
	runs := body(base + "/api/v1/runs")

	start := time.Now()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("exit code %d after SIGTERM", code)
		}
		t.Logf("exited 0 %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("no exit within 10 s of SIGTERM")
	}
	if !strings.Contains(runs, `"result": "running"`) {
		t.Fatalf("the run was not in progress at SIGTERM: %s", runs)
	}
	http.DefaultClient.CloseIdleConnections()
}

// Between runs the daemon's GC percent is memreturn.DefaultIdlePercent, and
// during one it is the process's own (100, GOGC unset); serve puts it back
// as it returns.
func TestServeLowersTheGCPercentWhileIdle(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set: the daemon leaves it alone")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tokenprobe.yaml")
	writeFile(t, cfg, `
endpoints:
  - name: sim
    simulator: {slots: 2, decode_base: 20ms}
profiles:
  - name: short
    load: {concurrency: 2, duration: 2s}
    schedule: {manual: true}
`)
	base, exit := startServe(t, cfg, "--shutdown.timeout=5s")
	gogc := func(want int) func() bool {
		line := fmt.Sprintf("\ngo_gc_gogc_percent %d\n", want)
		return func() bool { return strings.Contains(body(base+"/metrics"), line) }
	}
	waitFor(t, "GOGC 50 before the first run", gogc(memreturn.DefaultIdlePercent))
	resp, err := http.Post(base+"/api/v1/runs?profile=short", "", nil)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("run now: %v %v", err, resp)
	}
	resp.Body.Close()
	waitFor(t, "GOGC 100 during the run", gogc(100))
	waitFor(t, "GOGC 50 after the run", gogc(memreturn.DefaultIdlePercent))
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := <-exit; code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if p := debug.SetGCPercent(100); p != 100 {
		t.Fatalf("GC percent %d after serve returned, want 100", p)
	}
	http.DefaultClient.CloseIdleConnections()
}

// A collector that accepts and never answers: SIGTERM still stops the
// daemon within its shutdown timeout (it ran on for 612 s before), and the
// exit says the flush failed.
func TestSIGTERMWithACollectorThatNeverAnswers(t *testing.T) {
	h, err := hostile.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tokenprobe.yaml")
	writeFile(t, cfg, `
otlp: {endpoint: "http://`+h.Addr()+`/`+hostile.Silent+`", interval: 1s}
tracing: {sample: 1}
endpoints:
  - name: sim
    simulator: {slots: 64, prefill_base: 1ms, decode_base: 1ms}
profiles:
  - name: long
    load: {concurrency: 16, duration: 1m}
    workload: {output_tokens: {mean: 2}}
    schedule: {manual: true}
`)
	base, exit := startServe(t, cfg, "--shutdown.timeout=3s")
	resp, err := http.Post(base+"/api/v1/runs?profile=long", "", nil)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("run now: %v %v", err, resp)
	}
	resp.Body.Close()
	// The collector holds an export, and more spans wait behind it than
	// the SDK's default queue (2,048) takes. Bounded by a guard, not by
	// a rate: under the race detector, a few hundred requests a second.
	waitFor(t, "a connection to the collector", func() bool { return h.Connections() > 0 })
	for deadline := time.Now().Add(2 * time.Minute); requestsDone(body(base+"/metrics")) < 3000; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("fewer than 3,000 requests in two minutes")
		}
	}
	start := time.Now()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exit:
		if code != runonce.ExitRuntime {
			t.Errorf("exit code %d, want %d: the last metrics were not pushed", code, runonce.ExitRuntime)
		}
		t.Logf("exited %d %v after SIGTERM", code, time.Since(start).Round(time.Millisecond))
	case <-time.After(time.Minute): // a hang, not a timing: 3 s are asked
		t.Fatal("no exit within a minute of SIGTERM: the collector holds the daemon")
	}
	http.DefaultClient.CloseIdleConnections()
}

// requestsDone sums tokenprobe_requests_total in a /metrics page.
func requestsDone(page string) float64 {
	var n float64
	for line := range strings.Lines(page) {
		if rest, ok := strings.CutPrefix(line, "tokenprobe_requests_total{"); ok {
			if _, v, ok := strings.Cut(rest, "} "); ok {
				f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
				n += f
			}
		}
	}
	return n
}

// startServe starts `tokenprobe serve -c cfg` with the lifecycle API on a free
// local port, plus args, and returns its base URL once it is ready, and
// the channel its exit code comes on.
func startServe(t *testing.T, cfg string, args ...string) (base string, exit <-chan int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	done := make(chan int, 1)
	go func() {
		done <- run(append([]string{"serve", "-c", cfg, "--web.listen-address=" + addr, "--web.enable-lifecycle", "--log.level=error"}, args...))
	}()
	base = "http://" + addr
	waitFor(t, "ready", func() bool { return get(base+"/-/ready") == 200 })
	return base, done
}

func get(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func body(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// SIGTERM mid-run loses no observation: every request the server received
// (those cancelled by the shutdown included) reaches the OTLP collector
// before tokenprobe exits (a CI run once saw 53 observations of 52
// received requests: one was cancelled before it reached the server).
func TestSIGTERMFlushesEveryObservation(t *testing.T) {
	srv, err := sim.Start("127.0.0.1:0", sim.Config{Slots: 8, DecodeBase: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rc := otlptest.Start()
	defer rc.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tokenprobe.yaml")
	writeFile(t, cfg, `
endpoints:
  - {name: sim, base_url: "`+srv.URL()+`", model: m}
otlp: {endpoint: "`+rc.URL+`", interval: 1h}
profiles:
  - name: long
    load: {concurrency: 6, duration: 1m}
    workload: {output_tokens: {mean: 20}}
    schedule: {manual: true}
`)
	base, exit := startServe(t, cfg)
	resp, err := http.Post(base+"/api/v1/runs?profile=long", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor(t, "some requests done", func() bool {
		_, _, served, _ := srv.Stats()
		return served > 50
	})
	_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	if code := <-exit; code != 0 {
		t.Fatalf("exit %d", code)
	}
	_, _, served, _ := srv.Stats()
	got, _ := rc.Last()
	var pushed int64
	outcomes := map[string]int64{}
	for _, dp := range got["tokenprobe.requests"].GetSum().GetDataPoints() {
		pushed += dp.GetAsInt()
		outcomes[otlptest.Attrs(dp.Attributes)["tokenprobe.outcome"]] += dp.GetAsInt()
	}
	t.Logf("server received %d requests; the collector got %d observations %v", served, pushed, outcomes)
	// Every request the server received was observed. A worker can start a
	// request as the shutdown cancels it, so that it never reaches the
	// server: observed, as cancelled, and not received. Only cancelled
	// observations may exceed what the server saw.
	if pushed < int64(served) || pushed-int64(served) > outcomes["cancelled"] || outcomes["cancelled"] == 0 {
		t.Fatalf("server received %d requests, the collector got %d observations %v", served, pushed, outcomes)
	}
	http.DefaultClient.CloseIdleConnections()
}

// SIGINT in the middle of `tokenprobe run`: no new requests, the ones in
// flight finish, every artifact is written and says interrupted, and the
// exit code is 3.
func TestSIGINTDuringARunKeepsItsResults(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tokenprobe.yaml")
	writeFile(t, cfg, `
endpoints:
  - name: sim
    simulator: {slots: 4, decode_base: 20ms}
profiles:
  - name: long
    load: {concurrency: 4, duration: 1m}
    workload: {output_tokens: {mean: 30}}
`)
	artifacts := filepath.Join(dir, "artifacts")
	exit := make(chan int, 1)
	go func() {
		exit <- run([]string{"run", "-c", cfg, "--artifacts-dir", artifacts, "--progress-interval", "0"})
	}()
	waitFor(t, "the records file", func() bool {
		m, _ := filepath.Glob(filepath.Join(artifacts, "*", "long-sim", "records.jsonl"))
		return len(m) == 1
	})
	time.Sleep(700 * time.Millisecond) // past the first requests' end
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exit:
		if code != runonce.ExitRuntime {
			t.Fatalf("exit code %d after SIGINT, want %d", code, runonce.ExitRuntime)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no exit within 15 s of SIGINT")
	}
	runDir, _ := filepath.Glob(filepath.Join(artifacts, "*"))
	if len(runDir) != 1 {
		t.Fatalf("artifact folders: %v", runDir)
	}
	for file, want := range map[string]string{
		"summary.json":           `"interrupted": true`,
		"report.html":            "Interrupted",
		"long-sim/summary.json":  `"interrupted": true`,
		"long-sim/report.txt":    "INTERRUPTED",
		"long-sim/records.jsonl": `"outcome":"success"`,
	} {
		b, err := os.ReadFile(filepath.Join(runDir[0], file))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s: %v; want it to contain %q", file, err, want)
		}
	}
	// The requests in flight at the interrupt finished: none is cancelled.
	b, _ := os.ReadFile(filepath.Join(runDir[0], "long-sim", "records.jsonl"))
	if strings.Contains(string(b), `"outcome":"cancelled"`) {
		t.Error("requests in flight were cancelled, not let finish")
	}
}

// generate slo writes a Sloth spec with one goodput SLO per profile with
// an objective and endpoint, and refuses a configuration with none.
func TestGenerateSLO(t *testing.T) {
	out := filepath.Join(t.TempDir(), "slo.yaml")
	if code := run([]string{"generate", "slo", "-c", "../../configs/demo.yaml", "--out", out}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"version: prometheus/v1", "name: staircase-sim-goodput", "name: overload-sim-goodput", "objective: 90"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no %q in:\n%s", want, b)
		}
	}
	none := filepath.Join(t.TempDir(), "none.yaml")
	writeFile(t, none, "endpoints: [{name: sim, simulator: {}}]\nprofiles: [{name: p}]\n")
	if code := run([]string{"generate", "slo", "-c", none}); code != runonce.ExitConfig {
		t.Errorf("a configuration without objectives: exit %d, want %d", code, runonce.ExitConfig)
	}
}

// A run from flags alone and a run of the configuration --print-config
// prints for the same flags measure the same profile: same requests, same
// prompt and answer lengths, same level and objective. Latencies differ
// from run to run and are not compared.
func TestRunFromFlagsEqualsItsPrintedConfig(t *testing.T) {
	s, err := sim.Start("127.0.0.1:0", sim.Config{Slots: 4, DecodeBase: time.Millisecond, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dir := t.TempDir()
	flags := []string{"--url", s.URL(), "--model", s.Config().Model, "--concurrency", "2", "--requests", "12",
		"--input-tokens", "40,5", "--output-tokens", "6", "--goodput", "ttft:2s itl:500ms", "--objective", "0.5", "--progress-interval", "0",
		"--server-metrics", "http://" + s.Addr() + "/metrics", "--server-kind", "vllm"}

	printed := filepath.Join(dir, "printed.yaml")
	stdout := os.Stdout
	f, err := os.Create(printed)
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout = f
	code := run(append([]string{"run", "--print-config"}, flags...))
	os.Stdout = stdout
	f.Close()
	if code != 0 {
		t.Fatalf("--print-config: exit %d", code)
	}

	summary := func(args ...string) stats.Summary {
		t.Helper()
		art := filepath.Join(dir, fmt.Sprint(len(args)))
		if code := run(append(args, "--artifacts-dir", art)); code != runonce.ExitOK {
			t.Fatalf("%v: exit %d", args, code)
		}
		return onlySummary(t, art)
	}
	a := summary(append([]string{"run"}, flags...)...)
	b := summary("run", "-c", printed, "--progress-interval", "0")
	same := func(s stats.Summary) string {
		return fmt.Sprintf("%s/%s/%s level %g objective %g: %d requests, %d success, ISL %+v, OSL %+v",
			s.Profile, s.Endpoint, s.Model, s.Level, s.Objective, s.Requests, s.Success, s.ISL, s.OSL)
	}
	if same(a) != same(b) || a.Requests != 12 || a.ISL.Count != 12 {
		t.Fatalf("from flags:   %s\nfrom config: %s", same(a), same(b))
	}
	for _, s := range []stats.Summary{a, b} {
		if s.Server == nil || s.Server.Kind != "vllm" || s.Server.Breakdown == nil {
			t.Fatalf("--server-metrics: the server's view %+v, want a TTFT breakdown", s.Server)
		}
	}
}

// Bad flags are refused with the flag named, before anything runs.
func TestRunFlagErrorsNameTheFlag(t *testing.T) {
	stderr := os.Stderr
	r, w, _ := os.Pipe()
	os.Stderr = w
	code := run([]string{"run", "--url", "http://127.0.0.1:1/v1", "--model", "m", "--concurrency=-2", "--objective", "2",
		"--server-metrics", "vllm:8000", "--server-kind", "triton", "--print-config"})
	w.Close()
	os.Stderr = stderr
	out, _ := io.ReadAll(r)
	if code != runonce.ExitConfig || !strings.Contains(string(out), "--concurrency: must be positive") ||
		!strings.Contains(string(out), "--objective: 2 is not a fraction") || !strings.Contains(string(out), `--server-metrics: "vllm:8000" is not an http(s) URL`) ||
		!strings.Contains(string(out), `--server-kind: "triton" is not one of`) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if code := run([]string{"run", "--url", "http://x/v1"}); code != runonce.ExitConfig {
		t.Errorf("--url without --model: exit %d", code)
	}
	// 0 is refused as any other non-positive load, not taken as unset.
	for _, flag := range []string{"--concurrency=0", "--request-rate=0"} {
		if code := run([]string{"run", "--url", "http://127.0.0.1:1/v1", "--model", "m", flag, "--print-config"}); code != runonce.ExitConfig {
			t.Errorf("%s: exit %d, want %d", flag, code, runonce.ExitConfig)
		}
	}
}

// Flags and -c combine: the flags change the selected profile's fields,
// a kind of load replacing the other, and the rest of the file stands.
func TestFlagsOverrideTheSelectedProfile(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tokenprobe.yaml")
	writeFile(t, cfg, `
endpoints:
  - name: sim
    simulator: {slots: 4, decode_base: 1ms}
profiles:
  - name: a
    load: {concurrency: 1, requests: 2}
    workload: {output_tokens: {mean: 4}}
    slo: {ttft: 5s, objective: 0.9}
  - name: b
    load: {concurrency: 1, requests: 2}
`)
	art := filepath.Join(dir, "artifacts")
	if code := run([]string{"run", "-c", cfg, "-p", "a", "--request-rate", "50", "--requests", "40", "--artifacts-dir", art, "--progress-interval", "0"}); code != runonce.ExitOK {
		t.Fatalf("exit %d", code)
	}
	if s := onlySummary(t, art); s.Profile != "a" || s.Requests != 40 || s.Level != 50 || s.Objective != 0.9 || s.OSL.Max != 4 {
		t.Fatalf("profile %s, %d requests at level %g, objective %g, OSL max %g; want a, 40 at rate 50, 0.9 and 4 kept",
			s.Profile, s.Requests, s.Level, s.Objective, s.OSL.Max)
	}
	// Which profile the flags change must be said.
	if code := run([]string{"run", "-c", cfg, "--concurrency", "3", "--print-config"}); code != runonce.ExitConfig {
		t.Errorf("flags on two profiles without -p: exit %d", code)
	}
}

// onlySummary reads the summary of the one run of the one invocation whose
// artifacts are under art.
func onlySummary(t *testing.T, art string) stats.Summary {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(art, "*", "summary.json"))
	if len(m) != 1 {
		t.Fatalf("summaries %v", m)
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	var all []stats.Summary
	if err := json.Unmarshal(b, &all); err != nil || len(all) != 1 {
		t.Fatalf("%v: %s", err, b)
	}
	return all[0]
}

// stdoutOf runs the command line and returns its exit code and what it
// wrote to standard output.
func stdoutOf(t *testing.T, args ...string) (int, string) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = f
	code := run(args)
	os.Stdout = stdout
	f.Close()
	b, _ := os.ReadFile(f.Name())
	return code, string(b)
}

// Two runs of one profile against one server compare as noise and pass
// the gate; a run against a server with twice the prefill fails it, and
// the failure names the metric.
func TestCompareGatesARegression(t *testing.T) {
	server := func(prefill time.Duration) *sim.Server {
		s, err := sim.Start("127.0.0.1:0", sim.Config{Slots: 4, PrefillBase: prefill, DecodeBase: time.Millisecond, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	fast, slow := server(50*time.Millisecond), server(100*time.Millisecond)
	dir := t.TempDir()
	runOf := func(s *sim.Server, name string) string {
		art := filepath.Join(dir, name)
		if code := run([]string{"run", "--url", s.URL(), "--model", s.Config().Model, "--concurrency", "2", "--requests", "30",
			"--output-tokens", "4", "--goodput", "ttft:500ms", "--progress-interval", "0", "--artifacts-dir", art}); code != runonce.ExitOK {
			t.Fatalf("run %s: exit %d", name, code)
		}
		m, _ := filepath.Glob(filepath.Join(art, "*"))
		return m[0]
	}
	base, again, slower := runOf(fast, "base"), runOf(fast, "again"), runOf(slow, "slower")
	const gate = "ttft.p50>+20%"
	// The same server twice fails nothing: it passes, or on a busy
	// machine, where the probe's own delay widens the intervals, it is
	// not enough evidence.
	if code, out := stdoutOf(t, "compare", base, again, "--fail-on", gate); code != 0 && code != 4 || strings.Contains(out, "FAILED") {
		t.Errorf("the same server twice: exit %d\n%s", code, out)
	}
	page := filepath.Join(dir, "compare.html")
	code, out := stdoutOf(t, "compare", base, slower, "--fail-on", gate, "--html", page)
	if code != 1 || !strings.Contains(out, "FAILED ttft.p50>+20%: adhoc on target ttft.p50 is +") {
		t.Errorf("twice the prefill: exit %d\n%s", code, out)
	}
	// The page sets the baseline beside the new run: the slower TTFT
	// marked worse, the distributions drawn together.
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if html := string(b); !regexp.MustCompile(`<tr class="worse"><td>ttft.p50</td>`).MatchString(html) || strings.Count(html, "<svg") != 3 ||
		!strings.Contains(html, "Time to first token: baseline and new") {
		t.Errorf("the comparison page:\n%.2000s", html)
	}
	// Rendered by a real browser: the gate's verdict per rule, and the
	// TTFT distributions as CDFs with titled axes and the SLO line.
	if browser := browsertest.Find(t); browser != "" {
		dom := browsertest.Render(t, browser, "file://"+page, "--dump-dom")
		ttft := regexp.MustCompile(`(?s)<svg[^>]*aria-label="Time to first token: baseline and new".*?</svg>`).FindString(dom)
		for _, want := range []string{`class="axis-title x"`, "time to first token (ms)", `class="axis-title y"`, "share of requests at or under (%)",
			`class="slo"`, "SLO: TTFT 500 ms", `data-name="baseline"`, `data-name="new"`} {
			if !strings.Contains(ttft, want) {
				t.Errorf("the rendered TTFT chart lacks %q:\n%.2500s", want, ttft)
			}
		}
		rule := regexp.MustCompile(`(?s)<tr class="rule failed" data-rule="ttft.p50&gt;\+20%" data-outcome="failed">.*?</tr>`).FindString(dom)
		if !strings.Contains(rule, ": adhoc on target ttft.p50 is +") || !strings.Contains(rule, "wholly past it") {
			t.Errorf("the rendered gate does not say the rule failed:\n%.2000s", dom)
		}
	}
	if code, out := stdoutOf(t, "compare", base, slower, "--fail-on", "ttft.p42>+1%"); code != 2 || !strings.Contains(out, `no metric "ttft.p42"`) {
		t.Errorf("a rule naming no metric: exit %d\n%s", code, out)
	}
}

// Answer checks from flags alone, as the acceptance reads: a
// gateway that falls back to another model for half the requests fails
// about half of them as wrong answers and the run exits 1; a JSON Schema
// and tools pass against a right simulator and fail against broken JSON.
func TestRunFromFlagsChecksAnswers(t *testing.T) {
	dir := t.TempDir()
	schema := filepath.Join(dir, "answer.json")
	tools := filepath.Join(dir, "tools.json")
	_ = os.WriteFile(schema, []byte(`{"type": "object", "required": ["answer"], "properties": {"answer": {"type": "string"}}}`), 0o644)
	_ = os.WriteFile(tools, []byte(`[{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}}}]`), 0o644)
	for _, c := range []struct {
		name   string
		faults sim.Faults
		flags  []string
		code   int
		check  string
		wrong  func(n int) bool
	}{
		{"a fallback model", sim.Faults{WrongModel: "tiny-model", WrongModelRate: 0.5}, []string{"--objective", "0.9"}, runonce.ExitSLOFailed, "model", func(n int) bool { return n >= 8 && n <= 32 }},
		{"json schema", sim.Faults{}, []string{"--json-schema", schema, "--objective", "0.9"}, runonce.ExitOK, "json_schema", func(n int) bool { return n == 0 }},
		{"json schema, broken JSON", sim.Faults{BadJSON: 1}, []string{"--json-schema", schema, "--objective", "0.9"}, runonce.ExitSLOFailed, "json_schema", func(n int) bool { return n == 40 }},
		{"tools", sim.Faults{}, []string{"--tools", tools, "--objective", "0.9"}, runonce.ExitOK, "tool_call", func(n int) bool { return n == 0 }},
		{"tools, broken arguments", sim.Faults{BadJSON: 1}, []string{"--tools", tools, "--objective", "0.9"}, runonce.ExitSLOFailed, "tool_call", func(n int) bool { return n == 40 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := sim.Start("127.0.0.1:0", sim.Config{Slots: 4, DecodeBase: time.Millisecond, Seed: 7, Faults: c.faults})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			art := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
			args := append([]string{"run", "--url", s.URL(), "--model", s.Config().Model, "--concurrency", "4", "--requests", "40",
				"--output-tokens", "8", "--progress-interval", "0", "--artifacts-dir", art}, c.flags...)
			if code := run(args); code != c.code {
				t.Fatalf("exit %d, want %d", code, c.code)
			}
			sum := onlySummary(t, art)
			failed := -1
			for _, ch := range sum.Checks {
				if ch.Name == c.check {
					failed = ch.Fail
				}
			}
			if failed != sum.WrongAnswers || !c.wrong(failed) {
				t.Fatalf("%d wrong answers, %d failing %s (checks %+v)", sum.WrongAnswers, failed, c.check, sum.Checks)
			}
		})
	}
}

// Every endpoint type from flags, as aiperf's --endpoint-type, against
// the simulator: each completes with no error and no wrong answer.
func TestRunEveryEndpointType(t *testing.T) {
	s, err := sim.Start("127.0.0.1:0", sim.Config{Slots: 4, DecodeBase: time.Millisecond, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dir := t.TempDir()
	for _, api := range []string{"chat", "completions", "responses", "messages", "embeddings"} {
		art := filepath.Join(dir, api)
		args := []string{"run", "--url", s.URL(), "--model", s.Config().Model, "--endpoint-type", api, "--concurrency", "2", "--requests", "12",
			"--output-tokens", "6", "--progress-interval", "0", "--artifacts-dir", art}
		if api == "embeddings" {
			args = append(args, "--batch", "3")
		}
		if code := run(args); code != runonce.ExitOK {
			t.Fatalf("%s: exit %d", api, code)
		}
		sum := onlySummary(t, art)
		if sum.Success != 12 || sum.Errors != 0 || sum.WrongAnswers != 0 || sum.InputTokens == 0 || (api == "embeddings") != (sum.TTFT.Count == 0) {
			t.Errorf("%s: %d success, %d errors, %d wrong, %d input tokens, %d TTFTs", api, sum.Success, sum.Errors, sum.WrongAnswers, sum.InputTokens, sum.TTFT.Count)
		}
	}
}

// aiperf's names describe the same profile as ours; a near miss of a
// flag gets a suggestion, and a duration without a unit names its flag.
func TestAIPerfNames(t *testing.T) {
	common := []string{"run", "--print-config"}
	code, ours := stdoutOf(t, append(common, "--url", "http://vllm:8000/v1", "--model", "m", "--api", "chat", "--requests", "7",
		"--warmup-requests", "1", "--input-tokens", "100,10", "--output-tokens", "20", "--duration", "30s",
		"--extra-body", `{"ignore_eos": true, "temperature": 0}`, "--header", "X-Team=sre", "--goodput", "ttft:100ms itl:20ms")...)
	code2, theirs := stdoutOf(t, append(common, "-u", "http://vllm:8000/v1", "-m", "m", "--endpoint-type", "chat", "--request-count", "7",
		"--warmup-request-count", "1", "--synthetic-input-tokens-mean", "100", "--synthetic-input-tokens-stddev", "10", "--osl", "20",
		"--benchmark-duration", "30", "--extra-inputs", "ignore_eos:true", "--extra-inputs", "temperature:0", "-H", "X-Team: sre",
		"--goodput", "time_to_first_token:100 inter_token_latency:20")...)
	if code != 0 || code2 != 0 || ours != theirs {
		t.Fatalf("exit %d and %d; ours:\n%s\naiperf's:\n%s", code, code2, ours, theirs)
	}
	stderr := os.Stderr
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	for args, want := range map[string]string{
		"--concurency 2":              "unknown long flag '--concurency', did you mean --concurrency?",
		"--duration 5":                `--duration: "5" has no unit: give one, such as 500ms, 30s or 5m`,
		"--request-cont 2":            "did you mean --request-count?",
		"--isl 512,50":                `--isl: "512,50" is not a number: --isl takes the mean; give the spread with --isl-stddev`,
		"--fixed-schedule":            "--fixed-schedule is aiperf's, and tokenprobe does not implement it: use --trace",
		"--api-key sk-1":              "use --api-key-env VAR",
		"--tokenizer Qwen/Qwen3-0.6B": "\"Qwen/Qwen3-0.6B\" is a Hugging Face model id, neither a file here nor in the Hugging Face cache",
		"--model a,b":                 "--model \"a,b\": one model",
	} {
		r, w, _ := os.Pipe()
		os.Stderr = w
		base := []string{"run", "--url", "http://x/v1", "--model", "m"}
		if strings.HasPrefix(args, "--model") {
			base = base[:3]
		}
		code := run(append(base, strings.Fields(args)...))
		w.Close()
		os.Stderr = stderr
		out, _ := io.ReadAll(r)
		if code != runonce.ExitConfig || !strings.Contains(string(out), want) {
			t.Errorf("%s: exit %d, %q; want %q", args, code, out, want)
		}
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The four `aiperf profile` command lines of the write-ups this project
// answers run with `tokenprobe run` in their place, every flag as given:
// only the --url's host and port are the server's, written as the
// write-ups write it (http://HOST:PORT, the server's root, no /v1), and
// the lengths (60 s, 1,000 requests) are cut so the test is short. Run
// against the simulator, and against llama.cpp's llama-server where
// .ci/run built it. The hub tokenizer's line finds its tokenizer.json in a
// Hugging Face cache, where `huggingface-cli download` puts it.
func TestAIPerfWriteUpsCommandLines(t *testing.T) {
	s, err := sim.Start("127.0.0.1:0", sim.Config{Slots: 64, DecodeBase: 100 * time.Microsecond, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	t.Run("simulator", func(t *testing.T) { writeUpsCommandLines(t, "http://"+s.Addr(), nil) })
	t.Run("llama-server", func(t *testing.T) {
		srv := realserver.LlamaServer(t)
		// The tiny model's context is short, and it decodes on the CPU:
		// lengths cut further.
		writeUpsCommandLines(t, srv.URL, map[string]string{"--isl": "64", "--osl": "8", "--request-count": "8"})
	})
}

func writeUpsCommandLines(t *testing.T, url string, cut map[string]string) {
	cache := t.TempDir()
	snap := filepath.Join(cache, "models--Qwen--Qwen3-0.6B", "snapshots", "0123abc")
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	tk, err := os.ReadFile("../../probe/tokenizer/testdata/tiny-bpe.json")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(snap, "tokenizer.json"), string(tk))
	t.Setenv("HF_HUB_CACHE", cache)
	for _, line := range []string{
		"--model M --streaming --endpoint-type chat --url U --tokenizer builtin --request-count 50 --concurrency 1",
		"--model M --url U --endpoint-type chat --concurrency 50 --tokenizer builtin --warmup-request-count 10 --benchmark-duration 60 --streaming",
		"--model M --url U --endpoint-type chat --concurrency 50 --tokenizer builtin --benchmark-duration 60 --goodput time_to_first_token:500 --streaming",
		"--model qwen3-0.6b --url U --endpoint-type chat --streaming --concurrency 100 --request-count 1000 --isl 1000 --osl 500 --tokenizer Qwen/Qwen3-0.6B",
	} {
		args := strings.Fields(line)
		for i := range args {
			switch {
			case args[i] == "U":
				args[i] = url
			case i > 0 && args[i-1] == "--benchmark-duration":
				args[i] = "2"
			case i > 0 && args[i-1] == "--request-count" && args[i] == "1000":
				args[i] = "200"
			}
			if i > 0 && cut[args[i-1]] != "" {
				args[i] = cut[args[i-1]]
			}
		}
		dir := t.TempDir()
		code, out := stdoutOf(t, append([]string{"run", "--artifacts-dir", dir, "--progress-interval", "0"}, args...)...)
		if code != runonce.ExitOK {
			t.Errorf("aiperf profile %s\nexit %d:\n%s", line, code, out)
			continue
		}
		runs, err := filepath.Glob(filepath.Join(dir, "*", "*", "summary.json"))
		if err != nil || len(runs) != 1 {
			t.Errorf("%s: summaries %v %v", line, runs, err)
			continue
		}
		var sum stats.Summary
		b, _ := os.ReadFile(runs[0])
		if err := json.Unmarshal(b, &sum); err != nil || sum.Success == 0 {
			t.Errorf("%s: %v, summary %s", line, err, b)
		}
		if strings.Contains(line, "--goodput") && !strings.Contains(string(b), `"slo_attainment"`) {
			t.Errorf("%s: no SLO attainment in the summary", line)
		}
	}
}

// The write-ups' 50-user line against a server whose queue is longer than
// the old 120 s timeout (one slot, 2.6 s a request, 50 waiting: 130 s):
// with aiperf's run semantics it measures the queue instead of being
// aborted by it. Its duration is cut to 2 s, as in the test above; the
// 30 s grace period then ends the requests still queued, counted as
// cancelled. Before, the queued requests timed out at 120 s, the failure
// policy called the run broken and it exited 3.
func TestAIPerfFiftyUsersMeasureTheQueue(t *testing.T) {
	const prefill = 2600 * time.Millisecond
	s, err := sim.Start("127.0.0.1:0", sim.Config{Slots: 1, PrefillBase: prefill, DecodeBase: time.Millisecond, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	dir := t.TempDir()
	line := "--model tokenprobe-sim --url http://" + s.Addr() + " --endpoint-type chat --concurrency 50 --tokenizer builtin --benchmark-duration 2 --goodput time_to_first_token:500 --streaming"
	code, out := stdoutOf(t, append([]string{"run", "--artifacts-dir", dir, "--progress-interval", "0"}, strings.Fields(line)...)...)
	// aiperf's --goodput counts good requests and gates nothing: no
	// objective, so the verdict is the answers', and the cliff is in the
	// figures (no good request of those answered).
	if code != runonce.ExitOK {
		t.Fatalf("exit %d, want %d (no objective to miss):\n%s", code, runonce.ExitOK, out)
	}
	sum := onlySummary(t, dir)
	if sum.Error != "" || sum.Aborted {
		t.Fatalf("the run is an error: %s", sum.Error)
	}
	if sum.Success == 0 || sum.Cancelled == 0 || sum.Requests != sum.Success+sum.Errors+sum.Cancelled+sum.WrongAnswers {
		t.Errorf("%d requests: %d success, %d errors, %d cancelled, %d wrong; want answers and the queue's rest cancelled, all counted",
			sum.Requests, sum.Success, sum.Errors, sum.Cancelled, sum.WrongAnswers)
	}
	if sum.Goodput != 0 || sum.RequestThroughput == 0 {
		t.Errorf("goodput %.2f req/s of %.2f: every answer waited in the queue past 500 ms", sum.Goodput, sum.RequestThroughput)
	}
	if p50 := sum.TTFT.P50; p50 < 2*float64(prefill.Milliseconds()) {
		t.Errorf("TTFT p50 %.0f ms: the queue does not show (one request alone takes %s)", p50, prefill)
	}
	if !strings.Contains(out, "Requests") || !strings.Contains(out, "cancelled") {
		t.Errorf("the report does not count the cancelled requests:\n%s", out)
	}
}

// TestSignalHelper is not a test: run by TestSecondSignalQuitsEvenWhenStartedIgnored
// in a process of its own, started with SIGINT ignored.
func TestSignalHelper(t *testing.T) {
	url := os.Getenv("TOKENPROBE_SIGNAL_HELPER_URL")
	if url == "" {
		t.Skip("run by TestSecondSignalQuitsEvenWhenStartedIgnored")
	}
	os.Exit(run([]string{"run", "--url", url, "--model", "m", "--concurrency", "2", "--requests", "4", "--progress-interval", "0", "--artifacts-dir", ""}))
}

// A process started with SIGINT ignored (`cmd &` in a script, some CI
// runners) quits at once at a second interrupt, as the console promises:
// restoring the signal's default action restored "ignored", and the
// second interrupt was ignored too, the run waiting out its grace period.
func TestSecondSignalQuitsEvenWhenStartedIgnored(t *testing.T) {
	h, err := hostile.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	cmd := exec.Command("sh", "-c", `trap "" INT; exec "$0" -test.run '^TestSignalHelper$'`, os.Args[0])
	cmd.Env = append(os.Environ(), "TOKENPROBE_SIGNAL_HELPER_URL="+h.URL(hostile.Silent))
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	timingtest.Until(t, func() string { return "the run to start; it wrote: " + stderr.String() }, func() bool { return h.Connections() >= 2 }, nil)
	_ = cmd.Process.Signal(os.Interrupt)
	timingtest.Until(t, func() string { return "the first interrupt's notice; it wrote: " + stderr.String() }, func() bool { return strings.Contains(stderr.String(), "Interrupted") }, nil)
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Fatalf("after a second interrupt: %v, want exit 130 at once\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("the process outlived a second interrupt by a minute\n%s", stderr.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
