package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"

	"github.com/tokenprobe/tokenprobe/alerts"
	"github.com/tokenprobe/tokenprobe/internal/daemon"
	"github.com/tokenprobe/tokenprobe/internal/sim"
)

// The answers of OpenAI's API to a revoked key and a spent quota, as the
// simulator's provider mode sends them (internal/sim/provider.go).
const (
	revokedKey = `{"error":{"message":"Incorrect API key provided: sk-****.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	spentQuota = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
)

// front is an endpoint in front of a model server that fails every
// request one way while broken, and passes requests through once fixed.
type front struct {
	proxy  http.Handler
	status int
	body   string
	broken atomic.Bool
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.broken.Load() {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		_, _ = w.Write([]byte(f.body))
		return
	}
	f.proxy.ServeHTTP(w, r)
}

// One problem, one page, for as long as it lasts: a daemon probes three
// endpoints, one refusing its key, one out of quota, one refusing
// connections, scraped by Prometheus 2.42 with the shipped rules at
// compressed time and notifying a real Alertmanager with the shipped
// configuration. Each cause reaches the webhook as one page; the goodput
// and burn pages the failures set off are held back; the daemon aborts
// run after run and backs off until its runs are further apart than the
// rules' 5-minute windows, and no page resolves meanwhile; once each
// endpoint answers, its page resolves within a window of the first
// answer. (The overload, the fourth cause, pages once in the busy-host
// test, and its inhibitions are tried in alerts
// TestInhibitionsInARealAlertmanager.)
func TestE2EOnePagePerCause(t *testing.T) {
	v2 := prometheusBinary(t)
	am := alertmanagerBinary(t)
	dir := t.TempDir()

	model, err := sim.Start("127.0.0.1:0", sim.Config{Slots: 8, PrefillBase: time.Millisecond, DecodeBase: time.Millisecond, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	modelURL, err := url.Parse("http://" + model.Addr())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(modelURL)
	keyed := &front{proxy: proxy, status: http.StatusUnauthorized, body: revokedKey}
	billed := &front{proxy: proxy, status: http.StatusTooManyRequests, body: spentQuota}
	keyed.broken.Store(true)
	billed.broken.Store(true)
	keyedSrv, billedSrv := httptest.NewServer(keyed), httptest.NewServer(billed)
	defer keyedSrv.Close()
	defer billedSrv.Close()
	// The unreachable server: nothing listens on its address until it
	// is fixed.
	downAddr := freeAddr(t)

	// Runs every 2 s; after each abort the job skips 1, 3, 7 ticks (4,
	// 8 and 16 s apart, up to its 16 s maximum): the later gaps are
	// longer than the rules' 5-second windows, as an hour's backoff is
	// longer than 5 minutes.
	job := func(name string) string {
		return fmt.Sprintf(`  - name: %[1]s
    endpoints: [%[1]s]
    load: {concurrency: 2, requests: 8}
    workload: {input_tokens: {mean: 10}, output_tokens: {mean: 4}}
    slo: {ttft: 10s, objective: 0.9}
    schedule: {every: 2s}
    failure: {abort: {min_requests: 4, unreachable_for: 1s}, schedule_backoff_max: 16s}
`, name)
	}
	body := fmt.Sprintf(`endpoints:
  - {name: keyed, base_url: "%s/v1", model: tokenprobe-sim}
  - {name: billed, base_url: "%s/v1", model: tokenprobe-sim}
  - {name: down, base_url: "http://%s/v1", model: tokenprobe-sim}
profiles:
%s%s%s`, keyedSrv.URL, billedSrv.URL, downAddr, job("keyed"), job("billed"), job("down"))
	cfgFile := filepath.Join(dir, "tokenprobe.yaml")
	if err := os.WriteFile(cfgFile, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}

	amAddr, hook := startAlertmanager(t, am, dir, "1s", "2s")

	probeAddr := freeAddr(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(versioncollector.NewCollector("tokenprobe"))
	serveDaemon(t, probeAddr, daemon.Options{ConfigFile: cfgFile}, reg)

	rules, err := alerts.Marshal(alerts.Generate(compressed()))
	if err != nil {
		t.Fatal(err)
	}
	promCfg := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [rules.yaml]\n"+
		"alerting: {alertmanagers: [{static_configs: [{targets: [%q]}]}]}\n"+
		"scrape_configs:\n  - job_name: tokenprobe\n    static_configs: [{targets: [%q]}]\n", amAddr, probeAddr)
	for file, b := range map[string][]byte{"rules.yaml": rules, "prometheus.yml": []byte(promCfg)} {
		if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	promAddr := freeAddr(t)
	promCmd := exec.Command(v2, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr, "--log.level=error", "--rules.alert.resend-delay=1s")
	promCmd.Stderr = os.Stderr
	if err := promCmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = promCmd.Process.Kill(); _ = promCmd.Wait() }()
	base := "http://" + promAddr

	causes := map[string]string{"keyed": "TokenprobeAuthFailing", "billed": "TokenprobeQuotaExhausted", "down": "TokenprobeEndpointUnreachable"}
	want := slices.Sorted(func(yield func(string) bool) {
		for _, c := range causes {
			if !yield(c) {
				return
			}
		}
	})
	// Each cause pages.
	waitObserved(t, func() string {
		return fmt.Sprintf("a page for each cause %v; notified%s", want, hook.log())
	}, func() bool { return slices.Equal(hook.firing("page"), want) }, nil)
	t.Logf("the causes paged: %v", hook.firing("page"))

	// The daemon backs off: every job aborted four runs in a row, the
	// last gap between its runs 16 s, three of the rules' windows.
	aborted := func(profile string) float64 {
		v, _ := query(t, base, fmt.Sprintf(`tokenprobe_runs_aborted_in_a_row{profile=%q}`, profile))
		return v
	}
	waitObserved(t, func() string {
		return fmt.Sprintf("four aborted runs in a row of each job: keyed %v, billed %v, down %v", aborted("keyed"), aborted("billed"), aborted("down"))
	}, func() bool { return aborted("keyed") >= 4 && aborted("billed") >= 4 && aborted("down") >= 4 }, nil)
	// Then one more gap, in which the rules' windows hold no request.
	quietFrom := time.Now()
	for time.Since(quietFrom) < 16*time.Second {
		time.Sleep(time.Second)
	}
	if got := hook.firing("page"); !slices.Equal(got, want) {
		t.Fatalf("paged %v, want the causes %v alone (the goodput and burn pages held back); notified%s", got, want, hook.log())
	}
	if n := hook.resolved("page"); n > 0 {
		t.Fatalf("%d page notifications resolved while their causes lasted; notified%s", n, hook.log())
	}
	// The inhibitions held back pages that fired, not pages that never
	// did: without them the webhook would have had these.
	// The burn page is held back in its own rule (a failing endpoint's
	// burn is its cause's), so that it cannot page once the cause ends:
	// that it was due is read off its error ratios.
	held := seriesLabel(t, base, `max_over_time(ALERTS{alertstate="firing",severity="page",alertname!~"`+strings.Join(want, "|")+`"}[10m])`, "alertname")
	due := seriesLabel(t, base, `max_over_time((tokenprobe:slo_errors:ratio_rate5m >= 1)[10m:1s])`, "profile")
	if len(held) == 0 && len(due) == 0 {
		t.Fatalf("no other page fired in Prometheus, nor was the burn due: the inhibitions were not tried")
	}
	t.Logf("held back by the causes: %v; every request not good for %v (the burn due, held back in its rule)", held, due)

	// Fixed: the key restored, the quota raised, the server up. Each
	// page resolves within a window (5 s here) of the endpoint's first
	// answer, whenever its backed-off job runs next.
	keyed.broken.Store(false)
	billed.broken.Store(false)
	l, err := net.Listen("tcp", downAddr)
	if err != nil {
		t.Fatalf("the unreachable server's address is taken: %v", err)
	}
	up := &http.Server{Handler: proxy}
	go func() { _ = up.Serve(l) }()
	defer up.Close()
	var mu sync.Mutex
	answered, resolved := map[string]time.Time{}, map[string]time.Time{}
	waitObserved(t, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("each page to resolve after its endpoint answers: answered %v, resolved %v", answered, resolved)
	}, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for profile, alert := range causes {
			if _, ok := answered[profile]; !ok {
				if v, ok := query(t, base, fmt.Sprintf(`sum(tokenprobe_requests_total{profile=%q,outcome="success"})`, profile)); ok && v > 0 {
					answered[profile] = time.Now()
				}
			}
			if _, ok := resolved[profile]; !ok {
				if _, firing := query(t, base, fmt.Sprintf(`ALERTS{alertname=%q,alertstate="firing"}`, alert)); !firing {
					resolved[profile] = time.Now()
				}
			}
		}
		return len(resolved) == len(causes) && len(answered) == len(causes)
	}, nil)
	for profile := range causes {
		// The first answer is seen a scrape late (1 s) and the page's
		// end an evaluation late (1 s); the window is 5 s.
		took := resolved[profile].Sub(answered[profile])
		t.Logf("%s: resolved %v after its first answer was scraped (polled every 0.5 s)", profile, took.Round(100*time.Millisecond))
		if took > 5*time.Second+4*time.Second {
			t.Errorf("%s: resolved %v after its first answer, more than a window (5 s) and the scrape and evaluation", profile, took)
		}
	}
	waitObserved(t, func() string { return "the Alertmanager to notify the resolved pages; notified" + hook.log() },
		func() bool { return hook.resolved("page") >= len(causes) }, nil)
	if got := hook.firing("page"); !slices.Equal(got, want) {
		t.Fatalf("paged %v after the fix, want the causes %v alone; notified%s", got, want, hook.log())
	}
	t.Logf("notified:%s", hook.log())
}
