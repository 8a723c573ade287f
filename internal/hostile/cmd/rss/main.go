// Command rss measures the daemon's resident size against each of
// internal/hostile's modes and prints docs/RELIABILITY.md's table of them:
//
//	go run ./internal/hostile/cmd/rss -write docs/RELIABILITY.md   (make reliability)
//
// writes it between the file's markers (beginMarker, endMarker); without
// -write it prints it. With -soak DURATION it measures one row instead,
// the token-per-fetch mode's run asked for again as each ends, for that
// long, reading RSS at each quarter, and writes it between the soak's
// markers (make reliability-soak).
// For each mode it starts `tokenprobe serve` (built from this tree) with
// one profile against the mode, reads the process's RSS from /proc before
// the run, every 100 ms during it and for a minute after it (-idle), then
// sends SIGTERM and times the exit. Linux only (it reads /proc).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/daemon"
	"github.com/tokenprobe/tokenprobe/internal/hostile"
)

// mode is one row: a profile against a hostile behaviour.
type mode struct {
	name, what string
	// profile is the YAML of the endpoint and profile, with %[1]s the
	// hostile server's base URL for the mode and %[2]s the folder of the
	// files it names.
	profile string
	files   map[string]string
	// otlp points the daemon's OTLP push at the mode's address.
	otlp bool
	// env is the daemon's environment beside this process's, %[1]s and
	// %[2]s expanded as in profile.
	env []string
	// soak is how long the mode's run is asked for again as each ends
	// (RSS read at each quarter, progress shown every minute); 0: once.
	soak time.Duration
}

// noPolicy keeps a run sending whatever fails: the failure policy's abort
// and backoff off, so that the mode is met by every request.
const noPolicy = `    failure: {abort: {error_ratio: 0}, max_error_ratio: 0, backoff: {base: 0s, max: 0s}}
`

// streamedFor20s streams answers of 128 tokens at concurrency 4 for 20 s.
const streamedFor20s = `endpoints: [{name: h, base_url: "%[1]s", model: m, timeout: 2m}]
profiles:
  - name: p
    endpoints: [h]
    load: {concurrency: 4, duration: 20s}
    workload: {input_tokens: {mean: 10}, output_tokens: {mean: 128}}
    schedule: {manual: true}
` + noPolicy

var modes = []mode{
	{name: hostile.ManyChunks, what: "60 MB of minimal chunks an answer, max_tokens 128, for 20 s",
		profile: streamedFor20s},
	{name: hostile.EndlessLine, what: "an SSE line that never ends, in 64 KiB pieces, for 20 s",
		profile: streamedFor20s},
	{name: hostile.BigAnswer, what: "a 20 MB JSON answer under json_schema, 8 requests",
		files: map[string]string{"schema.json": `{"type": "array"}`},
		profile: `endpoints: [{name: h, base_url: "%[1]s", model: m, timeout: 2m}]
profiles:
  - name: p
    endpoints: [h]
    load: {concurrency: 4, requests: 8}
    workload: {input_tokens: {mean: 10}, output_tokens: {mean: 100}}
    checks: {model: "off", json_schema: "%[2]s/schema.json"}
    schedule: {manual: true}
` + noPolicy},
	{name: hostile.BigToolArgs, what: "50 MB of tool-call arguments under a tools check, 8 requests",
		files: map[string]string{"tools.json": `[{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]`},
		profile: `endpoints: [{name: h, base_url: "%[1]s", model: m, timeout: 2m}]
profiles:
  - name: p
    endpoints: [h]
    load: {concurrency: 4, requests: 8}
    workload: {input_tokens: {mean: 10}, output_tokens: {mean: 100}}
    checks: {model: "off", tools: "%[2]s/tools.json"}
    schedule: {manual: true}
` + noPolicy},
	{name: hostile.BigVector, what: "a 60 MB embeddings vector, 8 requests",
		profile: `endpoints: [{name: h, base_url: "%[1]s", model: m, api: embeddings, timeout: 2m}]
profiles:
  - name: p
    endpoints: [h]
    load: {concurrency: 4, requests: 8}
    workload: {input_tokens: {mean: 10}}
    checks: {model: "off"}
    schedule: {manual: true}
` + noPolicy},
	{name: hostile.Nested, what: "4 MB of nested arrays, not streamed, 8 requests",
		profile: `endpoints: [{name: h, base_url: "%[1]s", model: m, timeout: 2m}]
profiles:
  - name: p
    endpoints: [h]
    load: {concurrency: 4, requests: 8}
    workload: {input_tokens: {mean: 10}, output_tokens: {mean: 10}, stream: false}
    schedule: {manual: true}
` + noPolicy},
	{name: hostile.Silent + " (OTLP)", what: "an OTLP collector that accepts and never answers; the simulator answers, 10 s at concurrency 4",
		otlp: true,
		profile: `endpoints: [{name: s, simulator: {slots: 4}, model: m}]
profiles:
  - name: p
    endpoints: [s]
    load: {concurrency: 4, duration: 10s}
    workload: {input_tokens: {mean: 10}, output_tokens: {mean: 16}}
    schedule: {manual: true}
otlp: {protocol: http, endpoint: "%[1]s", insecure: true, interval: 1s, timeout: 1s}
tracing: {sample: 1}
`},
	// Vertex AI's sign-in against a token endpoint that issues a new 60 KB
	// token per fetch, each expiring at once: every request fetches one,
	// and the redaction set keeps the last few (it kept every one, and
	// the daemon went from 35 MB to 508 MB in 60 s).
	{name: hostile.TokenPerFetch, what: "a Google token endpoint issuing a new 60 KB token per fetch, 60 s at concurrency 4",
		files: map[string]string{"adc.json": `{"type":"authorized_user","client_id":"c","client_secret":"s","refresh_token":"r","token_uri":"%[1]s/token"}`},
		env:   []string{"GOOGLE_APPLICATION_CREDENTIALS=%[2]s/adc.json"},
		profile: `endpoints: [{name: s, simulator: {slots: 4}, model: m, auth: {google: {}}}]
profiles:
  - name: p
    endpoints: [s]
    load: {concurrency: 4, duration: 60s}
    workload: {input_tokens: {mean: 10}, output_tokens: {mean: 16}}
    schedule: {manual: true}
`},
	// Bedrock's sign-in with the container credentials endpoint answering
	// 60 MB: the SDK read it whole (a run went to 253 MB).
	{name: hostile.BigVector + " (AWS credentials)", what: "an AWS container credentials endpoint answering 60 MB, 8 requests",
		env: []string{"AWS_CONTAINER_CREDENTIALS_FULL_URI=%[1]s/creds", "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_SHARED_CREDENTIALS_FILE=%[2]s/none", "AWS_CONFIG_FILE=%[2]s/none"},
		profile: `endpoints: [{name: s, simulator: {slots: 4}, model: m, auth: {aws_sigv4: {region: us-east-1}}}]
profiles:
  - name: p
    endpoints: [s]
    load: {concurrency: 4, requests: 8}
    workload: {input_tokens: {mean: 10}, output_tokens: {mean: 16}}
    schedule: {manual: true}
` + noPolicy},
}

func main() {
	idle := flag.Duration("idle", time.Minute, "how long to read RSS after each run")
	only := flag.String("mode", "", "measure this mode alone")
	bin := flag.String("bin", "", "the tokenprobe binary (default: built from this tree)")
	write := flag.String("write", "", "write the table into this file, between its markers")
	soak := flag.Duration("soak", 0, "measure the token-per-fetch mode alone, for this long, into the soak's table")
	flag.Parse()
	begin, end, run := beginMarker, endMarker, modes
	if *soak > 0 {
		begin, end, run = soakBegin, soakEnd, []mode{soakMode(*soak)}
	}
	if *write != "" {
		if _, err := replaceTable(*write, begin, end, ""); err != nil {
			fail(err) // before minutes of measuring
		}
	}
	dir, err := os.MkdirTemp("", "tokenprobe-rss-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	if *bin == "" {
		*bin = filepath.Join(dir, "tokenprobe")
		build := exec.Command("go", "build", "-o", *bin, "./cmd/tokenprobe")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			fail(fmt.Errorf("building tokenprobe: %w", err))
		}
	}
	h, err := hostile.Start()
	if err != nil {
		fail(err)
	}
	defer h.Close()
	var table strings.Builder
	out := io.MultiWriter(os.Stdout, &table)
	if *soak > 0 {
		fmt.Fprintf(out, "Measured %s by `go run ./internal/hostile/cmd/rss -soak %v` (`make reliability-soak`), %d cores, RSS read from /proc every 100 ms; idle: %v after the run.\n\n",
			time.Now().UTC().Format("2006-01-02"), *soak, runtime.NumCPU(), *idle)
		fmt.Fprintln(out, "| mode | load | requests, outcome | RSS before | RSS at each quarter of the run | RSS peak | RSS after idle | SIGTERM to exit |")
		fmt.Fprintln(out, "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
	} else {
		fmt.Fprintf(out, "Measured %s by `go run ./internal/hostile/cmd/rss` (`make reliability`), %d cores, RSS read from /proc every 100 ms; idle: %v after the run.\n\n",
			time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), *idle)
		fmt.Fprintln(out, "| mode | load | requests, outcome | RSS before | RSS peak | RSS after idle | SIGTERM to exit |")
		fmt.Fprintln(out, "| --- | --- | --- | ---: | ---: | ---: | ---: |")
	}
	for _, m := range run {
		if *only != "" && !strings.HasPrefix(m.name, *only) {
			continue
		}
		row, err := measure(*bin, dir, h, m, *idle)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", m.name, err)
			row = "error: " + err.Error()
		}
		fmt.Fprintf(out, "| `%s` | %s | %s |\n", m.name, m.what, row)
	}
	if *write != "" {
		if _, err := replaceTable(*write, begin, end, table.String()); err != nil {
			fail(err)
		}
	}
}

// The markers around the tables in the file -write names.
const (
	beginMarker = "<!-- begin: make reliability -->"
	endMarker   = "<!-- end: make reliability -->"
	soakBegin   = "<!-- begin: make reliability-soak -->"
	soakEnd     = "<!-- end: make reliability-soak -->"
)

// soakMode is the token-per-fetch row, its 60 s run asked for again and
// again for d: every token the daemon has seen is a secret to redact, and
// a new one comes with every request (about 24 a second here), so a set
// that kept them all would grow without end (60 KB each: 5 GB an hour).
func soakMode(d time.Duration) mode {
	for _, m := range modes {
		if m.name == hostile.TokenPerFetch {
			m.what = strings.Replace(m.what, "60 s at concurrency 4", "runs of 60 s at concurrency 4, one after the other for "+d.String(), 1)
			m.soak = d
			return m
		}
	}
	panic("no " + hostile.TokenPerFetch + " mode")
}

// replaceTable puts table between path's markers begin and end (with
// table empty, it only checks that they are there).
func replaceTable(path, beginMarker, endMarker, table string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	head, rest, ok := bytes.Cut(b, []byte(beginMarker))
	_, tail, ok2 := bytes.Cut(rest, []byte(endMarker))
	if !ok || !ok2 {
		return nil, fmt.Errorf("%s: no %q ... %q to write the table between", path, beginMarker, endMarker)
	}
	if table == "" {
		return b, nil
	}
	out := slices.Concat(head, []byte(beginMarker+"\n"), []byte(table), []byte(endMarker), tail)
	return out, os.WriteFile(path, out, 0o644)
}

func measure(bin, dir string, h *hostile.Server, m mode, idle time.Duration) (string, error) {
	mdir := filepath.Join(dir, strings.Fields(m.name)[0])
	if err := os.MkdirAll(mdir, 0o755); err != nil {
		return "", err
	}
	url := h.URL(strings.Fields(m.name)[0])
	if m.otlp {
		url = "http://" + h.Addr() + "/" + hostile.Silent
	}
	for name, body := range m.files {
		if err := os.WriteFile(filepath.Join(mdir, name), []byte(expand(body, url, mdir)), 0o644); err != nil {
			return "", err
		}
	}
	cfg := filepath.Join(mdir, "tokenprobe.yaml")
	if err := os.WriteFile(cfg, []byte(expand(m.profile, url, mdir)), 0o644); err != nil {
		return "", err
	}
	addr, err := freeAddr()
	if err != nil {
		return "", err
	}
	log, err := os.Create(filepath.Join(mdir, "serve.log"))
	if err != nil {
		return "", err
	}
	defer log.Close()
	cmd := exec.Command(bin, "serve", "-c", cfg, "--web.listen-address="+addr, "--web.enable-lifecycle", "--shutdown.timeout=10s")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = os.Environ()
	for _, e := range m.env {
		cmd.Env = append(cmd.Env, expand(e, url, mdir))
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()
	base := "http://" + addr
	if err := waitFor(30*time.Second, func() bool { return get(base+"/-/ready") == nil }); err != nil {
		out, _ := os.ReadFile(filepath.Join(mdir, "serve.log"))
		return "", fmt.Errorf("the daemon did not get ready: %w: %s", err, bytes.TrimSpace(out))
	}
	time.Sleep(2 * time.Second) // settled after start
	before, err := rss(cmd.Process.Pid)
	if err != nil {
		return "", err
	}
	// A soak asks for the mode's run again each time one ends, until it
	// has lasted m.soak: the daemon as it runs in production, a run at a
	// time, each one's per-request figures let go at its end, so that
	// what grows across them is what the mode makes the daemon keep.
	ask := func() error {
		resp, err := http.Post(base+"/api/v1/runs?profile=p", "", nil)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	if err := ask(); err != nil {
		return "", err
	}
	peak := before
	var run daemon.RunRecord
	started := time.Now()
	var quarters []string
	var runs, requests int
	var lastID int64
	nextQuarter, nextProgress := m.soak/4, time.Minute
	for deadline := started.Add(5*time.Minute + m.soak); ; time.Sleep(100 * time.Millisecond) {
		r, err := rss(cmd.Process.Pid)
		if err == nil {
			peak = max(peak, r)
		}
		ran := time.Since(started)
		if m.soak > 0 && err == nil {
			if ran >= nextQuarter && len(quarters) < 4 {
				quarters = append(quarters, fmt.Sprintf("%d MiB", r>>20))
				nextQuarter += m.soak / 4
			}
			if ran >= nextProgress {
				fmt.Fprintf(os.Stderr, "%s: %v of %v, %d runs, RSS %d MiB, peak %d MiB\n", m.name, ran.Round(time.Second), m.soak, runs, r>>20, peak>>20)
				nextProgress += time.Minute
			}
		}
		if last, ok := lastRun(base); ok && last.Finished() && last.Summary != nil && last.ID != lastID {
			lastID, run = last.ID, last
			runs++
			requests += last.Summary.Requests
			if ran < m.soak {
				if err := ask(); err != nil {
					return "", err
				}
				continue
			}
			break
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the runs did not end in %v", 5*time.Minute+m.soak)
		}
	}
	for end := time.Now().Add(idle); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if r, err := rss(cmd.Process.Pid); err == nil {
			peak = max(peak, r)
		}
	}
	after, err := rss(cmd.Process.Pid)
	if err != nil {
		return "", err
	}
	dropped := metricSum(base, "tokenprobe_otlp_dropped_total")
	sent := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	var exit string
	select {
	case err := <-exited:
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		exit = fmt.Sprintf("%.1f s, exit %d", time.Since(sent).Seconds(), code)
	case <-time.After(60 * time.Second):
		exit = "over 60 s (killed)"
	}
	outcome := fmt.Sprintf("%d, %s", run.Summary.Requests, run.Result)
	if len(run.Summary.ByReason) > 0 {
		outcome += fmt.Sprintf(" (errors %v)", run.Summary.ByReason)
	}
	if run.Summary.WrongAnswers > 0 {
		outcome += fmt.Sprintf(" (%d wrong answers)", run.Summary.WrongAnswers)
	}
	if m.otlp {
		outcome += fmt.Sprintf("; %.0f spans and points dropped and counted", dropped)
	}
	if m.soak > 0 {
		outcome = fmt.Sprintf("%d in %d runs, the last %s", requests, runs, run.Result)
		return fmt.Sprintf("%s | %d MiB | %s | %d MiB | %d MiB | %s", outcome, before>>20, strings.Join(quarters, ", "), peak>>20, after>>20, exit), nil
	}
	return fmt.Sprintf("%s | %d MiB | %d MiB | %d MiB | %s", outcome, before>>20, peak>>20, after>>20, exit), nil
}

func lastRun(base string) (daemon.RunRecord, bool) {
	resp, err := http.Get(base + "/api/v1/runs")
	if err != nil {
		return daemon.RunRecord{}, false
	}
	defer resp.Body.Close()
	var out struct {
		Runs []daemon.RunRecord `json:"runs"`
	}
	if json.NewDecoder(resp.Body).Decode(&out) != nil || len(out.Runs) == 0 {
		return daemon.RunRecord{}, false
	}
	return out.Runs[0], true
}

// metricSum is the sum of a metric's samples on the daemon's /metrics.
func metricSum(base, name string) float64 {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// rss is a process's resident set size, from /proc.
func rss(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			f := strings.Fields(string(rest))
			kb, err := strconv.ParseUint(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

func get(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}

func waitFor(limit time.Duration, cond func() bool) error {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return nil
		}
	}
	return fmt.Errorf("not within %v", limit)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "rss:", err)
	os.Exit(1)
}

// expand puts the mode's address and folder in for %[1]s and %[2]s in a
// text naming them; one that names neither is left as it is (Sprintf
// would append its unused arguments).
func expand(text, url, dir string) string {
	if !strings.Contains(text, "%[") {
		return text
	}
	return fmt.Sprintf(text, url, dir)
}
