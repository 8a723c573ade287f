package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenprobe/tokenprobe/alerts"
	"github.com/tokenprobe/tokenprobe/internal/daemon"
	"github.com/tokenprobe/tokenprobe/internal/realserver"
	"github.com/tokenprobe/tokenprobe/internal/web"
)

// In a real Prometheus scraping both a daemon and llm-d-inference-sim,
// whose TTFT clock starts at scheduling, under load past its 4 slots, the
// rules put the server's queue beside the users' TTFT and the time outside
// the server within 10 ms of the truth on localhost (a few milliseconds of
// the client's and the server's front end), with the queue longer than the
// server's TTFT (16 streams, a 20 ms prefill) and shorter (5 streams, a
// 200 ms prefill: the 139 ms queue against a 200 ms TTFT, where the
// rule read 151-174 ms). The rule reads the clock the daemon's runs found
// (tokenprobe_server_ttft_clock_info). Bounded by what the rules record,
// not by a fixed wait.
func TestE2EOutsideTheServerOfASchedulingClock(t *testing.T) {
	for _, c := range []struct {
		name             string
		streams, prefill int
	}{
		{"a queue longer than the server's TTFT", 16, 20},
		{"a queue shorter than the server's TTFT", 5, 200},
	} {
		t.Run(c.name, func(t *testing.T) { outsideOfASchedulingClock(t, c.streams, c.prefill) })
	}
}

func outsideOfASchedulingClock(t *testing.T, streams, prefillMs int) {
	bin := prometheusBinary(t)
	srv := realserver.LLMDSim(t, "llmd-model", "--max-num-seqs", "4", "--prefill-overhead", fmt.Sprintf("%dms", prefillMs),
		"--inter-token-latency", "10ms", "--seed", "1")
	dir := t.TempDir()
	probeAddr, promAddr := freeAddr(t), freeAddr(t)
	// 30-second windows (a tenth of production's 5 minutes): 5-second
	// ones hold too few requests for a mean of the part outside.
	o := compressed()
	o.Scale = 10
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
    load: {concurrency: %[2]d, duration: 5s}
    workload: {input_tokens: {mean: 64}, output_tokens: {mean: 32}}
    schedule: {continuous: true}
`, srv.URL, streams)
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

	// Ten evaluations that see the server's queue and the part outside
	// it: their median within 10 ms of the truth. The server's means are
	// over the requests it finished in the window and the users' TTFT over
	// the first tokens that came in it, a few different requests at the
	// edges: in 5-second windows single readings moved by up to 40 ms with
	// a 500 ms queue, and medians of ten by up to 17.
	var outsides []float64
	var last string
	delay := 0.0 // the probe's own delay p99, the most any reading saw
	waitUntilf(t, 3*time.Minute, func() string { return "ten evaluations with the server's queue and the part outside it; last: " + last }, func() bool {
		queue, okQ := query(t, base, `tokenprobe:server_queue_seconds:mean5m{endpoint="llmd"}`)
		ttft, okT := query(t, base, `tokenprobe:server_ttft_seconds:mean5m{endpoint="llmd"}`)
		users, okU := query(t, base, `tokenprobe:ttft_seconds:mean5m{endpoint="llmd"}`)
		outside, okO := query(t, base, `tokenprobe:ttft_outside_server_seconds:mean5m{endpoint="llmd"}`)
		_, okC := query(t, base, `tokenprobe_server_ttft_clock_info{endpoint="llmd",clock="scheduling"}`)
		now := fmt.Sprintf("queue %v (%v), server TTFT %v (%v), users' %v (%v), outside %v (%v), scheduling clock found %v", queue, okQ, ttft, okT, users, okU, outside, okO, okC)
		if now == last || !okQ || !okT || !okU || !okO || !okC || queue < 0.02 {
			last = now
			return false // not yet, or the same evaluation read again
		}
		last = now
		outsides = append(outsides, outside)
		if d, ok := query(t, base, `max(tokenprobe:probe_delay_p99:rate5m)`); ok {
			delay = max(delay, d)
		}
		return len(outsides) >= 10
	})
	slices.Sort(outsides)
	median := (outsides[4] + outsides[5]) / 2
	t.Logf("outside the server: median %.1f ms of %v s, the probe's delay p99 %.1f ms; last %s", 1000*median, outsides, 1000*delay, last)
	// The truth on localhost: a few milliseconds of the client and the
	// server's front end before its TTFT clock starts; within 10 ms of it,
	// and the probe's own delay, which any of its timestamps may carry
	// (beside eight busy loops, about 10 ms: a median of -13.6 ms).
	if median < -0.010-delay || median > 0.020+delay {
		t.Fatalf("outside the server: median %.3f s on a scheduling clock on localhost, want within 10 ms (and the probe's delay p99, %.1f ms) of the few ms it is (%v s)", median, 1000*delay, outsides)
	}
}
