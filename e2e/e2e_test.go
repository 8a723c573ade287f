// Package e2e runs tokenprobe's alert rules in a real Prometheus server
// scraping a real daemon.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenprobe/tokenprobe/alerts"
	"github.com/tokenprobe/tokenprobe/daemon"
	"github.com/tokenprobe/tokenprobe/dashboards"
	"github.com/tokenprobe/tokenprobe/web"
)

// scale compresses time: an hour of the rules' windows is a minute here.
const scale = 60

// The simulator's prefill puts TTFT near 200 ms at concurrency 1, so that
// a pause of the whole test machine (a CI run saw 250 ms) does not look
// like a 4x cliff in the baseline's 5-second windows, as it did with a
// 40 ms floor; at concurrency 24 the queue puts TTFT near 1.7 s.
const profile = `
endpoints:
  - name: sim
    simulator: {slots: 4, prefill_base: 100ms, prefill_per_token: 1ms, decode_base: 5ms, decode_slowdown: 0.05, seed: 1}
profiles:
  - name: cliff
    endpoints: [sim]
    load:
      stages:
        - {concurrency: 1, duration: 75s}
        - {concurrency: 24, duration: 30s}
    workload: {input_tokens: {mean: 100}, output_tokens: {mean: 16}}
    slo: {ttft: 500ms, objective: 0.9}
    schedule: {every: 1h}
`

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func prometheusBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("TOKENPROBE_REQUIRE_PROMTOOL") != "" {
			t.Fatal("prometheus not on PATH, and TOKENPROBE_REQUIRE_PROMTOOL is set")
		}
		t.Skip("prometheus not on PATH (apt-get install prometheus)")
	}
	return p
}

// query runs an instant query and returns the first sample's value, or
// false when the result is empty.
func query(t *testing.T, base, q string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Data.Result) == 0 {
		return 0, false
	}
	v, _ := strconv.ParseFloat(out.Data.Result[0].Value[1].(string), 64)
	return v, true
}

// The rules run under the scrape settings users have: the text format,
// where Prometheus keeps classic buckets only, and protobuf with native
// histograms on, where Prometheus 2.x keeps only the native form of a
// histogram that has one (the recording rules used to read classic
// buckets alone, and returned nothing there).
func TestE2EAlertsInARealPrometheus(t *testing.T) {
	bin := prometheusBinary(t)
	if testing.Short() {
		t.Skip("runs for about two minutes per scrape setting")
	}
	for _, setting := range []struct {
		name  string
		flags []string
	}{
		{"classic only", nil},
		{"native only", []string{"--enable-feature=native-histograms"}},
	} {
		t.Run(setting.name, func(t *testing.T) { alertsInARealPrometheus(t, bin, setting.flags) })
	}
}

func alertsInARealPrometheus(t *testing.T, bin string, flags []string) {
	dir := t.TempDir()

	// The daemon, with its simulator, on a real port.
	cfg := filepath.Join(dir, "tokenprobe.yaml")
	if err := os.WriteFile(cfg, []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	d, err := daemon.New(daemon.Options{ConfigFile: cfg, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	probeAddr := freeAddr(t)
	srv := &http.Server{Addr: probeAddr, Handler: web.Handler(d, web.Options{Lifecycle: true, Gatherer: reg})}
	go func() { _ = srv.ListenAndServe() }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
		_ = srv.Shutdown(ctx)
	}()

	// Prometheus scraping it every second with the rules at compressed time.
	o := alerts.Defaults()
	o.Scale = scale
	rules, err := alerts.Marshal(alerts.Generate(o))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	promCfg := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [rules.yaml]
scrape_configs:
  - job_name: tokenprobe
    static_configs: [{targets: [%q]}]
`, probeAddr)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(promCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := freeAddr(t)
	prom := exec.Command(bin, append([]string{"--config.file=" + filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + promAddr, "--log.level=warn"}, flags...)...)
	prom.Stderr = os.Stderr
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = prom.Process.Kill(); _ = prom.Wait() }()
	base := "http://" + promAddr
	waitUntil(t, 30*time.Second, "Prometheus to scrape tokenprobe", func() bool {
		v, ok := query(t, base, `up{job="tokenprobe"}`)
		return ok && v == 1
	})

	// One run: 75 s at concurrency 1, then 30 s at 24 past the 4 slots.
	// 409 means the hourly schedule started the same run a moment ago:
	// its tick falls at a fixed minute of the hour, which a test run
	// sometimes meets.
	resp, err := http.Post("http://"+probeAddr+"/api/v1/runs?profile=cliff", "", nil)
	if err != nil || (resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusConflict) {
		t.Fatalf("run now: %v %v", err, resp)
	}
	resp.Body.Close()
	start := time.Now()
	firing := func() bool {
		_, ok := query(t, base, `ALERTS{alertname="TokenprobeTTFTCliff",alertstate="firing",profile="cliff"}`)
		return ok
	}
	// Through the baseline stage the cliff alert stays quiet.
	for time.Since(start) < 73*time.Second {
		if firing() {
			t.Fatalf("the TTFT cliff alert fired %v into the baseline stage", time.Since(start).Round(time.Second))
		}
		time.Sleep(time.Second)
	}
	// In overload it fires.
	waitUntil(t, 30*time.Second, "the TTFT cliff alert in overload", firing)
	t.Logf("the TTFT cliff alert fired %v after the run started (overload from 75 s)", time.Since(start).Round(time.Second))
	overload := time.Now()
	// The histograms were stored in the form the setting keeps.
	native := len(flags) > 0
	_, hasNative := query(t, base, `count(tokenprobe_time_to_first_token_seconds)`)
	_, hasClassic := query(t, base, `count(tokenprobe_time_to_first_token_seconds_bucket)`)
	if hasNative != native || hasClassic == native {
		t.Fatalf("native histograms stored: %v, classic buckets: %v; native histograms on: %v", hasNative, hasClassic, native)
	}

	// After the run, the attainment from the recording rules matches the
	// daemon's summary.
	var summary struct {
		Runs []daemon.RunRecord `json:"runs"`
	}
	waitUntil(t, 60*time.Second, "the run to end", func() bool {
		r, err := http.Get("http://" + probeAddr + "/api/v1/runs")
		if err != nil {
			return false
		}
		defer r.Body.Close()
		_ = json.NewDecoder(r.Body).Decode(&summary)
		return len(summary.Runs) == 1 && summary.Runs[0].Result != daemon.ResultRunning
	})
	run := summary.Runs[0]
	time.Sleep(3 * time.Second) // the last scrape and rule evaluation
	// The 3-day window at this scale is 72 minutes: the whole run.
	v, ok := query(t, base, `1 - tokenprobe:slo_errors:ratio_rate3d{profile="cliff"}`)
	if !ok {
		t.Fatal("no attainment from the recording rules")
	}
	t.Logf("attainment: recording rules %.4f, daemon summary %.4f (%d requests)", v, run.Summary.Attainment, run.Summary.Requests)
	if d := v - run.Summary.Attainment; d > 0.03 || d < -0.03 {
		t.Errorf("recording rules say %.4f, the daemon %.4f", v, run.Summary.Attainment)
	}
	dashboardsShowData(t, base, overload, time.Now())
}

// noDataBecause are the dashboard queries allowed to be empty here, and why.
var noDataBecause = map[string]string{
	"DCGM_":                           "GPU series: there is no GPU and no gpu block here",
	"tokenprobe_gpu_source_up":        "exported only with a gpu block",
	"tokenprobe_request_errors_total": "the panel draws only error reasons that occur (> 0), and no request of this run failed",
}

// dashboardsShowData evaluates every query of every generated dashboard,
// its variables set to match everything, at the two moments given (in
// overload, and after the run ended): each must return data at one of
// them, unless noDataBecause says why it cannot here.
func dashboardsShowData(t *testing.T, base string, at ...time.Time) {
	t.Helper()
	files, err := dashboards.Files()
	if err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer(`$profile`, `.*`, `$endpoint`, `.*`, `$model`, `.*`, `$__rate_interval`, `10s`, `$__range`, `2m`)
	checked := 0
	for name, b := range files {
		var d struct {
			Panels []struct {
				Title   string
				Targets []struct{ Expr string }
			}
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	queries:
		for _, p := range d.Panels {
			for _, target := range p.Targets {
				for part, why := range noDataBecause {
					if strings.Contains(target.Expr, part) {
						t.Logf("%s / %s: not checked: %s", name, p.Title, why)
						continue queries
					}
				}
				checked++
				n := 0
				for _, when := range at {
					n = max(n, results(t, base, vars.Replace(target.Expr), when))
				}
				if n == 0 {
					t.Errorf("%s / %s: no data: %s", name, p.Title, target.Expr)
				}
			}
		}
	}
	t.Logf("%d dashboard queries returned data", checked)
}

// results is the number of series an instant query returns at when.
func results(t *testing.T, base, q string, when time.Time) int {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q) + "&time=" + strconv.FormatInt(when.Unix(), 10))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Status string
		Error  string
		Data   struct{ Result []json.RawMessage }
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Status != "success" {
		t.Fatalf("%s: %v %s", q, err, out.Error)
	}
	return len(out.Data.Result)
}

func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out after %v waiting for %s", limit, what)
}
