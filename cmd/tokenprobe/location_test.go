package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tokenprobe/tokenprobe/exporter/otlp/otlptest"
)

// --probe.location puts a location label on every series /metrics
// serves (the process's and Go's included), tokenprobe.location on the
// OTLP resource, and a location in every record and summary; a name
// that is not a plain short label value is refused.
func TestProbeLocationLabelsEverything(t *testing.T) {
	rc := otlptest.Start()
	defer rc.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tokenprobe.yaml")
	writeFile(t, cfg, `
endpoints:
  - name: sim
    simulator: {slots: 4, decode_base: 1ms}
otlp: {endpoint: "`+rc.URL+`", interval: 1h}
profiles:
  - name: p
    load: {concurrency: 2, requests: 6}
    workload: {output_tokens: {mean: 4}}
    slo: {ttft: 1s}
    schedule: {manual: true}
`)
	if code := run([]string{"serve", "-c", cfg, "--probe.location", "eu west", "--log.level=error"}); code != 2 {
		t.Errorf("a location with a space: exit %d, want 2", code)
	}
	artifacts := filepath.Join(dir, "artifacts")
	base, exit := startServe(t, cfg, "--probe.location", "eu-west-1", "--artifacts-dir", artifacts)
	resp, err := http.Post(base+"/api/v1/runs?profile=p", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor(t, "the run's summary", func() bool {
		m, _ := filepath.Glob(filepath.Join(artifacts, "*", "summary.json"))
		return len(m) == 1
	})
	resp, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for name, mf := range fams {
		for _, m := range mf.GetMetric() {
			series++
			found := false
			for _, lp := range m.GetLabel() {
				found = found || lp.GetName() == "location" && lp.GetValue() == "eu-west-1"
			}
			if !found {
				t.Errorf("%s %v has no location label", name, m.GetLabel())
			}
		}
	}
	if fams["tokenprobe_requests_total"] == nil || fams["go_goroutines"] == nil || series < 50 {
		t.Errorf("%d series: the run's and the process's should be there", series)
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	if code := <-exit; code != 0 {
		t.Fatalf("exit %d", code)
	}
	if _, res := rc.Last(); res["tokenprobe.location"] != "eu-west-1" {
		t.Errorf("OTLP resource %v: no tokenprobe.location", res)
	}
	sums, _ := filepath.Glob(filepath.Join(artifacts, "*", "summary.json"))
	recs, _ := filepath.Glob(filepath.Join(artifacts, "*", "records.jsonl"))
	var s struct{ Location string }
	b, _ := os.ReadFile(sums[0])
	if err := json.Unmarshal(b, &s); err != nil || s.Location != "eu-west-1" {
		t.Errorf("summary.json's location %q (%v)", s.Location, err)
	}
	f, _ := os.Open(recs[0])
	defer f.Close()
	all, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimSpace(string(all)), "\n")
	for _, line := range lines {
		if !strings.Contains(line, `"location":"eu-west-1"`) {
			t.Fatalf("a record without the location: %s", line)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}
