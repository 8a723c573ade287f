package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/merge"
	"github.com/tokenprobe/tokenprobe/internal/runonce"
	"github.com/tokenprobe/tokenprobe/internal/sim"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// asTokenprobe, set in a process's environment, makes this test binary
// the tokenprobe command: the processes these tests start (and those
// that `run --processes` starts, from os.Executable) are real processes
// of the code under test.
const asTokenprobe = "TOKENPROBE_TEST_AS_COMMAND"

func TestMain(m *testing.M) {
	if os.Getenv(asTokenprobe) == "1" {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// command is this test binary as `tokenprobe args...`, run through sh so
// that script can set the process's limits first ("ulimit -n 256").
func command(t *testing.T, script string, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if script != "" {
		script += " && "
	}
	cmd := exec.Command("sh", append([]string{"-c", script + `exec "$0" "$@"`, self}, args...)...)
	cmd.Env = append(os.Environ(), asTokenprobe+"=1")
	return cmd
}

// One study in three shards, each a process of its own that takes its
// index from JOB_COMPLETION_INDEX, as an Indexed Job's pods do, against
// one server; merged, the request count is the shards' sum, the TTFT
// percentiles are those of all their records put together, and goodput
// is over the union of their windows.
func TestAStudyInThreeProcessesMerges(t *testing.T) {
	srv, err := sim.Start("127.0.0.1:0", sim.Config{Slots: 16, DecodeBase: time.Millisecond, PrefillBase: 2 * time.Millisecond, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "study.yaml")
	writeFile(t, cfg, `
endpoints:
  - {name: sim, base_url: "`+srv.URL()+`", model: tokenprobe-sim}
profiles:
  - name: study
    load: {concurrency: 6, requests: 90}
    workload: {output_tokens: {mean: 6}}
    slo: {ttft: 2s, objective: 0.9}
`)
	startAt := time.Now().Add(3 * time.Second).Format(time.RFC3339Nano)
	var shards []string
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for i := range 3 {
		art := filepath.Join(dir, "shard-"+strconv.Itoa(i))
		shards = append(shards, art)
		cmd := command(t, "", "run", "-c", cfg, "--shard.count", "3", "--start-at", startAt, "--artifacts-dir", art, "--progress-interval", "0")
		cmd.Env = append(cmd.Env, "JOB_COMPLETION_INDEX="+strconv.Itoa(i))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, &out)
	}
	for i, cmd := range cmds {
		// A shard's 30 requests may not show the 90% objective: exit 4
		// is its verdict on its share; the merged study's is below.
		if err := cmd.Wait(); err != nil && exitCode(err) != runonce.ExitUndecided {
			t.Fatalf("shard %d: %v\n%s", i, err, outs[i])
		}
	}
	var runs []*merge.Run
	for i, s := range shards {
		rs, err := merge.Load(s)
		if err != nil {
			t.Fatal(err)
		}
		if sh := rs[0].Summary.Shard; sh == nil || sh.Index != i || sh.Count != 3 {
			t.Fatalf("the process given JOB_COMPLETION_INDEX=%d ran shard %+v", i, sh)
		}
		runs = append(runs, rs...)
	}
	out := filepath.Join(dir, "merged")
	if code, stdout := stdoutOf(t, "merge", shards[0], shards[1], shards[2], "--out", out); code != 0 || !strings.Contains(stdout, "study on sim: 3 shards, 90 requests") {
		t.Fatalf("merge: exit %d\n%s", code, stdout)
	}
	merged, err := merge.Load(filepath.Join(out, "study-sim"))
	if err != nil {
		t.Fatal(err)
	}
	got := merged[0].Summary
	var ttft []float64
	good, sum := 0, 0
	var first, last time.Time
	for _, r := range runs {
		sum += r.Summary.Requests
		for _, rec := range r.Records {
			if rec.TTFTMs != nil && (rec.Outcome == "success" || rec.Outcome == "wrong_answer") {
				ttft = append(ttft, *rec.TTFTMs)
			}
			if rec.Good {
				good++
			}
			end := rec.Start.Add(time.Duration(*rec.RequestLatencyMs * float64(time.Millisecond)))
			if first.IsZero() || rec.Start.Before(first) {
				first = rec.Start
			}
			if end.After(last) {
				last = end
			}
		}
	}
	if got.Requests != sum || sum != 90 || len(merged[0].Records) != 90 {
		t.Errorf("merged %d requests (%d records), the shards %d together (want 90)", got.Requests, len(merged[0].Records), sum)
	}
	want := stats.Compute(ttft)
	// Within 10 ns: a record's milliseconds are read back as whole
	// nanoseconds.
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-5 }
	if got.TTFT.Count != want.Count || !near(got.TTFT.P50, want.P50) || !near(got.TTFT.P90, want.P90) || !near(got.TTFT.P99, want.P99) {
		t.Errorf("merged TTFT n=%d p50 %g p90 %g p99 %g; the shards' records together n=%d p50 %g p90 %g p99 %g",
			got.TTFT.Count, got.TTFT.P50, got.TTFT.P90, got.TTFT.P99, want.Count, want.P50, want.P90, want.P99)
	}
	if g := float64(good) / last.Sub(first).Seconds(); good == 0 || math.Abs(got.Goodput-g) > 1e-6*g {
		t.Errorf("merged goodput %g/s; %d good requests over the union of the windows, %s: %g/s", got.Goodput, good, last.Sub(first), g)
	}
}

// Under an open-file limit too low for a profile's streams, `tokenprobe
// run` refuses it, naming how many processes would hold it; with
// --processes auto it runs in that many, each under the limit, with no
// error, and writes one run's artifacts. Each process is a real one, its
// limit set by the shell that starts the first.
func TestProcessesHoldWhatOneProcessCannot(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "wide.yaml")
	// 300 streams to an in-process simulator: two files each, 664 with
	// the headroom; under 256, four processes of 75 streams (214) hold it.
	writeFile(t, cfg, `
endpoints:
  - name: sim
    simulator: {slots: 300, decode_base: 2ms}
profiles:
  - name: wide
    load: {concurrency: 300, requests: 900}
    workload: {output_tokens: {mean: 8}}
`)
	const limit = "ulimit -n 256"
	refused, err := command(t, limit, "run", "-c", cfg, "--artifacts-dir", filepath.Join(dir, "refused")).CombinedOutput()
	if exitCode(err) != runonce.ExitConfig || !strings.Contains(string(refused),
		"profiles[0].load: 300 streams at once need about 664 open files (two a stream: the simulator serves them in this process), and this process may open 256: raise the limit (ulimit -n 1024 in the shell") ||
		!strings.Contains(string(refused), "or spread them over processes (tokenprobe run --processes 4)") || strings.Contains(string(refused), "Running profile") {
		t.Fatalf("in one process under %q: %v\n%s", limit, err, refused)
	}
	art := filepath.Join(dir, "art")
	cmd := command(t, limit, "run", "-c", cfg, "--processes", "auto", "--artifacts-dir", art, "--progress-interval", "0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("--processes auto under %q: %v\n%s\n%s", limit, err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "Running in 4 processes") || !strings.Contains(stdout.String(), "wide on sim: 4 shards, 900 requests") ||
		!strings.Contains(stdout.String(), "(900 success, 0 error") {
		t.Fatalf("--processes auto:\n%s\n%s", stdout.String(), stderr.String())
	}
	runs, err := merge.Load(art)
	if err != nil {
		t.Fatal(err)
	}
	if s := runs[0].Summary; s.Requests != 900 || s.Errors != 0 || s.Level != 300 || len(runs[0].Records) != 900 {
		t.Errorf("the merged run: %d requests, %d errors, level %g, %d records", s.Requests, s.Errors, s.Level, len(runs[0].Records))
	}
	if left, _ := filepath.Glob(filepath.Join(art, ".processes-*")); len(left) != 0 {
		t.Errorf("the shards' artifacts were left behind after the merge: %v", left)
	}
	// Each process's own summary stays beside the merged run, without
	// the records the merged run holds.
	kept, _ := filepath.Glob(filepath.Join(runs[0].Dir, "..", "processes", "*", "*", "wide-sim", "summary.json"))
	records, _ := filepath.Glob(filepath.Join(runs[0].Dir, "..", "processes", "*", "*", "wide-sim", "records.jsonl"))
	if len(kept) != 4 || len(records) != 0 {
		t.Errorf("kept %d processes' summaries (want 4) and %d of their records (want none)", len(kept), len(records))
	}
}

// The flags of the whole run are not handed to its processes, which get
// their own share, start and folder instead; every other flag is.
func TestChildArgs(t *testing.T) {
	got := childArgs([]string{"run", "-c", "x.yaml", "--processes", "4", "--artifacts-dir=art", "--start-at", "T", "-p", "a", "--shard.count=2", "--concurrency", "8"})
	want := []string{"run", "-c", "x.yaml", "-p", "a", "--concurrency", "8"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"0", "-1", "many"} {
		if _, err := parseProcesses(bad); err == nil {
			t.Errorf("--processes %s accepted", bad)
		}
	}
}

// What a run in several processes cannot do is refused before any
// process starts, by name.
func TestProcessesRefuseWhatTheyCannotDo(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "t.yaml")
	writeFile(t, cfg, "endpoints:\n  - {name: sim, simulator: {}}\nprofiles:\n  - {name: p, load: {concurrency: 2, requests: 4}}\n")
	for _, extra := range [][]string{
		{"--debug.trace", filepath.Join(t.TempDir(), "trace.out")},
		{"--shard.count", "2", "--shard.index", "0"},
		{"--export-aiperf"},
		{"--processes", "none"},
	} {
		args := append([]string{"run", "-c", cfg, "--processes", "2", "--artifacts-dir", t.TempDir()}, extra...)
		if code := run(args); code != runonce.ExitConfig {
			t.Errorf("%q: exit %d, want %d", extra, code, runonce.ExitConfig)
		}
	}
}

// A SIGKILL of run --processes's parent stops its children's load: they
// used to go on sending until their own duration ended (23,409 requests
// in the next 4 s).
func TestChildrenStopWithTheirParent(t *testing.T) {
	h, err := sim.NewHandler(sim.Config{Slots: 16, DecodeBase: time.Millisecond, PrefillBase: time.Millisecond, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var received atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "long.yaml")
	writeFile(t, cfg, `
endpoints:
  - {name: sim, base_url: "`+srv.URL+`/v1", model: tokenprobe-sim}
profiles:
  - name: long
    load: {concurrency: 4, duration: 10m}
    workload: {output_tokens: {mean: 4}}
`)
	cmd := command(t, "", "run", "-c", cfg, "--processes", "2", "--artifacts-dir", filepath.Join(dir, "out"), "--progress-interval", "0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	for deadline := time.Now().Add(time.Minute); received.Load() < 100; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the children sent %d requests in a minute\n%s", received.Load(), &out)
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed := time.Now()
	// The load stops when a second passes with no request: bounded by
	// what is seen, with a guard far under the children's 10 minutes.
	last := received.Load()
	for quietSince := time.Now(); time.Since(quietSince) < time.Second; time.Sleep(50 * time.Millisecond) {
		if n := received.Load(); n != last {
			last, quietSince = n, time.Now()
		}
		if time.Since(killed) > time.Minute {
			t.Fatalf("the children still send a minute after their parent's SIGKILL (%d requests)", last)
		}
	}
	t.Logf("the load stopped within %v of the parent's SIGKILL", time.Since(killed).Round(100*time.Millisecond)-time.Second)
}

// A child of run --processes says it is ready and starts when its parent
// says; its parent's giving up (the end of its stdin) is an interrupt
// before the start, not a run.
func TestAChildStartsWhenItsParentSays(t *testing.T) {
	swap := func(in string) (out *os.File, restore func()) {
		r, w, _ := os.Pipe()
		_, _ = io.WriteString(w, in)
		w.Close()
		er, ew, _ := os.Pipe()
		oldIn, oldErr := os.Stdin, os.Stderr
		os.Stdin, os.Stderr = r, ew
		return er, func() { os.Stdin, os.Stderr = oldIn, oldErr; ew.Close() }
	}
	at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	said, restore := swap(at.Format(time.RFC3339Nano) + "\n")
	got, err := startFromParent(context.Background())
	restore()
	line, _ := bufio.NewReader(said).ReadString('\n')
	if err != nil || !got.Equal(at) || strings.TrimSpace(line) != readyLine {
		t.Errorf("start %v (%v), said %q; want %v after %q", got, err, line, at, readyLine)
	}
	_, restore = swap("")
	_, err = startFromParent(context.Background())
	restore()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("stdin closed before a time: %v, want an interrupt", err)
	}
}
