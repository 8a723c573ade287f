package daemon

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/goleak"

	"github.com/tokenprobe/tokenprobe/internal/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const endpoints = `
endpoints:
  - name: sim
    simulator: {slots: 8, decode_base: 2ms, prefill_base: 1ms, seed: 1}
`

func profile(name, load string) string {
	return `  - name: ` + name + `
    load: ` + load + `
    workload: {input_tokens: {mean: 10}, output_tokens: {mean: 4}}
    schedule: {manual: true}
`
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func start(t *testing.T, body string) (*Daemon, string, *prometheus.Registry) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokenprobe.yaml")
	writeFile(t, path, body)
	reg := prometheus.NewRegistry()
	d, err := New(Options{ConfigFile: path, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Not t.Context(): it is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return d, path, reg
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func run(d *Daemon, profile string) func() (RunRecord, bool) {
	return func() (RunRecord, bool) {
		recent, _ := d.History().Runs()
		for _, r := range recent {
			if r.Profile == profile {
				return r, true
			}
		}
		return RunRecord{}, false
	}
}

func seriesOf(t *testing.T, reg *prometheus.Registry, profile string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "profile" && l.GetValue() == profile {
					n++
				}
			}
		}
	}
	return n
}

// A reload applies the difference: a running unchanged job runs on, a
// changed one restarts (its run cancelled), a removed one stops and its
// series leave /metrics, a new one appears.
func TestReloadAppliesTheDifference(t *testing.T) {
	long := "{concurrency: 1, duration: 2s}"
	d, path, reg := start(t, endpoints+"profiles:\n"+profile("keep", long)+profile("change", long)+profile("remove", "{concurrency: 1, requests: 3}"))

	if _, err := d.RunNow("remove", ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run of 'remove'", func() bool { r, ok := run(d, "remove")(); return ok && r.Finished() })
	if seriesOf(t, reg, "remove") == 0 {
		t.Fatal("no series for 'remove' before the reload")
	}
	for _, p := range []string{"keep", "change"} {
		if _, err := d.RunNow(p, ""); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "both long runs to start", func() bool {
		k, ok1 := run(d, "keep")()
		c, ok2 := run(d, "change")()
		return ok1 && ok2 && k.Result == ResultRunning && c.Result == ResultRunning
	})

	writeFile(t, path, endpoints+"profiles:\n"+profile("keep", long)+profile("change", "{concurrency: 2, duration: 2s}")+profile("added", long))
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
	if c, _ := run(d, "change")(); c.Result != ResultCancelled {
		t.Errorf("the changed job's run: %s, want cancelled", c.Result)
	}
	eventually(t, "the unchanged job's run to finish", func() bool { k, _ := run(d, "keep")(); return k.Finished() })
	if k, _ := run(d, "keep")(); k.Result != ResultPassed {
		t.Errorf("the unchanged job's run was %s (%s), want passed: a reload must not restart it", k.Result, k.Error)
	}
	if n := seriesOf(t, reg, "remove"); n != 0 {
		t.Errorf("%d series of the removed profile remain", n)
	}
	var names []string
	for _, j := range d.Jobs() {
		names = append(names, j.Profile)
	}
	if strings.Join(names, ",") != "added,change,keep" {
		t.Errorf("jobs after reload: %v", names)
	}
}

// A bad file is refused with its exact error and changes nothing.
func TestBadReloadKeepsTheRunningConfig(t *testing.T) {
	d, path, reg := start(t, endpoints+"profiles:\n"+profile("p", "{concurrency: 1, requests: 2}"))
	writeFile(t, path, endpoints+"profiles:\n  - name: p\n    load: {concurency: 2}\n")
	err := d.Reload()
	want := path + ":7:12: profiles[0].load.concurency: unknown field (did you mean \"concurrency\"?)"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	if jobs := d.Jobs(); len(jobs) != 1 || jobs[0].Load != "concurrency 1 for 2 requests" {
		t.Fatalf("running jobs changed: %+v", jobs)
	}
	if !d.Ready() {
		t.Fatal("not ready after a refused reload")
	}
	if _, err := d.RunNow("p", ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a run on the old config", func() bool { r, ok := run(d, "p")(); return ok && r.Result == ResultPassed })
	if v := gauge(t, reg, "tokenprobe_config_last_reload_successful"); v != 0 {
		t.Errorf("reload gauge %v after a failure", v)
	}
	loaded, tried, lastErr := d.ReloadStatus()
	if lastErr == nil || tried.IsZero() || !loaded.Before(tried) {
		t.Errorf("the status does not show the failed reload beside the configuration running: loaded %v, tried %v, %v", loaded, tried, lastErr)
	}
	// Fixing the file recovers.
	writeFile(t, path, endpoints+"profiles:\n"+profile("p", "{concurrency: 2, requests: 2}"))
	if err := d.Reload(); err != nil || gauge(t, reg, "tokenprobe_config_last_reload_successful") != 1 {
		t.Fatalf("reload after the fix: %v", err)
	}
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.Metric[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not found", name)
	return 0
}

func TestStartupWithABadFileFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokenprobe.yaml")
	writeFile(t, path, "profiles: [}")
	if _, err := New(Options{ConfigFile: path}); err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Fatalf("got %v", err)
	}
}

// The file watcher reloads a changed file once, and does not retry a file
// it refused until it changes again.
func TestWatchReloadsOnChange(t *testing.T) {
	d, path, _ := start(t, endpoints+"profiles:\n"+profile("a", "{concurrency: 1, requests: 1}"))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { d.Watch(ctx, 10*time.Millisecond); close(done) }()
	defer func() { cancel(); <-done }()
	writeFile(t, path, endpoints+"profiles:\n"+profile("b", "{concurrency: 1, requests: 1}"))
	eventually(t, "profile b", func() bool { j := d.Jobs(); return len(j) == 1 && j[0].Profile == "b" })
}

// A file caught mid-write, still valid YAML, is not applied: the watcher
// applies a change only once the file has read the same for the quiet
// period. Here a writer truncates six profiles to three, pauses a second
// (five checks at 200 ms read the same half file) and completes it.
func TestWatchWaitsForTheFileToSettle(t *testing.T) {
	full := endpoints + "profiles:\n"
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		full += profile(name, "{concurrency: 1, requests: 1}")
	}
	d, path, _ := start(t, full)
	w := watch{quiet: QuietPeriod}
	at := time.Now()
	check := func(after time.Duration) { at = at.Add(after); d.check(&w, at) }
	names := func() string {
		var out []string
		for _, j := range d.Jobs() {
			out = append(out, j.Profile)
		}
		return strings.Join(out, ",")
	}
	half := full[:strings.Index(full, "  - name: d")]
	if _, err := config.Parse(path, []byte(half)); err != nil {
		t.Fatalf("the half-written file must be valid for this test: %v", err)
	}
	writeFile(t, path, half)
	for range 6 { // the writer's pause: a second of the same half file
		check(200 * time.Millisecond)
	}
	if got := names(); got != "a,b,c,d,e,f" {
		t.Fatalf("a half-written file was applied: %s", got)
	}
	edited := strings.Replace(full, "manual: true", "every: 2h", 1)
	writeFile(t, path, edited)
	check(200 * time.Millisecond) // changed again: still being written
	if got := names(); got != "a,b,c,d,e,f" {
		t.Fatalf("jobs %s", got)
	}
	check(QuietPeriod) // the same for the quiet period: applied
	d.mu.Lock()
	every := d.cfg.Profile("a").Schedule.Every.D()
	d.mu.Unlock()
	if every != 2*time.Hour || names() != "a,b,c,d,e,f" {
		t.Fatalf("the settled file was not applied: %s, every %v", names(), every)
	}
	// A truncated file that stays truncated is what the writer meant.
	writeFile(t, path, half)
	check(200 * time.Millisecond)
	check(QuietPeriod)
	if got := names(); got != "a,b,c" {
		t.Fatalf("a settled file was not applied: %s", got)
	}
}

// A GPU source that cannot start (no DCGM here) leaves the daemon probing,
// with the source reported down in /metrics, the status and run reports.
// With no GPU driver here, gpu.source dcgm and auto (DCGM, else NVML)
// report down with the reason, and the daemon keeps probing.
func TestDaemonRunsWithTheGPUSourceDown(t *testing.T) {
	for _, source := range []string{"dcgm", "auto"} {
		t.Run(source, func(t *testing.T) {
			d, _, reg := start(t, endpoints+`
gpu: {source: `+source+`}
profiles:
`+profile("p", "{concurrency: 1, requests: 3}"))
			if !d.Ready() {
				t.Fatal("not ready")
			}
			if _, err := d.RunNow("p", ""); err != nil {
				t.Fatal(err)
			}
			eventually(t, "a run", func() bool { r, ok := run(d, "p")(); return ok && r.Result == ResultPassed })
			r, _ := run(d, "p")()
			if r.Summary.GPU == nil || r.Summary.GPU.Samples != 0 || r.Summary.GPU.Err == "" {
				t.Fatalf("run GPU report: %+v", r.Summary.GPU)
			}
			if v := gaugeWith(t, reg, "tokenprobe_gpu_source_up", "source", source); v != 0 {
				t.Fatalf("gpu source up %v", v)
			}
			got, problem, configured := d.GPUStatus()
			if !configured || got != source || problem == "" {
				t.Fatalf("status: %q %q %v", got, problem, configured)
			}
			if source == "auto" && (!strings.Contains(problem, "DCGM") || !strings.Contains(problem, "NVML")) {
				t.Fatalf("auto does not say why neither DCGM nor NVML reads: %s", problem)
			}
			t.Logf("GPU source down, daemon probing: %s", problem)
		})
	}
}

// gaugeWith is the value of the series of name (a gauge or a counter) whose
// label is value.
func gaugeWith(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == label && l.GetValue() == value {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("%s{%s=%q} not found", name, label, value)
	return 0
}

// Three shards share one configuration: each profile runs on exactly one
// shard, and a split profile's load adds up to the configured load.
func TestShards(t *testing.T) {
	body := endpoints + "profiles:\n"
	for i := range 6 {
		body += profile(fmt.Sprintf("p%d", i), "{concurrency: 1, requests: 2}")
	}
	body += `  - name: split
    load: {concurrency: 6, requests: 60}
    workload: {input_tokens: {mean: 10}, output_tokens: {mean: 4}}
    schedule: {manual: true}
    shard: {split: true}
  - name: splitrate
    load: {rate: 40, arrival: constant, duration: 2s}
    workload: {input_tokens: {mean: 10}, output_tokens: {mean: 4}}
    schedule: {manual: true}
    shard: {split: true}
`
	path := filepath.Join(t.TempDir(), "tokenprobe.yaml")
	writeFile(t, path, body)
	owners := map[string]int{}
	var splitReqs, rateReqs int
	var shards []*Daemon
	for i := range 3 {
		d, err := New(Options{ConfigFile: path, ShardIndex: i, ShardCount: 3})
		if err != nil {
			t.Fatal(err)
		}
		shards = append(shards, d)
		for _, j := range d.Jobs() {
			owners[j.Profile]++
		}
	}
	defer func() {
		for _, d := range shards {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = d.Shutdown(ctx)
			cancel()
		}
	}()
	for i := range 6 {
		if n := owners[fmt.Sprintf("p%d", i)]; n != 1 {
			t.Errorf("p%d runs on %d shards", i, n)
		}
	}
	if owners["split"] != 3 || owners["splitrate"] != 3 {
		t.Fatalf("split profiles on %d and %d shards", owners["split"], owners["splitrate"])
	}
	for _, d := range shards {
		for _, p := range []string{"split", "splitrate"} {
			if _, err := d.RunNow(p, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, d := range shards {
		for _, p := range []string{"split", "splitrate"} {
			eventually(t, "the "+p+" run", func() bool { r, ok := run(d, p)(); return ok && r.Finished() })
		}
		s, _ := run(d, "split")()
		r, _ := run(d, "splitrate")()
		splitReqs += s.Summary.Requests
		rateReqs += r.Summary.Requests
	}
	if splitReqs != 60 {
		t.Errorf("split requests add up to %d, want 60", splitReqs)
	}
	// 40 req/s for 2 s in three shares: 80 within 2%.
	if rateReqs < 78 || rateReqs > 82 {
		t.Errorf("split rate sent %d requests in 2 s at 40/s, want 80 within 2%%", rateReqs)
	}
	t.Logf("split: %d requests over 3 shards; split rate: %d of 80", splitReqs, rateReqs)
}

// A simulated endpoint's port changes at every start; its info series'
// url label does not, so the series stays one across restarts.
func TestSimulatorURLLabelIsStable(t *testing.T) {
	_, _, reg := start(t, endpoints+"profiles:\n"+profile("p", "{concurrency: 1, requests: 1}"))
	if v := gaugeWith(t, reg, "tokenprobe_profile_info", "url", "simulator"); v != 1 {
		t.Fatalf("tokenprobe_profile_info{url=\"simulator\"} %v", v)
	}
}

func TestManualProfileRunsOnlyWhenAsked(t *testing.T) {
	d, _, reg := start(t, endpoints+"profiles:\n"+profile("asked", "{concurrency: 1, requests: 2}")+
		"  - name: ticking\n    load: {concurrency: 1, requests: 1}\n    schedule: {every: 1h}\n")
	var jobs []JobView
	eventually(t, "the scheduled job's next run", func() bool { jobs = d.Jobs(); return len(jobs) == 2 && !jobs[1].State.Next.IsZero() })
	if !jobs[0].Manual || jobs[0].Schedule != "when asked" || !jobs[0].State.Next.IsZero() {
		t.Fatalf("the manual job as listed: %+v", jobs[0])
	}
	if jobs[1].Manual {
		t.Fatalf("the scheduled job as listed: %+v", jobs[1])
	}
	// Only the scheduled job has a next run to export.
	eventually(t, "the next-run series", func() bool {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "tokenprobe_run_next_timestamp_seconds" {
				return len(mf.Metric) == 1 && mf.Metric[0].GetLabel()[1].GetValue() == "ticking"
			}
		}
		return false
	})
	if _, err := d.RunNow("asked", ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the asked-for run", func() bool { r, ok := run(d, "asked")(); return ok && r.Result == ResultPassed })
}

// /config is rendered once a load: asking twice costs no rendering, and
// a reload renders the new configuration.
func TestConfigIsRenderedOnceALoad(t *testing.T) {
	d, path, _ := start(t, "endpoints: [{name: sim, simulator: {}}]\nprofiles: [{name: a, schedule: {manual: true}}]\n")
	first, err := d.ConfigYAML()
	if err != nil {
		t.Fatal(err)
	}
	again, _ := d.ConfigYAML()
	if len(first) == 0 || &first[0] != &again[0] {
		t.Fatal("the configuration was rendered again for a second request")
	}
	writeFile(t, path, "endpoints: [{name: sim, simulator: {}}]\nprofiles: [{name: b, schedule: {manual: true}}]\n")
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
	if after, _ := d.ConfigYAML(); !strings.Contains(string(after), "name: b") {
		t.Fatalf("after a reload:\n%s", after)
	}
}

// OnIdle comes once the last run in progress ends, not as each run does:
// a short run that ends while a long one goes on leaves the daemon busy.
func TestOnIdleWhenTheLastRunEnds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokenprobe.yaml")
	writeFile(t, path, endpoints+"profiles:\n"+profile("long", "{concurrency: 1, requests: 40}")+profile("short", "{concurrency: 1, requests: 1}"))
	idle := make(chan []string, 4)
	var d *Daemon
	d, err := New(Options{ConfigFile: path, Registerer: prometheus.NewRegistry(), OnIdle: func() {
		recent, _ := d.History().Runs()
		var results []string
		for _, r := range recent {
			results = append(results, r.Profile+":"+r.Result)
		}
		idle <- results
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	if _, err := d.RunNow("long", ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the long run to start", func() bool { r, ok := run(d, "long")(); return ok && r.Result == ResultRunning })
	if _, err := d.RunNow("short", ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the short run to end", func() bool { r, ok := run(d, "short")(); return ok && r.Finished() })
	var results []string
	select {
	case results = <-idle:
	case <-time.After(10 * time.Second):
		t.Fatal("no OnIdle 10 s after the short run ended")
	}
	for _, r := range results {
		if strings.HasSuffix(r, ":"+ResultRunning) {
			t.Fatalf("OnIdle with a run in progress: %v", results)
		}
	}
	if len(results) != 2 {
		t.Fatalf("OnIdle after %v, want both runs", results)
	}
	if len(idle) != 0 {
		t.Fatalf("OnIdle twice: %v, then %v", results, <-idle)
	}
}

// OnBusy and OnIdle alternate whatever the runs' overlap: a run that ends
// as another starts must not leave the daemon marked idle with a run in
// progress (cmd/tokenprobe lowers the GC percent while idle).
func TestOnBusyAndOnIdleAlternate(t *testing.T) {
	var calls []string // under d.runningMu, as the callbacks are
	d := &Daemon{}
	d.o.OnBusy = func() { calls = append(calls, "busy") }
	d.o.OnIdle = func() { calls = append(calls, "idle") }
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 2000 {
				d.began()
				d.ended()
			}
		})
	}
	wg.Wait()
	if len(calls) == 0 {
		t.Fatal("neither OnBusy nor OnIdle was called")
	}
	if calls[0] != "busy" || calls[len(calls)-1] != "idle" {
		t.Fatalf("%d calls, first %q, last %q; want busy first and idle last", len(calls), calls[0], calls[len(calls)-1])
	}
	for i := 1; i < len(calls); i++ {
		if calls[i] == calls[i-1] {
			t.Fatalf("call %d: %s twice in a row", i, calls[i])
		}
	}
}

// The served-model series names the models that answered, read from the
// answers: with a gateway's fallback naming tiny-model in half of them,
// /metrics names it beside the model asked for, and the wrong-answer page
// quotes it. (The model check learns the first name it sees and expects
// it after; the series once exported that expectation, which never named
// the substitute.)
func TestServedModelSeriesNamesTheModelsThatAnswered(t *testing.T) {
	d, _, reg := start(t, `
endpoints:
  - name: gw
    simulator: {slots: 8, decode_base: 1ms, prefill_base: 1ms, seed: 3, faults: {wrong_model: tiny-model, wrong_model_rate: 0.5}}
profiles:
`+profile("answers", "{concurrency: 2, requests: 40}"))
	if _, err := d.RunNow("answers", ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run to end", func() bool { r, ok := run(d, "answers")(); return ok && r.Finished() })
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var served []string
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "tokenprobe_run_last_served_model_info{") {
			_, rest, _ := strings.Cut(line, `served_model="`)
			name, _, _ := strings.Cut(rest, `"`)
			served = append(served, name)
		}
	}
	slices.Sort(served)
	if want := []string{"tiny-model", "tokenprobe-sim"}; !slices.Equal(served, want) {
		t.Fatalf("/metrics names the served models %q, want %q", served, want)
	}
}
