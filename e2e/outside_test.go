package e2e

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenprobe/tokenprobe/alerts"
	"github.com/tokenprobe/tokenprobe/internal/daemon"
	"github.com/tokenprobe/tokenprobe/internal/realserver"
	"github.com/tokenprobe/tokenprobe/internal/web"
)

// llmdSim is llm-d-inference-sim with 4 slots, a 20 ms prefill and 10 ms
// between tokens, as e2e/realservers runs it: a vLLM look-alike whose
// TTFT clock starts at scheduling.
func llmdSim(t *testing.T) *realserver.Server {
	return realserver.LLMDSim(t, "llmd-model", "--max-num-seqs", "4", "--prefill-overhead", "20ms",
		"--inter-token-latency", "10ms", "--seed", "1")
}

// In a real Prometheus scraping both a daemon and llm-d-inference-sim
// under load past its slots, the rules put the server's queue beside the
// users' TTFT, and record no "outside the server" part: the server's TTFT
// starts at scheduling, and users' TTFT less it would put its whole queue
// outside (4.3 s where the truth was about 2 ms). Bounded by what the
// rules record, not by a fixed wait.
func TestE2EOutsideTheServerOfASchedulingClock(t *testing.T) {
	bin := prometheusBinary(t)
	srv := llmdSim(t)
	dir := t.TempDir()
	probeAddr, promAddr := freeAddr(t), freeAddr(t)
	o := compressed()
	rules, err := alerts.Marshal(alerts.Generate(o))
	if err != nil {
		t.Fatal(err)
	}
	simAddr := strings.TrimPrefix(srv.URL, "http://")
	promCfg := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [rules.yaml]\nscrape_configs:\n  - job_name: tokenprobe\n    static_configs: [{targets: [%q]}]\n  - job_name: llmd\n    static_configs: [{targets: [%q]}]\n", probeAddr, simAddr)
	for name, body := range map[string][]byte{"rules.yaml": rules, "prometheus.yml": []byte(promCfg)} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	prom := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr, "--log.level=error")
	prom.Stderr = os.Stderr
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = prom.Process.Kill(); _ = prom.Wait() }()
	base := "http://" + promAddr
	waitUntil(t, 30*time.Second, "Prometheus to start", func() bool { _, ok := query(t, base, `vector(1)`); return ok })

	cfg := filepath.Join(dir, "tokenprobe.yaml")
	body := fmt.Sprintf(`endpoints:
  - name: llmd
    base_url: %[1]s/v1
    model: llmd-model
    timeout: 60s
    server_metrics: {url: "%[1]s/metrics"}
profiles:
  - name: queue
    endpoints: [llmd]
    load: {concurrency: 16, duration: 5s}
    workload: {input_tokens: {mean: 64}, output_tokens: {mean: 32}}
    schedule: {continuous: true}
`, srv.URL)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	d, err := daemon.New(daemon.Options{ConfigFile: cfg, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Addr: probeAddr, Handler: web.Handler(d, web.Options{Gatherer: reg})}
	go func() { _ = hs.ListenAndServe() }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
		_ = hs.Shutdown(ctx)
	}()

	// Five evaluations that see the server's queue (and its TTFT below
	// it), each with no outside part recorded.
	seen := 0
	var last string
	waitUntilf(t, 2*time.Minute, func() string { return "five evaluations with the server's queue; last: " + last }, func() bool {
		queue, okQ := query(t, base, `tokenprobe:server_queue_seconds:mean5m{endpoint="llmd"}`)
		ttft, okT := query(t, base, `tokenprobe:server_ttft_seconds:mean5m{endpoint="llmd"}`)
		users, okU := query(t, base, `tokenprobe:ttft_seconds:mean5m{endpoint="llmd"}`)
		outside, okO := query(t, base, `tokenprobe:ttft_outside_server_seconds:mean5m{endpoint="llmd"}`)
		last = fmt.Sprintf("queue %v (%v), server TTFT %v (%v), users' %v (%v), outside %v (%v)", queue, okQ, ttft, okT, users, okU, outside, okO)
		if !okQ || !okT || !okU || queue < 0.1 || ttft >= queue {
			return false
		}
		if okO && math.Abs(outside) > 0.010 {
			t.Fatalf("outside the server %.3f s recorded for a scheduling clock: %s", outside, last)
		}
		seen++
		return seen >= 5
	})
	t.Log(last)
}
