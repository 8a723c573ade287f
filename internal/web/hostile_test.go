package web

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenprobe/tokenprobe/internal/daemon"
	"github.com/tokenprobe/tokenprobe/internal/hostile"
	"github.com/tokenprobe/tokenprobe/internal/redact"
	"github.com/tokenprobe/tokenprobe/internal/syncbuf"
)

// The daemon against every hostile endpoint at once, beside a healthy job:
// the healthy job keeps its schedule, the daemon keeps answering, every
// misbehaviour is classified and counted, and the planted keys (a bearer
// key and a secret header, which the hostile server echoes in a 401 body,
// an error event and a good stream's content) appear in no log line at
// debug level, no page, no API answer and no metric.
func TestHostileEndpointsStopNothingAndLeakNothing(t *testing.T) {
	// Recursion without a bound on a 40 MB nested body crashes this test,
	// not the machine.
	defer debug.SetMaxStack(debug.SetMaxStack(64 << 20))
	const key, headerSecret = "sk-hostile-planted-7c1e9d2b", "tenant-secret-5a8f3e61"
	t.Setenv("TOKENPROBE_HOSTILE_KEY", key)
	t.Setenv("TOKENPROBE_HOSTILE_HEADER", headerSecret)
	h, err := hostile.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	behaviours := []string{hostile.Echo401, hostile.EchoEvent, hostile.EchoContent, hostile.Nested, hostile.Drain, hostile.Gzip, hostile.Switch,
		hostile.ManyChunks, hostile.AbsurdUsage, hostile.Escapes}
	var cfg strings.Builder
	cfg.WriteString("endpoints:\n  - {name: healthy, simulator: {slots: 4, decode_base: 1ms, prefill_base: 1ms, seed: 1}}\n")
	for _, b := range behaviours {
		fmt.Fprintf(&cfg, "  - {name: %s, base_url: '%s', model: m, timeout: 30s, api_key_env: TOKENPROBE_HOSTILE_KEY, headers: {X-Gateway-Token: {env: TOKENPROBE_HOSTILE_HEADER}}}\n", b, h.URL(b))
	}
	cfg.WriteString(`profiles:
  - name: healthy
    endpoints: [healthy]
    load: {concurrency: 1, requests: 2}
    workload: {output_tokens: {mean: 3}}
    schedule: {every: 1s}
  - name: hostile
    endpoints: [` + strings.Join(behaviours, ", ") + `]
    load: {concurrency: 2, requests: 4}
    workload: {output_tokens: {mean: 3}}
    schedule: {every: 1s}
  - name: hostile-whole
    endpoints: [nested, echo-401]
    load: {concurrency: 2, requests: 2}
    workload: {output_tokens: {mean: 3}, stream: false}
    schedule: {every: 1s}
`)
	path := filepath.Join(t.TempDir(), "tokenprobe.yaml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := prometheus.NewRegistry()
	d, err := daemon.New(daemon.Options{ConfigFile: path, Registerer: reg, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(d, Options{Lifecycle: true, Gatherer: reg, Logger: logger, Version: "test"}))
	f := &fixture{d: d, srv: srv, path: path}
	defer func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()

	const watch = 6 * time.Second
	time.Sleep(watch)
	if code, _ := f.do(t, "GET", "/-/healthy"); code != 200 {
		t.Fatalf("/-/healthy: %d", code)
	}
	recent, _ := d.History().Runs()
	healthy := 0
	for _, r := range recent {
		if r.Profile == "healthy" && r.Result == daemon.ResultPassed {
			healthy++
		}
	}
	t.Logf("the healthy job passed %d runs in %v beside the hostile ones", healthy, watch)
	// Every 1s for 6s: five or six runs, whatever the hostile jobs do.
	if healthy < 4 {
		for _, r := range recent {
			t.Logf("%s %s %s %v %s", r.Profile, r.Endpoint, r.Result, r.Start.Format("15:04:05.000"), r.End.Sub(r.Start))
		}
		_, m := f.do(t, "GET", "/metrics")
		for line := range strings.SplitSeq(m, "\n") {
			if strings.HasPrefix(line, "tokenprobe_runs_skipped_total{") && !strings.HasSuffix(line, " 0") {
				t.Log(line)
			}
		}
		t.Errorf("the healthy job passed %d runs in %v, want at least 4", healthy, watch)
	}
	_, metrics := f.do(t, "GET", "/metrics")
	for b, want := range map[string]string{
		hostile.Echo401:   `reason="auth"`,
		hostile.EchoEvent: `reason="stream"`,
		hostile.Nested:    `reason="stream"`,
		hostile.Gzip:      `reason="stream"`,
		hostile.Switch:    `reason="stream"`,
		// Ended at 4 x max_tokens + 64 content chunks, not read to 60 MB.
		hostile.ManyChunks: `reason="stream"`,
		hostile.Escapes:    `reason="server_error"`,
	} {
		if !hasPositive(metrics, "tokenprobe_request_errors_total{", `endpoint="`+b+`"`, want) {
			t.Errorf("%s: no %s errors counted", b, want)
		}
	}
	if !hasPositive(metrics, "tokenprobe_server_anomalies_total{", `endpoint="drain"`, `kind="drain"`) {
		t.Error("drain: no drain anomaly counted")
	}
	if !hasPositive(metrics, "tokenprobe_requests_total{", `endpoint="drain"`, `outcome="success"`) {
		t.Error("drain: its requests are measured in full, as successes")
	}
	// An absurd usage is not believed: counted as an anomaly, its tokens
	// counted from the chunks (two a request), never 9.2e18.
	if !hasPositive(metrics, "tokenprobe_server_anomalies_total{", `endpoint="absurd-usage"`, `kind="usage"`) {
		t.Error("absurd-usage: no usage anomaly counted")
	}
	for line := range strings.SplitSeq(metrics, "\n") {
		if strings.HasPrefix(line, "tokenprobe_output_tokens_total{") || strings.HasPrefix(line, "tokenprobe_input_tokens_total{") {
			if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err != nil || v > 1e6 {
				t.Errorf("a token counter took an absurd value: %s", line)
			}
		}
	}

	surfaces := map[string]string{"logs": logs.String()}
	for _, p := range []string{"/", "/config", "/api/v1/runs", "/metrics", "/-/ready"} {
		_, surfaces[p] = f.do(t, "GET", p)
	}
	recent, failed := d.History().Runs()
	for _, r := range append(recent, failed...) {
		p := fmt.Sprintf("/runs/%d", r.ID)
		_, surfaces[p] = f.do(t, "GET", p)
	}
	if !strings.Contains(surfaces["logs"], redact.Marker) {
		t.Error("the logs show no redacted text: the echoing endpoints were not logged")
	}
	shown := 0
	for _, text := range surfaces {
		if strings.Contains(text, "forged line") {
			shown++
		}
	}
	if shown == 0 {
		t.Error("the escapes endpoint's message is on no page nor log: the check below would prove nothing")
	}
	for name, text := range surfaces {
		// The server's text shows its control characters escaped: no
		// forged log line, no cleared terminal.
		if strings.ContainsAny(text, "\x1b\r") || strings.Contains(text, "\nlevel=error msg=\"forged line\"") {
			i := max(strings.IndexAny(text, "\x1b\r"), strings.Index(text, "forged line"))
			t.Errorf("%s shows the server's control characters raw: %q", name, text[max(0, i-80):min(len(text), i+40)])
		}
		for _, secret := range []string{key, headerSecret, key[:12], headerSecret[:12]} {
			if strings.Contains(text, secret) {
				i := strings.Index(text, secret)
				t.Errorf("%s shows %q: ...%s...", name, secret, text[max(0, i-120):min(len(text), i+60)])
			}
		}
	}
}

// hasPositive reports whether a series of metric with both labels has a
// value above 0 in a text exposition.
func hasPositive(exposition, metric, label1, label2 string) bool {
	for line := range strings.SplitSeq(exposition, "\n") {
		if strings.HasPrefix(line, metric) && strings.Contains(line, label1) && strings.Contains(line, label2) &&
			!strings.HasSuffix(line, " 0") {
			return true
		}
	}
	return false
}
