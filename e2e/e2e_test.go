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
	"github.com/tokenprobe/tokenprobe/probe"
	"github.com/tokenprobe/tokenprobe/sim"
	"github.com/tokenprobe/tokenprobe/web"
)

// scale compresses time: an hour of the rules' windows is a minute here.
const scale = 60

// Two replicas (--shard.count 2) share it: cliff runs on the one its name
// hashes to, steady on both, half its load each. Cliff's simulator runs
// apart, as a model server would, so that Prometheus scrapes its vLLM
// series too (%[1]s is its address) and the daemons read them during runs
// as server_metrics; steady has a simulator of its own in each replica, so
// that cliff's server sees cliff's requests only and splits its TTFT.
//
// The simulator's prefill puts TTFT near 200 ms at concurrency 1, so that
// a pause of the whole test machine (a CI run saw 250 ms) does not look
// like a 4x cliff in the baseline's 5-second windows, as it did with a
// 40 ms floor; at concurrency 24 the queue puts TTFT near 1.7 s.
const profile = `
endpoints:
  - name: sim
    base_url: http://%[1]s/v1
    model: tokenprobe-sim
    server_metrics: {url: "http://%[1]s/metrics", kind: vllm}
  # A model of its own: the server rules join tokenprobe's TTFT to the
  # servers' by model, and this simulator is not scraped.
  - name: steady-sim
    simulator: {slots: 4, prefill_base: 10ms, decode_base: 5ms, seed: 2}
    model: steady-model
profiles:
  - name: cliff
    endpoints: [sim]
    load:
      stages:
        - {concurrency: 1, duration: 75s}
        - {concurrency: 24, duration: 30s}
    workload: {input_tokens: {mean: 100}, output_tokens: {mean: 16}}
    slo: {ttft: 500ms, objective: 0.9}
    # Only the test's own run: an hourly tick (at a fixed minute, from the
    # job's name) right after it would add a second run's requests.
    schedule: {manual: true}
  # Split over the two replicas: both export its series and objective,
  # which the rules must aggregate (a many-to-many match fails a rule).
  - name: steady
    endpoints: [steady-sim]
    shard: {split: true}
    load: {concurrency: 2, duration: 20s}
    workload: {input_tokens: {mean: 20}, output_tokens: {mean: 8}}
    slo: {ttft: 2s, objective: 0.5}
    schedule: {continuous: true}
`

// simulator is the model's server of the test: the model the profile's
// simulator block used to describe.
var simulator = sim.Config{Model: "tokenprobe-sim", Slots: 4, PrefillBase: 100 * time.Millisecond, PrefillPerToken: time.Millisecond,
	DecodeBase: 5 * time.Millisecond, DecodeSlowdown: 0.05, Seed: 1}

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

// query runs an instant query now and returns the first sample's value,
// or false when the result is empty.
func query(t *testing.T, base, q string) (float64, bool) {
	t.Helper()
	return queryAt(t, base, q, time.Time{})
}

// queryAt runs an instant query at when (now, when zero) and returns the
// first sample's value, or false when the result is empty.
func queryAt(t *testing.T, base, q string, when time.Time) (float64, bool) {
	t.Helper()
	u := base + "/api/v1/query?query=" + url.QueryEscape(q)
	if !when.IsZero() {
		u += "&time=" + strconv.FormatInt(when.Unix(), 10)
	}
	resp, err := http.Get(u)
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

// server is one Prometheus scraping the daemon under one setting.
type server struct {
	name   string
	bin    string
	flags  []string
	scrape string // extra lines of the scrape job
	native bool   // keeps native histograms
	both   bool   // keeps classic buckets beside them
	otlp   bool   // also receives the daemon's OTLP push
	base   string
}

// servers are the scrape settings users have, in Debian's Prometheus 2.42
// and, where .ci/run built it (TOKENPROBE_PROMETHEUS3), a current 3.x:
// the text format (classic buckets only), protobuf with native histograms
// on (Prometheus keeps only the native form of a histogram that has one;
// the recording rules used to read classic buckets alone and returned
// nothing there) and, in 3.x, both forms kept. The 3.x server that keeps
// both also receives the OTLP push, as a Prometheus that is also an OTLP
// backend would.
func servers(t *testing.T) []*server {
	v2 := prometheusBinary(t)
	out := []*server{
		{name: "2.42 classic only", bin: v2},
		{name: "2.42 native only", bin: v2, flags: []string{"--enable-feature=native-histograms"}, native: true},
	}
	v3 := os.Getenv("TOKENPROBE_PROMETHEUS3")
	switch {
	case v3 != "":
		out = append(out,
			&server{name: "3.x classic only", bin: v3},
			&server{name: "3.x native only", bin: v3, scrape: "    scrape_native_histograms: true\n", native: true},
			&server{name: "3.x both, and OTLP", bin: v3, flags: []string{"--web.enable-otlp-receiver"},
				scrape: "    scrape_native_histograms: true\n    always_scrape_classic_histograms: true\n", native: true, both: true, otlp: true})
	case os.Getenv("TOKENPROBE_REQUIRE_PROMETHEUS3") != "":
		t.Fatal("TOKENPROBE_REQUIRE_PROMETHEUS3 is set and TOKENPROBE_PROMETHEUS3 names no binary (make prometheus3)")
	default:
		t.Log("no Prometheus 3 (TOKENPROBE_PROMETHEUS3): 2.42 only")
	}
	return out
}

// One run of the daemon, scraped at once by a Prometheus per setting: in
// each, the cliff alert stays quiet through the baseline and fires in
// overload, the attainment the recording rules compute matches the
// daemon's summary, and every dashboard query returns data.
func TestE2EAlertsInARealPrometheus(t *testing.T) {
	proms := servers(t)
	if testing.Short() {
		t.Skip("runs for about two minutes")
	}
	dir := t.TempDir()
	model, err := sim.Start("127.0.0.1:0", simulator)
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	addrs := map[*server]string{}
	for _, p := range proms {
		addrs[p] = freeAddr(t)
	}

	// The two replicas, each with its simulator, on real ports. The one
	// that runs cliff pushes OTLP to the server that takes it; the other
	// does not, as in-process replicas would push the same series under
	// one instance.
	var probeAddrs []string
	for i := range 2 {
		body := fmt.Sprintf(profile, model.Addr())
		for _, p := range proms {
			if p.otlp && probe.Owns("cliff/sim", i, 2) {
				body += fmt.Sprintf("otlp: {protocol: http, endpoint: \"http://%s/api/v1/otlp/v1/metrics\", insecure: true, interval: 2s}\n", addrs[p])
			}
		}
		cfg := filepath.Join(dir, fmt.Sprintf("tokenprobe-%d.yaml", i))
		if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		d, err := daemon.New(daemon.Options{ConfigFile: cfg, Registerer: reg, ShardIndex: i, ShardCount: 2})
		if err != nil {
			t.Fatal(err)
		}
		addr := freeAddr(t)
		probeAddrs = append(probeAddrs, addr)
		srv := &http.Server{Addr: addr, Handler: web.Handler(d, web.Options{Lifecycle: true, Gatherer: reg})}
		go func() { _ = srv.ListenAndServe() }()
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = d.Shutdown(ctx)
			_ = srv.Shutdown(ctx)
		}()
	}

	// Each Prometheus scrapes it every second, with the rules at
	// compressed time.
	o := alerts.Defaults()
	o.Scale = scale
	rules, err := alerts.Marshal(alerts.Generate(o))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range proms {
		pdir := filepath.Join(dir, fmt.Sprint(i))
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pdir, "rules.yaml"), rules, 0o644); err != nil {
			t.Fatal(err)
		}
		promCfg := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [rules.yaml]\nscrape_configs:\n  - job_name: tokenprobe\n%s    static_configs: [{targets: [%q, %q]}]\n  - job_name: vllm\n    static_configs: [{targets: [%q]}]\n",
			p.scrape, probeAddrs[0], probeAddrs[1], model.Addr())
		if err := os.WriteFile(filepath.Join(pdir, "prometheus.yml"), []byte(promCfg), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(p.bin, append([]string{"--config.file=" + filepath.Join(pdir, "prometheus.yml"), "--storage.tsdb.path=" + filepath.Join(pdir, "data"),
			"--web.listen-address=" + addrs[p], "--log.level=warn"}, p.flags...)...)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		p.base = "http://" + addrs[p]
	}
	for _, p := range proms {
		waitUntil(t, 30*time.Second, p.name+" to scrape tokenprobe", func() bool {
			v, ok := query(t, p.base, `sum(up{job="tokenprobe"})`)
			return ok && v == 2
		})
	}

	// One run: 75 s at concurrency 1, then 30 s at 24 past the 4 slots,
	// on the replica that owns cliff (the other answers 404).
	probeAddr := ""
	for _, addr := range probeAddrs {
		resp, err := http.Post("http://"+addr+"/api/v1/runs?profile=cliff", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusAccepted:
			probeAddr = addr
		case http.StatusNotFound:
		default:
			t.Fatalf("run now on %s: %s", addr, resp.Status)
		}
	}
	if probeAddr == "" {
		t.Fatal("no replica runs cliff")
	}
	start := time.Now()
	firing := func(p *server) bool {
		_, ok := query(t, p.base, `ALERTS{alertname="TokenprobeTTFTCliff",alertstate="firing",profile="cliff"}`)
		return ok
	}
	// Through the baseline stage the cliff alert stays quiet everywhere.
	for time.Since(start) < 73*time.Second {
		for _, p := range proms {
			if firing(p) {
				t.Fatalf("%s: the TTFT cliff alert fired %v into the baseline stage", p.name, time.Since(start).Round(time.Second))
			}
		}
		time.Sleep(time.Second)
	}
	// In overload it fires everywhere.
	for _, p := range proms {
		waitUntil(t, 30*time.Second, p.name+": the TTFT cliff alert in overload", func() bool { return firing(p) })
		t.Logf("%s: the TTFT cliff alert fired %v after the run started (overload from 75 s)", p.name, time.Since(start).Round(time.Second))
	}
	overload := time.Now()
	// Each kept the histograms in the form its setting says.
	for _, p := range proms {
		_, hasNative := query(t, p.base, `count(tokenprobe_time_to_first_token_seconds)`)
		_, hasClassic := query(t, p.base, `count(tokenprobe_time_to_first_token_seconds_bucket)`)
		if hasNative != p.native || hasClassic != (!p.native || p.both) {
			t.Errorf("%s: native histograms stored: %v, classic buckets: %v", p.name, hasNative, hasClassic)
		}
	}

	// After the run, the attainment from the recording rules matches the
	// daemon's summary.
	var summary struct {
		Runs []daemon.RunRecord `json:"runs"`
	}
	var run daemon.RunRecord
	waitUntil(t, 60*time.Second, "the run to end", func() bool {
		r, err := http.Get("http://" + probeAddr + "/api/v1/runs")
		if err != nil {
			return false
		}
		defer r.Body.Close()
		_ = json.NewDecoder(r.Body).Decode(&summary)
		for _, rec := range summary.Runs {
			if rec.Profile == "cliff" && rec.Result != daemon.ResultRunning {
				run = rec
				return true
			}
		}
		return false
	})
	time.Sleep(4 * time.Second) // the last scrape, rule evaluation and OTLP export
	// The simulator's vLLM series split the run's TTFT: the prefill at
	// concurrency 1, the queue at 24.
	if sv := run.Summary.Server; sv == nil || sv.Breakdown == nil {
		t.Errorf("the run's summary has no TTFT breakdown from the simulator's vLLM series: %+v", sv)
	} else {
		t.Logf("the run's breakdown: %s", sv.Breakdown.Verdict)
	}
	for i, want := range []string{"prefill", "queue"} {
		if len(run.Summary.Stages) != 2 {
			t.Errorf("%d stages in the summary, want 2", len(run.Summary.Stages))
			break
		}
		if b := run.Summary.Stages[i].Server; b == nil || b.Breakdown == nil || b.Breakdown.Dominant != want {
			t.Errorf("stage %d: breakdown %+v, want %s dominant", i, b, want)
		} else {
			t.Logf("stage %d: %s", i, b.Breakdown.Verdict)
		}
	}
	ended := time.Now()
	for _, p := range proms {
		// The 3-day window at this scale is 72 minutes: the whole run.
		v, ok := query(t, p.base, `1 - tokenprobe:slo_errors:ratio_rate3d{profile="cliff"}`)
		if !ok {
			t.Errorf("%s: no attainment from the recording rules", p.name)
			continue
		}
		t.Logf("%s: attainment: recording rules %.4f, daemon summary %.4f (%d requests)", p.name, v, run.Summary.Attainment, run.Summary.Requests)
		// Well into overload (its queue is full 15 s after the alert
		// fired) the server's TTFT, which starts at scheduling in the
		// simulator, leaves out the queue the users wait in (1.4 s): the
		// server rules show it as the hidden queue.
		if v, ok := queryAt(t, p.base, `tokenprobe:hidden_queue_seconds:mean5m{server="vllm",model="tokenprobe-sim"}`, overload.Add(15*time.Second)); !ok || v < 0.5 {
			t.Errorf("%s: hidden queue in overload %.3f s (found: %v), want the queue, over 0.5 s", p.name, v, ok)
		} else {
			t.Logf("%s: hidden queue in overload from the server rules: %.3f s", p.name, v)
		}
		if d := v - run.Summary.Attainment; d > 0.03 || d < -0.03 {
			t.Errorf("%s: recording rules say %.4f, the daemon %.4f", p.name, v, run.Summary.Attainment)
		}
		rulesHealthy(t, p)
		dashboardsShowData(t, p, overload, ended)
		if p.otlp {
			otlpArrived(t, p, run)
		}
	}
}

// rulesHealthy checks that every rule evaluated without error: with two
// replicas exporting one profile, a rule that matched many-to-many would
// fail every evaluation (as the budget-burn rules once did).
func rulesHealthy(t *testing.T, p *server) {
	t.Helper()
	resp, err := http.Get(p.base + "/api/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			Groups []struct {
				Rules []struct{ Name, Health, LastError string }
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range out.Data.Groups {
		for _, r := range g.Rules {
			n++
			if r.Health != "ok" {
				t.Errorf("%s: rule %s: %s %s", p.name, r.Name, r.Health, r.LastError)
			}
		}
	}
	if n == 0 {
		t.Errorf("%s: no rules loaded", p.name)
	}
}

// otlpArrived checks the OTLP push in a Prometheus that received it: the
// gen_ai TTFT histogram counts every successful request of the run, with
// the run's attributes.
func otlpArrived(t *testing.T, p *server, run daemon.RunRecord) {
	t.Helper()
	q := fmt.Sprintf(`histogram_count(sum(gen_ai_client_operation_time_to_first_chunk_seconds{tokenprobe_profile="cliff",tokenprobe_endpoint="sim",gen_ai_request_model=%q}))`, run.Summary.Model)
	var n float64
	var got bool
	waitUntilf(t, 20*time.Second, func() string {
		return fmt.Sprintf("%s: the OTLP push of the whole run (%d requests; last query: %v, found %v)", p.name, run.Summary.TTFT.Count, n, got)
	}, func() bool {
		n, got = query(t, p.base, q)
		return got && int(n) == run.Summary.TTFT.Count
	})
	t.Logf("%s: gen_ai_client_operation_time_to_first_chunk_seconds counts %v requests over OTLP, the run's summary %d", p.name, n, run.Summary.TTFT.Count)
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
func dashboardsShowData(t *testing.T, p *server, at ...time.Time) {
	t.Helper()
	files, err := dashboards.Files()
	if err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer(`$profile`, `.*`, `$endpoint`, `.*`, `$model`, `.*`, `$server`, `vllm`, `$__rate_interval`, `10s`, `$__range`, `2m`)
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
		for _, panel := range d.Panels {
			for _, target := range panel.Targets {
				for part, why := range noDataBecause {
					if strings.Contains(target.Expr, part) {
						if !reasonsLogged {
							t.Logf("%s / %s: not checked: %s", name, panel.Title, why)
						}
						continue queries
					}
				}
				checked++
				n := 0
				for _, when := range at {
					n = max(n, results(t, p.base, vars.Replace(target.Expr), when))
				}
				if n == 0 {
					t.Errorf("%s: %s / %s: no data: %s", p.name, name, panel.Title, target.Expr)
				}
			}
		}
	}
	t.Logf("%s: %d dashboard queries returned data", p.name, checked)
	reasonsLogged = true
}

// reasonsLogged: the queries not checked are the same for every server,
// said once.
var reasonsLogged bool

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
	waitUntilf(t, limit, func() string { return what }, cond)
}

// waitUntilf is waitUntil with a message made when it fails, so that it
// can say what was last seen.
func waitUntilf(t *testing.T, limit time.Duration, what func() string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out after %v waiting for %s", limit, what())
}
