package e2e

import (
	"encoding/json"
	"fmt"
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
	"github.com/tokenprobe/tokenprobe/internal/daemon"
	"github.com/tokenprobe/tokenprobe/internal/sim"
)

// hostedProfile is two keys of a hosted API. "quota" probes a provider
// (%[1]s, the simulator playing OpenAI) whose token limit other clients
// of the key have mostly spent: every answer says how many tokens are
// left, and the probe's own requests spend the rest until the provider
// refuses with 429. "revoked" probes with a key the provider refuses
// (401 invalid_api_key on every request).
//
// The probe sends one request every two seconds on quota, about 30
// tokens each (a 20-token prompt, 8 tokens asked for): the last 10% of
// the limit (280 tokens) lasts about 20 s, and the warning needs about 6
// (2 s of dips, 3 s held, a scrape and an evaluation at this scale).
const hostedProfile = `
endpoints:
  - name: provider
    base_url: http://%[1]s/v1
    model: gpt-sim
  - name: revoked
    simulator: {slots: 4, prefill_base: 20ms, decode_base: 5ms, seed: 3, provider: openai, faults: {auth: 1}}
    model: gpt-sim
profiles:
  - name: quota
    endpoints: [provider]
    load: {rate: 0.5, duration: 5m}
    workload: {input_tokens: {mean: 20}, output_tokens: {mean: 8}}
    schedule: {continuous: true}
  - name: revoked
    endpoints: [revoked]
    load: {rate: 2, duration: 5m}
    workload: {input_tokens: {mean: 20}, output_tokens: {mean: 8}}
    schedule: {continuous: true}
`

// The limit of the provider's key, in tokens, and what other clients
// leave of it when the probe starts: 14%, just over the warning's 10%.
const (
	keyTokens  = 2800
	othersLeft = 400
)

// A hosted API's key, probed by a daemon that a real Prometheus scrapes
// with the generated rules: the rate-limit warning fires while the
// provider still answers (before the probe's first 429, read from the
// daemon itself at the moment the warning is seen) and the gauges fall
// as the provider's headers do; the revoked key pages at once with its
// reason, and only for the endpoint that refuses it.
func TestE2EHostedAlertsInARealPrometheus(t *testing.T) {
	v2 := prometheusBinary(t)
	if testing.Short() {
		t.Skip("runs for about a minute")
	}
	proms := []*server{{name: "2.42", bin: v2}}
	if v3 := os.Getenv("TOKENPROBE_PROMETHEUS3"); v3 != "" {
		proms = append(proms, &server{name: "3.x", bin: v3})
	}
	dir := t.TempDir()
	provider, err := sim.Start("127.0.0.1:0", sim.Config{Model: "gpt-sim", Provider: "openai", Slots: 4,
		PrefillBase: 20 * time.Millisecond, DecodeBase: 5 * time.Millisecond, Seed: 5,
		RateLimit: sim.RateLimit{Tokens: keyTokens, Window: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer provider.Close()
	// Other clients of the key: one long prompt spends all but
	// othersLeft of it (the simulator counts a prompt's words and the
	// tokens asked for).
	left := spend(t, provider.Addr(), keyTokens-othersLeft)
	if left != othersLeft {
		t.Fatalf("the provider says %d tokens are left after the other clients' request, want %d", left, othersLeft)
	}

	probeAddr := freeAddr(t)
	o := compressed()
	rules, err := alerts.Marshal(alerts.Generate(o))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range proms {
		pdir := filepath.Join(dir, strconv.Itoa(i))
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pdir, "rules.yaml"), rules, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [rules.yaml]\nscrape_configs:\n  - job_name: tokenprobe\n    static_configs: [{targets: [%q]}]\n", probeAddr)
		if err := os.WriteFile(filepath.Join(pdir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		addr := freeAddr(t)
		p.cmd = exec.Command(p.bin, "--config.file="+filepath.Join(pdir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(pdir, "data"),
			"--web.listen-address="+addr, "--log.level=error")
		p.cmd.Stderr = os.Stderr
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = p.cmd.Process.Kill(); _ = p.cmd.Wait() }()
		p.base = "http://" + addr
		waitUntil(t, 30*time.Second, p.name+" to start", func() bool { _, ok := query(t, p.base, `vector(1)`); return ok })
	}

	cfg := filepath.Join(dir, "tokenprobe.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, hostedProfile, provider.Addr()), 0o644); err != nil {
		t.Fatal(err)
	}
	// Prometheus applies a new scrape target a few seconds after it
	// starts (its scrape manager reloads at most every five seconds); a
	// daemon started before that spends the first tokens unscraped, and
	// the gauges below would miss the first of the values they fall
	// through. A stand-in answers on the daemon's address until every
	// server has scraped it.
	standIn := &http.Server{Addr: probeAddr, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	})}
	go func() { _ = standIn.ListenAndServe() }()
	for _, p := range proms {
		waitUntil(t, 30*time.Second, p.name+" to scrape the stand-in", func() bool {
			v, ok := query(t, p.base, `up{job="tokenprobe"}`)
			return ok && v == 1
		})
	}
	if err := standIn.Close(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	serveDaemon(t, probeAddr, daemon.Options{ConfigFile: cfg}, reg)
	for _, p := range proms {
		waitUntil(t, 30*time.Second, p.name+" to scrape tokenprobe", func() bool {
			v, ok := query(t, p.base, `tokenprobe_config_last_reload_successful{job="tokenprobe"}`)
			return ok && v == 1
		})
	}

	// The daemon's own count of failures by profile and reason, read at
	// the moment of each check, not through a scrape.
	failures := func(profile, reason string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var n float64
		for _, mf := range mfs {
			if mf.GetName() != "tokenprobe_request_errors_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				l := map[string]string{}
				for _, lp := range m.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				if l["profile"] == profile && l["reason"] == reason {
					n += m.GetCounter().GetValue()
				}
			}
		}
		return n
	}
	firing := func(p *server, alert string) map[string]string {
		out := map[string]string{}
		for _, r := range seriesLabels(p.base, fmt.Sprintf(`ALERTS{alertname=%q,alertstate="firing"}`, alert)) {
			out[r["profile"]+"/"+r["endpoint"]] = r["severity"]
		}
		return out
	}

	// The warning, in every server, before the first 429.
	warned := map[*server]bool{}
	waitObserved(t, func() string {
		var late []string
		for _, p := range proms {
			if !warned[p] {
				v := seriesValues(t, p.base, `tokenprobe:rate_limit_remaining:ratio{profile="quota"}`, "kind")
				late = append(late, fmt.Sprintf("%s (share left by kind %v)", p.name, v))
			}
		}
		return "the rate-limit warning before the first 429 in " + strings.Join(late, ", ")
	}, func() bool {
		for _, p := range proms {
			if warned[p] {
				continue
			}
			f := firing(p, "TokenprobeRateLimitNearlySpent")
			if len(f) == 0 {
				continue
			}
			if n := failures("quota", "rate_limit"); n > 0 {
				t.Fatalf("%s: the rate-limit warning fired after the probe's first 429 (%v failures as rate_limit)", p.name, n)
			}
			if len(f) != 1 || f["quota/provider"] != "ticket" {
				t.Fatalf("%s: the rate-limit warning fired for %v, want quota/provider as a ticket", p.name, f)
			}
			warned[p] = true
			t.Logf("%s: rate-limit warning with the provider still answering", p.name)
		}
		return len(warned) == len(proms)
	}, func() bool { return failures("quota", "rate_limit") > 0 })

	// The limit is real: the probe's requests then meet the 429, counted
	// under its reason (a warning before a 429 that never comes would
	// prove nothing).
	warnedAt := time.Now()
	waitObserved(t, func() string { return "the probe's first 429 on quota" }, func() bool { return failures("quota", "rate_limit") > 0 }, nil)
	t.Logf("the first 429 came %.1f s after the warning", time.Since(warnedAt).Seconds())

	// The gauges fell as the provider's headers did: what Prometheus
	// scraped of the tokens left never rose (the hour-long window never
	// refilled), took at least five values, and reached 0.
	for _, p := range proms {
		vals := rangeValues(t, p.base, `tokenprobe_rate_limit_remaining{profile="quota",endpoint="provider",kind="tokens"}`, 2*time.Minute)
		t.Logf("%s: tokens left, as scraped each second: %v", p.name, vals)
		distinct := map[float64]bool{}
		for i, v := range vals {
			distinct[v] = true
			if i > 0 && v > vals[i-1] {
				t.Fatalf("%s: tokens left rose from %v to %v: %v", p.name, vals[i-1], v, vals)
			}
		}
		if len(vals) == 0 || vals[0] > othersLeft || len(distinct) < 5 {
			t.Fatalf("%s: tokens left over the run %v: want at most %d first, falling through five values or more", p.name, vals, othersLeft)
		}
		if l, ok := query(t, p.base, `tokenprobe_rate_limit_limit{profile="quota",kind="tokens"}`); !ok || l != keyTokens {
			t.Fatalf("%s: the token limit reads %v (found %v), want %d", p.name, l, ok, keyTokens)
		}
	}

	// The revoked key pages, in every server, for its endpoint alone.
	for _, p := range proms {
		var f map[string]string
		held := 0
		waitObserved(t, func() string {
			return fmt.Sprintf("%s: the auth page for revoked/revoked; firing %v, auth share %v", p.name, f,
				seriesValues(t, p.base, `tokenprobe:request_errors_by_reason:ratio_rate5m{reason="auth"}`, "profile"))
		}, func() bool {
			f = firing(p, "TokenprobeAuthFailing")
			if len(f) > 0 {
				return true
			}
			// The alert has no hold: once its condition has been true in
			// ten of the server's answers, a page that has not come will
			// not.
			if _, ok := query(t, p.base, `tokenprobe:request_errors_by_reason:ratio_rate5m{reason="auth"} > 0.5`); ok {
				held++
			}
			return false
		}, func() bool { return held >= 10 })
		if len(f) != 1 || f["revoked/revoked"] != "page" {
			t.Fatalf("%s: the auth alert fired for %v, want revoked/revoked as a page", p.name, f)
		}
		if n := failures("revoked", "auth"); n == 0 {
			t.Fatalf("%s: the auth page came with no failure counted as auth", p.name)
		}
		t.Logf("%s: auth page for revoked/revoked", p.name)
	}
}

// spend sends one request of tokens (prompt words and one asked for) to
// the provider at addr, as another client of the key, and returns how
// many tokens its answer says are left.
func spend(t *testing.T, addr string, tokens int) int {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "gpt-sim", "max_tokens": 1,
		"messages": []map[string]string{{"role": "user", "content": strings.Repeat("w ", tokens-1)}}})
	resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the other clients' request: %s", resp.Status)
	}
	left, err := strconv.Atoi(resp.Header.Get("x-ratelimit-remaining-tokens"))
	if err != nil {
		t.Fatalf("x-ratelimit-remaining-tokens: %v", err)
	}
	return left
}

// seriesLabels is the label sets of an instant query's result now.
func seriesLabels(base, q string) []map[string]string {
	var labels []map[string]string
	for _, r := range instant(base, q) {
		labels = append(labels, r.Metric)
	}
	return labels
}

// rangeValues is the first series of a range query over the last span,
// at one-second steps.
func rangeValues(t *testing.T, base, q string, span time.Duration) []float64 {
	t.Helper()
	now := time.Now()
	u := fmt.Sprintf("%s/api/v1/query_range?query=%s&start=%d&end=%d&step=1", base, url.QueryEscape(q), now.Add(-span).Unix(), now.Unix())
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			Result []struct {
				Values [][2]any `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if len(out.Data.Result) == 0 {
		return nil
	}
	var vals []float64
	for _, v := range out.Data.Result[0].Values {
		f, _ := strconv.ParseFloat(v[1].(string), 64)
		vals = append(vals, f)
	}
	return vals
}
