package setup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What /config and --print-config show is what is in force: the
// defaults applied at run time written in and marked, what the file
// writes unmarked, fields that mean "none" left out, a threshold left at
// zero said to be none, and no secret.
func TestRenderEffectiveMarksTheDefaults(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokenprobe.yaml")
	src := `endpoints:
  - {name: gw, base_url: http://gw:8000/v1, model: m, api_key_env: TOKENPROBE_EFFECTIVE_KEY, timeout: 30s}
profiles:
  - name: chat
    load: {concurrency: 2, requests: 4}
    slo: {ttft: 500ms, objective: 0.9}
    failure: {backoff: {base: 250ms}, abort: {error_ratio: 0.8}}
  - name: sweep
    load: {sweep: {concurrency: [1, 2], requests: 3}}
tracing: {}
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TOKENPROBE_EFFECTIVE_KEY", "sk-effective-planted-31f9")
	cfg, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := RenderEffective(cfg, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	for _, want := range []string{
		"timeout: 30s\n",                   // written: unmarked
		"connect_timeout: 10s # default\n", // config's default
		"base: 250ms\n",                    // written
		"max: 5s # default\n",              // the failure policy's, applied by setup
		"error_ratio: 0.8\n",               // written
		"min_requests: 20 # default\n",     // setup's
		"max_error_ratio: 0.5 # default\n", // setup's
		"schedule_backoff_max: 1h0m0s # default\n",
		"include_usage: true # default\n",
		"stream: true # default\n",
		"itl: 0s # none\n", // no threshold, said so
		"ttft: 500ms\n",
		"sample: 1 # default\n", // tracing's
		"api_key_env: TOKENPROBE_EFFECTIVE_KEY\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	for _, absent := range []string{"sk-effective-planted", "base_urls", "tls:", "faults", "null"} {
		if strings.Contains(out, absent) {
			t.Errorf("%q in:\n%s", absent, out)
		}
	}
	// A sweep's stages are the sweep's, not shown a second time.
	if strings.Count(out, "stages:") != 0 {
		t.Errorf("the sweep's stages are shown:\n%s", out)
	}
	// What is shown loads again, to the same policy.
	again := filepath.Join(dir, "again.yaml")
	if err := os.WriteFile(again, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg2, err := LoadFile(again)
	if err != nil {
		t.Fatalf("the rendered configuration does not load: %v\n%s", err, out)
	}
	if a, b := FailureOf(&cfg.Profiles[0].Failure, false), FailureOf(&cfg2.Profiles[0].Failure, false); a != b {
		t.Errorf("failure policy %+v, loaded again %+v", a, b)
	}
}
