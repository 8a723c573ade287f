package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenprobe/tokenprobe/alerts"
	"github.com/tokenprobe/tokenprobe/dashboards"
	"github.com/tokenprobe/tokenprobe/internal/daemon"
)

// locationProfile is one location's daemon: its own gateway, which at
// eu and us falls back to another model for every request (%[1]g is the
// share), probed all the time. It pushes OTLP to %[2]s where set.
const locationProfile = `
endpoints:
  - name: gateway
    simulator: {slots: 4, prefill_base: 20ms, decode_base: 2ms, seed: 4, faults: {wrong_model: tiny-model, wrong_model_rate: %[1]g}}
    model: big-model
profiles:
  - name: answers
    endpoints: [gateway]
    load: {concurrency: 1, duration: 5s}
    workload: {input_tokens: {mean: 20}, output_tokens: {mean: 4}}
    schedule: {continuous: true}
    # Every answer at eu and us names the fallback, the first included: the
    # name asked for is known, so it is checked.
    checks: {model: exact}
%[2]s`

// Three locations probe one endpoint (each with a gateway of its own in
// front of it), two of them see wrong answers. Collected the two ways
// users run it:
//
//   - each location's Prometheus scrapes its tokenprobe and remote-writes
//     into one central Prometheus, which evaluates the generated rules:
//     the wrong-answer alert fires for eu and us alone, its quorum variant
//     once, and every recorded figure is one series per location, none
//     counted twice;
//   - every tokenprobe pushes OTLP into one Prometheus 3: its series keep
//     the three locations apart (the resource's tokenprobe.location,
//     promoted to a label), each request counted once.
func TestE2EQuorumAcrossLocations(t *testing.T) {
	v2 := prometheusBinary(t)
	if testing.Short() {
		t.Skip("runs for about a minute")
	}
	bin := v2
	v3 := os.Getenv("TOKENPROBE_PROMETHEUS3")
	if v3 != "" {
		bin = v3
	} else if os.Getenv("TOKENPROBE_REQUIRE_PROMETHEUS3") != "" {
		t.Fatal("TOKENPROBE_REQUIRE_PROMETHEUS3 is set and TOKENPROBE_PROMETHEUS3 names no binary")
	}
	dir := t.TempDir()
	o := compressed()
	rules, err := alerts.Marshal(alerts.Generate(o))
	if err != nil {
		t.Fatal(err)
	}
	start := func(name, bin, config string, rules []byte, flags ...string) string {
		pdir := filepath.Join(dir, name)
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			t.Fatal(err)
		}
		if rules != nil {
			if err := os.WriteFile(filepath.Join(pdir, "rules.yaml"), rules, 0o644); err != nil {
				t.Fatal(err)
			}
			config += "rule_files: [rules.yaml]\n"
		}
		if err := os.WriteFile(filepath.Join(pdir, "prometheus.yml"), []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
		addr := freeAddr(t)
		cmd := exec.Command(bin, append([]string{"--config.file=" + filepath.Join(pdir, "prometheus.yml"), "--storage.tsdb.path=" + filepath.Join(pdir, "data"),
			"--web.listen-address=" + addr, "--log.level=error"}, flags...)...)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		base := "http://" + addr
		waitUntil(t, 30*time.Second, name+" to start", func() bool { _, ok := query(t, base, `vector(1)`); return ok })
		return base
	}
	global := "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
	central := start("central", bin, global, rules, "--web.enable-remote-write-receiver")
	otlpBase := ""
	if v3 != "" {
		otlpBase = start("otlp", v3, global+"otlp: {promote_resource_attributes: [tokenprobe.location]}\n", nil, "--web.enable-otlp-receiver")
	}

	wrong := map[string]float64{"eu": 1, "us": 1, "ap": 0}
	locations := slices.Sorted(maps.Keys(wrong))
	for _, loc := range locations {
		push := ""
		if otlpBase != "" {
			push = fmt.Sprintf("otlp: {protocol: http, endpoint: %q, insecure: true, interval: 1s}\n", otlpBase+"/api/v1/otlp/v1/metrics")
		}
		cfg := filepath.Join(dir, "tokenprobe-"+loc+".yaml")
		if err := os.WriteFile(cfg, fmt.Appendf(nil, locationProfile, wrong[loc], push), 0o644); err != nil {
			t.Fatal(err)
		}
		// As `serve --probe.location` wires it: the registry adds the label.
		reg := prometheus.NewRegistry()
		addr := freeAddr(t)
		serveDaemon(t, addr, daemon.Options{ConfigFile: cfg, Location: loc,
			Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"location": loc}, reg)}, reg)
		// The location's own Prometheus: scrapes its probe, writes to the centre.
		start("edge-"+loc, bin, global+fmt.Sprintf("scrape_configs:\n  - job_name: tokenprobe\n    static_configs: [{targets: [%q]}]\n"+
			"remote_write:\n  - url: %q\n    queue_config: {batch_send_deadline: 1s}\n", addr, central+"/api/v1/write"), nil)
	}

	var first string // the quorum alert's description when first seen firing
	firing := func(alert string) []string {
		return seriesLabel(t, central, fmt.Sprintf(`ALERTS{alertname=%q,alertstate="firing"}`, alert), "location")
	}
	// The per-location alert at eu and us, never at ap, and the quorum
	// once. (In 5-second windows the alerts can blink between two runs:
	// the test waits for a moment when both fire.)
	waitUntilf(t, 90*time.Second, func() string {
		return fmt.Sprintf("the quorum alert in the central Prometheus, and the per-location one at eu and us (firing at %v; quorum %v)",
			firing("TokenprobeWrongAnswers"), firing("TokenprobeWrongAnswersQuorum"))
	}, func() bool {
		got := firing("TokenprobeWrongAnswers")
		if slices.Contains(got, "ap") {
			t.Fatalf("the wrong-answer alert fires at ap, whose answers are right: %v", got)
		}
		// The text is read once the quorum is seen firing, and the wait
		// ends only with it: read before the firing check, an alert that
		// began firing between the two queries ended the wait with no
		// text (a CI rehearsal saw "").
		quorum := firing("TokenprobeWrongAnswersQuorum")
		if first == "" && len(quorum) == 1 {
			first = description(central, "TokenprobeWrongAnswersQuorum")
		}
		return len(quorum) == 1 && first != "" && slices.Equal(got, []string{"eu", "us"})
	})
	// The quorum page's text, from the first evaluation it fired in,
	// names the places from the quorum's own condition: eu and us. Read
	// from the per-location alerts, which fire in the same evaluation, it
	// named one of them, or none.
	if !strings.Contains(first, "Seen at: eu, us.") {
		t.Errorf("the quorum page's first text: %q, want it to name eu and us", first)
	}
	if v, ok := query(t, central, `ALERTS{alertname="TokenprobeWrongAnswersQuorum",alertstate="firing",scope="quorum",severity="page"}`); !ok || v != 1 {
		t.Error("the quorum alert is not labelled scope=quorum, severity=page")
	}
	// One series per location and no more: nothing counted twice on the
	// way through remote write, and the rules keep the places apart.
	for _, rec := range []string{"tokenprobe:requests:rate5m", "tokenprobe:wrong_answers:ratio_rate5m"} {
		if got := seriesLabel(t, central, rec, "location"); !slices.Equal(got, locations) {
			t.Errorf("%s by location: %v, want %v", rec, got, locations)
		}
	}
	ratios := seriesValues(t, central, "tokenprobe:wrong_answers:ratio_rate5m", "location")
	if ratios["eu"] < 0.99 || ratios["us"] < 0.99 || ratios["ap"] != 0 {
		t.Errorf("wrong-answer ratios %v: want 1 at eu and us, 0 at ap", ratios)
	}
	if n, ok := query(t, central, `max(count by (location, outcome, load_level) (tokenprobe_requests_total{profile="answers"}))`); !ok || n != 1 {
		t.Errorf("a location's request counter arrives %g times in the centre, want once", n)
	}
	rulesHealthy(t, &server{name: "central", base: central})
	legendsNameEveryLine(t, central)

	if otlpBase == "" {
		t.Log("no Prometheus 3: the OTLP shape is not tried")
		return
	}
	// The OTLP shape: each location's pushed requests apart, each once:
	// what the locations' own counters say they sent.
	waitUntil(t, 30*time.Second, "the three locations' OTLP pushes", func() bool {
		return len(seriesLabel(t, otlpBase, `tokenprobe_requests_total`, "tokenprobe_location")) == 3
	})
	pushed := seriesValues(t, otlpBase, `sum by (tokenprobe_location) (tokenprobe_requests_total)`, "tokenprobe_location")
	scraped := seriesValues(t, central, `sum by (location) (tokenprobe_requests_total{profile="answers"})`, "location")
	for _, loc := range locations {
		// Pushed every second and scraped every second, both a little
		// behind: within a couple of seconds' requests of each other.
		if p, s := pushed[loc], scraped[loc]; p == 0 || s == 0 || p > 2*s+50 || s > 2*p+50 {
			t.Errorf("%s: %g requests pushed over OTLP, %g scraped: want the same requests, once each", loc, p, s)
		}
	}
}

// description is the description of the alert named alert that a
// Prometheus has firing now, or "".
func description(base, alert string) string {
	resp, err := http.Get(base + "/api/v1/alerts")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			Alerts []struct {
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
				State       string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if json.NewDecoder(resp.Body).Decode(&out) != nil {
		return ""
	}
	for _, a := range out.Data.Alerts {
		if a.Labels["alertname"] == alert && a.State == "firing" {
			return a.Annotations["description"]
		}
	}
	return ""
}

// legendsNameEveryLine evaluates every query of every generated dashboard
// against base, where three locations' series meet, and fails where two
// lines of one query would be drawn under one name: a legend must name
// every label that differs between its lines. The baseline panels'
// legends left out location, and three locations drew three lines named
// "baseline answers load 1".
func legendsNameEveryLine(t *testing.T, base string) {
	t.Helper()
	files, err := dashboards.Files()
	if err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer(`$profile`, `.*`, `$endpoint`, `.*`, `$model`, `.*`, `$location`, `.*`, `$server`, `vllm`, `$__rate_interval`, `1m`, `$__range`, `5m`)
	field := regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
	for name, b := range files {
		var d struct {
			Panels []struct {
				Title   string
				Targets []struct {
					Expr, LegendFormat, Format string
				}
			}
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, panel := range d.Panels {
			for _, target := range panel.Targets {
				if target.Format == "heatmap" || target.LegendFormat == "" {
					continue
				}
				seen := map[string]map[string]string{}
				for _, r := range instant(base, vars.Replace(target.Expr)) {
					legend := field.ReplaceAllStringFunc(target.LegendFormat, func(f string) string { return r.Metric[field.FindStringSubmatch(f)[1]] })
					if other, ok := seen[legend]; ok {
						t.Errorf("%s / %s: two lines named %q (%v and %v): its legend %q must name the labels that differ", name, panel.Title, legend, other, r.Metric, target.LegendFormat)
						break
					}
					seen[legend] = r.Metric
				}
			}
		}
	}
}
