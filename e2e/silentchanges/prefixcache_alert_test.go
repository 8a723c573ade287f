package silentchanges

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
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenprobe/tokenprobe/alerts"
	"github.com/tokenprobe/tokenprobe/dashboards"
	"github.com/tokenprobe/tokenprobe/internal/daemon"
	"github.com/tokenprobe/tokenprobe/internal/realserver"
	"github.com/tokenprobe/tokenprobe/internal/timingtest"
	"github.com/tokenprobe/tokenprobe/internal/web"
)

// The daemon probes llama-server (slowPrefill, one for each endpoint)
// every 2 s: as served, and with every request asking cache_prompt: false. Debian's
// Prometheus 2.42 scrapes it with the shipped rules (their hour-long
// window 60 times shorter): TokenprobePrefixCacheBroken fires for the
// defeated endpoint, and never for the served one over six runs of each.
func TestPrefixCacheBrokenAlertsInPrometheus(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("TOKENPROBE_REQUIRE_PROMTOOL") != "" {
			t.Fatal("prometheus not on PATH, and TOKENPROBE_REQUIRE_PROMTOOL is set")
		}
		t.Skip("prometheus not on PATH (apt-get install prometheus)")
	}
	srv, other := realserver.SlowPrefill(t), realserver.SlowPrefill(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf(`endpoints:
  - {name: served, base_url: %[1]q, model: %[3]q, timeout: 60s}
  - {name: defeated, base_url: %[2]q, model: %[3]q, timeout: 60s, extra_body: {cache_prompt: false}}
profiles:
  - name: cache
    endpoints: [served, defeated]
    prefix_cache: {prefix_tokens: 512}
    schedule: {every: 2s}
`, srv.URL+"/v1", other.URL+"/v1", srv.Model)
	cfgFile := filepath.Join(dir, "tokenprobe.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	probeAddr := loopbackAddr(t)
	reg := prometheus.NewRegistry()
	d, err := daemon.New(daemon.Options{ConfigFile: cfgFile, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Addr: probeAddr, Handler: web.Handler(d, web.Options{Gatherer: reg})}
	go func() { _ = hs.ListenAndServe() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
		_ = hs.Shutdown(ctx)
	})

	o := alerts.Defaults()
	o.Scale = 60
	rules, err := alerts.Marshal(alerts.Generate(o))
	if err != nil {
		t.Fatal(err)
	}
	promCfg := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [rules.yaml]\n"+
		"scrape_configs:\n  - job_name: tokenprobe\n    static_configs: [{targets: [%q]}]\n", probeAddr)
	for file, b := range map[string][]byte{"rules.yaml": rules, "prometheus.yml": []byte(promCfg)} {
		if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	promAddr := loopbackAddr(t)
	cmd := exec.Command(prom, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr, "--log.level=error")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	base := "http://" + promAddr

	firing := func(endpoint string) bool {
		return len(promQuery(t, base, fmt.Sprintf(`ALERTS{alertname="TokenprobePrefixCacheBroken",alertstate="firing",endpoint=%q}`, endpoint))) > 0
	}
	runs := func(endpoint string) int {
		n := 0
		recent, _ := d.History().Runs()
		for _, r := range recent {
			if r.Endpoint == endpoint && r.Finished() && r.Summary != nil && r.Summary.PrefixCache != nil {
				n++
			}
		}
		return n
	}
	timingtest.Until(t, func() string {
		return fmt.Sprintf("TokenprobePrefixCacheBroken for the defeated endpoint (firing: %v), and six runs of each (served %d, defeated %d)", firing("defeated"), runs("served"), runs("defeated"))
	}, func() bool { return firing("defeated") && runs("served") >= 6 && runs("defeated") >= 6 }, nil)
	verdicts := map[string]int{}
	recent, _ := d.History().Runs()
	for _, r := range recent {
		if pc := r.Summary; pc != nil && pc.PrefixCache != nil {
			verdicts[r.Endpoint+" "+string(pc.PrefixCache.Verdict)]++
		}
	}
	t.Logf("verdicts: %v", verdicts)
	if got := promQuery(t, base, `max_over_time(ALERTS{alertname="TokenprobePrefixCacheBroken",endpoint="served"}[10m])`); len(got) > 0 {
		t.Fatalf("TokenprobePrefixCacheBroken fired for the working cache (verdicts %v)", verdicts)
	}
	// The cliff dashboard's panel has its lines: the speed-up and both
	// bounds of each endpoint, its queries as the dashboard has them.
	files, err := dashboards.Files()
	if err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer(`$profile`, `.*`, `$endpoint`, `.*`, `$location`, `.*`)
	checked := 0
	for _, b := range files {
		var d struct {
			Panels []struct{ Targets []struct{ Expr string } }
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		for _, p := range d.Panels {
			for _, target := range p.Targets {
				if !strings.Contains(target.Expr, "prefix_cache") {
					continue
				}
				want := 2
				if strings.Contains(target.Expr, "interval") {
					want = 4
				}
				if got := promQuery(t, base, vars.Replace(target.Expr)); len(got) != want {
					t.Errorf("the dashboard's %s: %d series, want %d: %v", target.Expr, len(got), want, got)
				}
				checked++
			}
		}
	}
	if checked == 0 {
		t.Error("no dashboard query reads the prefix cache's series")
	}
}

func loopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// promQuery is an instant query's samples' label sets (none on an error:
// a Prometheus still starting answers nothing yet).
func promQuery(t *testing.T, base, q string) []map[string]string {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		} `json:"data"`
	}
	if json.NewDecoder(resp.Body).Decode(&out) != nil {
		return nil
	}
	var sets []map[string]string
	for _, r := range out.Data.Result {
		sets = append(sets, r.Metric)
	}
	return sets
}
