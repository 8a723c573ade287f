package web

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenprobe/tokenprobe/internal/daemon"
	"github.com/tokenprobe/tokenprobe/internal/hostile"
	"github.com/tokenprobe/tokenprobe/internal/timingtest"
)

const plantedKey = "sk-planted-3f9a1c"

const cfg = `
endpoints:
  - name: sim
    simulator: {slots: 4, decode_base: 2ms, prefill_base: 1ms, seed: 1}
  - name: keyed
    simulator: {slots: 4, decode_base: 2ms, seed: 2}
    api_key_env: TOKENPROBE_WEB_TEST_KEY
profiles:
  - name: demo
    endpoints: [sim]
    load: {concurrency: 2, requests: 10}
    workload: {input_tokens: {mean: 10}, output_tokens: {mean: 6}}
    slo: {ttft: 1s, objective: 0.5}
    schedule: {manual: true}
  - name: slow
    endpoints: [keyed]
    load: {concurrency: 1, duration: 1s}
    workload: {output_tokens: {mean: 4}}
    schedule: {manual: true}
  - name: heavy
    endpoints: [keyed]
    load: {concurrency: 1, requests: 1}
    workload: {output_tokens: {mean: 4}}
    schedule: {manual: true, exclusive: true}
`

type fixture struct {
	d    *daemon.Daemon
	srv  *httptest.Server
	path string
	reg  *prometheus.Registry
}

func newFixture(t *testing.T, lifecycle bool) *fixture {
	t.Helper()
	return newFixtureWith(t, cfg, lifecycle)
}

func newFixtureWith(t *testing.T, cfg string, lifecycle bool) *fixture {
	t.Helper()
	t.Setenv("TOKENPROBE_WEB_TEST_KEY", plantedKey)
	path := filepath.Join(t.TempDir(), "tokenprobe.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	d, err := daemon.New(daemon.Options{ConfigFile: path, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(d, Options{Lifecycle: lifecycle, Gatherer: reg, Registerer: reg, Version: "test"}))
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
	})
	return &fixture{d: d, srv: srv, path: path, reg: reg}
}

// newDownFixture serves profiles (YAML list items) against the endpoint
// "down", where nothing listens, with the lifecycle endpoints on.
func newDownFixture(t *testing.T, profiles string) *fixture {
	t.Helper()
	addr, err := hostile.ClosedAddr()
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureWith(t, "endpoints:\n  - {name: down, base_url: \"http://"+addr+"/v1\", model: m}\nprofiles:"+profiles, true)
}

func (f *fixture) do(t *testing.T, method, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitForRun waits for a finished run of profile, for as long as it
// takes: a busy machine makes a run slower, not wrong.
func (f *fixture) waitForRun(t *testing.T, profile string) daemon.RunRecord {
	t.Helper()
	var found daemon.RunRecord
	seen := ""
	timingtest.Until(t, func() string { return "a finished run of " + profile + "; runs: " + seen }, func() bool {
		recent, _ := f.d.History().Runs()
		seen = ""
		for _, r := range recent {
			seen += fmt.Sprintf("%s %s; ", r.Profile, r.Result)
			if r.Profile == profile && r.Finished() {
				found = r
				return true
			}
		}
		return false
	}, nil)
	return found
}

// waitForRunWithin returns the finished run of profile, or nil when it has
// not finished within d.
func (f *fixture) waitForRunWithin(profile string, d time.Duration) *daemon.RunRecord {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		recent, _ := f.d.History().Runs()
		for _, r := range recent {
			if r.Profile == profile && r.Finished() {
				return &r
			}
		}
	}
	return nil
}

func TestLifecycleIsOffByDefault(t *testing.T) {
	f := newFixture(t, false)
	for _, c := range []struct{ method, path string }{{"POST", "/-/reload"}, {"PUT", "/-/reload"}, {"POST", "/api/v1/runs?profile=demo"}} {
		if code, _ := f.do(t, c.method, c.path); code != http.StatusForbidden {
			t.Errorf("%s %s: %d, want 403", c.method, c.path, code)
		}
	}
	if code, _ := f.do(t, "GET", "/-/reload"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /-/reload: %d", code)
	}
	if got := refusedCount(t, f.reg, "lifecycle_disabled"); got != 3 {
		t.Errorf("refused with the lifecycle off: %v, want 3", got)
	}
}

func TestEndpoints(t *testing.T) {
	f := newFixture(t, true)
	for path, want := range map[string]string{"/-/healthy": "Healthy", "/-/ready": "Ready"} {
		if code, body := f.do(t, "GET", path); code != 200 || !strings.Contains(body, want) {
			t.Errorf("%s: %d %q", path, code, body)
		}
	}
	// 202 only for a run that started, with its id and page.
	code, body := f.do(t, "POST", "/api/v1/runs?profile=demo")
	var started struct {
		Started []struct {
			Profile, Endpoint, URL string
			ID                     int64
		}
	}
	if err := json.Unmarshal([]byte(body), &started); code != http.StatusAccepted || err != nil || len(started.Started) != 1 ||
		started.Started[0].Profile != "demo" || started.Started[0].URL != fmt.Sprintf("/runs/%d", started.Started[0].ID) {
		t.Fatalf("run now: %d %s", code, body)
	}
	if code, _ := f.do(t, "POST", "/api/v1/runs?profile=nope"); code != http.StatusNotFound {
		t.Errorf("unknown profile: %d", code)
	}
	if code, _ := f.do(t, "POST", "/api/v1/runs"); code != http.StatusBadRequest {
		t.Errorf("no profile: %d", code)
	}
	if code, _ := f.do(t, "POST", "/api/v1/runs?profile=slow"); code != http.StatusAccepted {
		t.Fatalf("slow: %d", code)
	}
	time.Sleep(100 * time.Millisecond)
	// A second run of a job in progress is refused, naming the run, and
	// takes no id.
	if code, body := f.do(t, "POST", "/api/v1/runs?profile=slow"); code != http.StatusConflict || !strings.Contains(body, "in progress: run 2 (slow, started") {
		t.Errorf("run now while running: %d %s", code, body)
	}
	// An exclusive job whose endpoint is in use is queued behind the run
	// holding it (202, its id 3: the refused request took none).
	code, body = f.do(t, "POST", "/api/v1/runs?profile=heavy")
	var queued struct {
		Queued []struct {
			ID     int64
			Behind string
		}
	}
	if err := json.Unmarshal([]byte(body), &queued); code != http.StatusAccepted || err != nil || len(queued.Queued) != 1 ||
		queued.Queued[0].ID != 3 || !strings.HasPrefix(queued.Queued[0].Behind, "run 2 (slow, started") {
		t.Errorf("run now of an exclusive job on a busy endpoint: %d %s", code, body)
	}
	run := f.waitForRun(t, "demo")
	if run.Result != daemon.ResultPassed || run.Trigger != "manual" || run.Summary.Requests != 10 {
		t.Fatalf("run: %+v", run)
	}

	_, body = f.do(t, "GET", "/api/v1/runs")
	var runs struct {
		Runs []daemon.RunRecord `json:"runs"`
	}
	if err := json.Unmarshal([]byte(body), &runs); err != nil || len(runs.Runs) == 0 {
		t.Fatalf("runs API: %v %s", err, body)
	}
	if code, body := f.do(t, "GET", "/runs/1"); code != 200 || !strings.Contains(body, "Time to first token") || !strings.Contains(body, "run finished") ||
		!strings.Contains(body, "data-verdict>"+template.HTMLEscapeString(run.Summary.Verdict)+"</p>") || run.Summary.Verdict == "" {
		t.Errorf("run page: %d\n%s", code, body)
	}
	// The run page says whether the probe could vouch for its timing,
	// as the summary does.
	if _, body := f.do(t, "GET", "/runs/1"); run.Summary.Probe == nil ||
		!strings.Contains(body, fmt.Sprintf(`data-probe-starved="%v"`, run.Summary.Probe.Starved)) {
		t.Errorf("run page without the probe's health (summary's %+v)", run.Summary.Probe)
	}
	if code, _ := f.do(t, "GET", "/runs/999"); code != 404 {
		t.Errorf("missing run: %d", code)
	}
	if code, body := f.do(t, "GET", "/"); code != 200 || !strings.Contains(body, `data-profile="demo"`) {
		t.Errorf("status page: %d", code)
	}
	// The simulator serves vLLM's series: the run's TTFT is split with
	// them, on the status page and the run's page.
	b := run.Summary.Server
	if b == nil || b.Breakdown == nil {
		t.Fatalf("no TTFT breakdown in the run: %+v", b)
	}
	if _, body := f.do(t, "GET", "/"); !strings.Contains(body, html.EscapeString(b.Breakdown.Verdict)) || !strings.Contains(body, ">mostly "+b.Breakdown.Dominant+": queue ") {
		t.Errorf("the status page lacks the breakdown %q", b.Breakdown.Verdict)
	}
	if _, body := f.do(t, "GET", fmt.Sprintf("/runs/%d", run.ID)); !strings.Contains(body, `class="ttft-breakdown"`) || !strings.Contains(body, `data-phase="prefill"`) {
		t.Errorf("the run page lacks the breakdown bar")
	}
	if _, body := f.do(t, "GET", "/metrics"); !strings.Contains(body, "tokenprobe_requests_total") {
		t.Error("metrics lack tokenprobe_requests_total")
	}
}

// The planted key never leaves the process through the HTTP surface.
func TestSecretsStayHidden(t *testing.T) {
	f := newFixture(t, true)
	f.do(t, "POST", "/api/v1/runs?profile=slow")
	f.waitForRun(t, "slow")
	for _, path := range []string{"/config", "/", "/api/v1/runs", "/runs/1", "/metrics"} {
		code, body := f.do(t, "GET", path)
		if code != 200 {
			t.Errorf("%s: %d", path, code)
		}
		if strings.Contains(body, plantedKey) {
			t.Errorf("%s shows the API key", path)
		}
	}
	if _, body := f.do(t, "GET", "/config"); !strings.Contains(body, "api_key_env: TOKENPROBE_WEB_TEST_KEY") {
		t.Errorf("/config does not say where the key comes from:\n%s", body)
	}
	// What is in force, the defaults marked (setup.RenderEffective).
	if _, body := f.do(t, "GET", "/config"); !strings.Contains(body, "max_error_ratio: 0.5 # default") {
		t.Errorf("/config does not show the failure policy in force:\n%s", body)
	}
}

func TestReloadAnswers500WithTheError(t *testing.T) {
	f := newFixture(t, true)
	if err := os.WriteFile(f.path, []byte("endpoints: []\nprofiles: [{name: p, load: {rate: -1}}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, body := f.do(t, "POST", "/-/reload")
	if code != 500 || !strings.Contains(body, f.path+":2:") {
		t.Fatalf("bad reload: %d %s", code, body)
	}
	if _, page := f.do(t, "GET", "/"); !strings.Contains(page, `id="reload-error"`) || !strings.Contains(page, `data-profile="demo"`) ||
		!regexp.MustCompile(`The reload \S+ ago failed and the configuration loaded \S+ ago is still running`).MatchString(page) {
		t.Error("the status page does not show the failed reload next to the running profiles")
	}
	if err := os.WriteFile(f.path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, body := f.do(t, "POST", "/-/reload"); code != 200 {
		t.Fatalf("good reload: %d %s", code, body)
	}
}

// A manual profile's row says when it runs (when asked) and, after an
// aborted run, does not claim a backoff it does not have; an interval
// profile's row does.
func TestManualProfileRow(t *testing.T) {
	f := newDownFixture(t, `
  - name: asked
    endpoints: [down]
    load: {concurrency: 8, duration: 30s}
    schedule: {manual: true}
  - name: hourly
    endpoints: [down]
    load: {concurrency: 8, duration: 30s}
    schedule: {every: 1h}
`)
	row := func(page, profile string) string {
		_, rest, _ := strings.Cut(page, `data-profile="`+profile+`"`)
		r, _, _ := strings.Cut(rest, "</tr>")
		return r
	}
	_, page := f.do(t, "GET", "/")
	if r := row(page, "asked"); strings.Count(r, "when asked") != 2 {
		t.Fatalf("a manual profile's row before its run: %s", r)
	}
	for _, p := range []string{"asked", "hourly"} {
		if code, body := f.do(t, "POST", "/api/v1/runs?profile="+p); code != http.StatusAccepted {
			t.Fatalf("run %s: %d %s", p, code, body)
		}
		if r := f.waitForRun(t, p); r.Result != daemon.ResultError {
			t.Fatalf("%s: %s, want an aborted run", p, r.Result)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(row(page, "hourly"), "backing off"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("an interval profile's row after an aborted run: %s", row(page, "hourly"))
		}
		_, page = f.do(t, "GET", "/")
	}
	if r := row(page, "asked"); strings.Contains(r, "backing off") || !strings.Contains(r, "1 aborted runs in a row") || strings.Count(r, "when asked") != 2 {
		t.Fatalf("a manual profile's row after an aborted run: %s", r)
	}
}

// A page on another site cannot start runs or reloads through the
// operator's browser: cross-site state-changing requests are refused,
// and start no run; the command line (no Sec-Fetch-Site, no Origin) and
// the same site still can.
func TestCrossSiteLifecycleRequestsAreRefused(t *testing.T) {
	f := newFixture(t, true)
	send := func(path string, header map[string]string) int {
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+path, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	evil := map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
	oldOrigin := map[string]string{"Origin": "https://evil.example"} // an older browser: Origin alone
	for _, path := range []string{"/api/v1/runs?profile=chat", "/-/reload"} {
		for _, h := range []map[string]string{evil, oldOrigin} {
			if code := send(path, h); code != http.StatusForbidden {
				t.Errorf("%s from another site %v: %d, want 403", path, h, code)
			}
		}
	}
	if recent, _ := f.d.History().Runs(); len(recent) != 0 {
		t.Fatalf("a refused request started %d runs", len(recent))
	}
	if code := send("/-/reload", nil); code != http.StatusOK {
		t.Errorf("reload from the command line: %d", code)
	}
	if code := send("/-/reload", map[string]string{"Sec-Fetch-Site": "same-origin"}); code != http.StatusOK {
		t.Errorf("reload from the same site: %d", code)
	}
	// Counted, not logged: four refusals.
	if got := refusedCount(t, f.reg, "cross_site"); got != 4 {
		t.Errorf("tokenprobe_web_requests_refused_total{reason=\"cross_site\"} = %v, want 4", got)
	}
}

// refusedCount is tokenprobe_web_requests_refused_total{reason} in g.
func refusedCount(t *testing.T, g prometheus.Gatherer, reason string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tokenprobe_web_requests_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no tokenprobe_web_requests_refused_total{reason=%q}", reason)
	return 0
}

// With --web.allowed-hosts, a request under another Host name (a page
// whose DNS name was rebound to this address) gets 403; the names
// allowed, any port, are served.
func TestAllowedHosts(t *testing.T) {
	f := newFixture(t, false)
	reg := prometheus.NewRegistry()
	h := Handler(f.d, Options{Gatherer: reg, Registerer: reg, AllowedHosts: []string{"probe.internal", "localhost"}})
	for host, want := range map[string]int{"probe.internal:9470": 200, "LOCALHOST": 200, "evil.example:9470": 403, "127.0.0.1:9470": 403} {
		req := httptest.NewRequest(http.MethodGet, "/-/healthy", nil)
		req.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != want {
			t.Errorf("Host %s: %d, want %d", host, w.Code, want)
		}
	}
	if got := refusedCount(t, reg, "host"); got != 2 {
		t.Errorf("refused for their host: %v, want 2", got)
	}
}

// Without --web.allowed-hosts, a browser's state-changing request under a
// DNS name (a page of another site rebound to this address is "same-site"
// to the browser, so cross-origin protection lets it through) is refused;
// under an address, localhost or this host's name it is served, and so
// is any request that no browser sent (curl, a CI job).
func TestRebindingRefusedByDefault(t *testing.T) {
	f := newFixture(t, true)
	reg := prometheus.NewRegistry()
	h := Handler(f.d, Options{Lifecycle: true, Gatherer: reg, Registerer: reg})
	hostname, _ := os.Hostname()
	for _, c := range []struct {
		host    string
		browser bool
		want    int
	}{
		{"evil.example:9470", true, http.StatusForbidden},
		{"evil.example:9470", false, http.StatusOK},
		{"127.0.0.1:9470", true, http.StatusOK},
		{"[::1]:9470", true, http.StatusOK},
		{"localhost:9470", true, http.StatusOK},
		{hostname + ":9470", true, http.StatusOK},
	} {
		req := httptest.NewRequest(http.MethodPost, "/-/reload", nil)
		req.Host = c.host
		if c.browser {
			req.Header.Set("Sec-Fetch-Site", "same-origin")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != c.want {
			t.Errorf("Host %s, from a browser %v: %d %s, want %d", c.host, c.browser, w.Code, strings.TrimSpace(w.Body.String()), c.want)
		}
	}
	if got := refusedCount(t, reg, "host"); got != 1 {
		t.Errorf("refused for their host: %v, want 1", got)
	}
}

// Runs asked for while their endpoint is held are shown from the 202 on:
// listed as queued with their place and what they wait for, on the API,
// the status page and their own page; they start in the order asked; a
// second request of a queued job is refused naming that job's own run.
// The lifecycle API answered 202 with /runs/2, which was a 404 until the
// run started, the list and the status page left it out, and two queued
// runs started last first.
func TestQueuedRunsAreShown(t *testing.T) {
	f := newFixtureWith(t, `
endpoints:
  - name: keyed
    simulator: {slots: 4, decode_base: 2ms, seed: 2}
profiles:
  - name: slow
    endpoints: [keyed]
    load: {concurrency: 1, duration: 5s}
    workload: {output_tokens: {mean: 4}}
    schedule: {manual: true}
  - name: first
    endpoints: [keyed]
    load: {concurrency: 1, requests: 2}
    workload: {output_tokens: {mean: 4}}
    schedule: {manual: true, exclusive: true}
  - name: second
    endpoints: [keyed]
    load: {concurrency: 1, requests: 2}
    workload: {output_tokens: {mean: 4}}
    schedule: {manual: true, exclusive: true}
`, true)
	if code, body := f.do(t, "POST", "/api/v1/runs?profile=slow"); code != http.StatusAccepted {
		t.Fatalf("slow: %d %s", code, body)
	}
	for _, p := range []string{"first", "second"} {
		if code, body := f.do(t, "POST", "/api/v1/runs?profile="+p); code != http.StatusAccepted || !strings.Contains(body, `"queued"`) {
			t.Fatalf("%s: %d %s", p, code, body)
		}
	}
	// While slow holds the endpoint (it runs 5 s; were it over, first
	// would have started and the list would say so).
	_, body := f.do(t, "GET", "/api/v1/runs")
	var runs struct {
		Runs []daemon.RunRecord `json:"runs"`
	}
	if err := json.Unmarshal([]byte(body), &runs); err != nil {
		t.Fatal(err)
	}
	byProfile := map[string]daemon.RunRecord{}
	for _, r := range runs.Runs {
		byProfile[r.Profile] = r
	}
	if byProfile["slow"].Finished() {
		t.Skip("slow ended before the queue could be read: the host is too slow for this check")
	}
	first, second := byProfile["first"], byProfile["second"]
	if first.Result != daemon.ResultQueued || first.ID != 2 || first.Position != 1 || !strings.HasPrefix(first.Behind, "run 1 (slow, started") {
		t.Errorf("first: %+v", first)
	}
	if second.Result != daemon.ResultQueued || second.ID != 3 || second.Position != 2 || !strings.HasSuffix(second.Behind, "run 2 (first, queued)") {
		t.Errorf("second: %+v", second)
	}
	if code, body := f.do(t, "GET", "/runs/3"); code != 200 || !strings.Contains(body, "data-queued") || !strings.Contains(body, "2nd in line") {
		t.Errorf("the queued run's page: %d\n%s", code, body)
	}
	if _, body := f.do(t, "GET", "/"); !strings.Contains(body, `data-queued="2"`) || !strings.Contains(body, `data-queued="3"`) {
		t.Errorf("the status page does not show the queued runs:\n%s", body)
	}
	if code, body := f.do(t, "POST", "/api/v1/runs?profile=second"); code != http.StatusConflict || !strings.Contains(body, "run 3 (second, queued") {
		t.Errorf("a second request of a queued job: %d %s; want 409 naming run 3", code, body)
	}
	a, b := f.waitForRun(t, "first"), f.waitForRun(t, "second")
	if !a.Start.Before(b.Start) || a.ID != 2 || b.ID != 3 {
		t.Errorf("first (#%d) started %s, second (#%d) %s: want the order asked", a.ID, a.Start, b.ID, b.Start)
	}
}
