package daemon

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/tokenprobe/tokenprobe/internal/catalog"
)

var update = flag.Bool("update", false, "rewrite catalog.DemoSeries from the demo's count")

// The demo's series count in docs/METRICS.md is counted, not remembered:
// configs/demo.yaml, its requests cut to a few per level (the series are
// per level, not per request), every profile run once, and the
// tokenprobe_ lines of its /metrics counted as `grep -c '^tokenprobe_'`
// counts them. The finding: the docs said 2,567 where a clean demo
// exported 2,835.
func TestDemoSeries(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo's three profiles")
	}
	demo, err := os.ReadFile("../../configs/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	short := regexp.MustCompile(`requests: \d+`).ReplaceAllString(string(demo), "requests: 2")
	short = regexp.MustCompile(`warmup_requests: \d+`).ReplaceAllString(short, "warmup_requests: 1")
	path := filepath.Join(t.TempDir(), "demo.yaml")
	if err := os.WriteFile(path, []byte(short), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	d, err := New(Options{ConfigFile: path, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
	}()
	profiles := []string{"staircase", "baseline", "overload"}
	for _, p := range profiles {
		if _, err := d.RunNow(p, ""); err != nil {
			t.Fatalf("run %s: %v", p, err)
		}
	}
	// Each profile's first run ends (queued ones wait their turn).
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		recent, _ := d.History().Runs()
		done := map[string]bool{}
		for _, r := range recent {
			if r.Finished() {
				done[r.Profile] = true
			}
		}
		if len(done) == len(profiles) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs ended: %v", done)
		}
	}
	time.Sleep(time.Second) // the last run's gauges
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	enc := expfmt.NewEncoder(&text, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	total, server := 0, 0
	for _, line := range strings.Split(text.String(), "\n") {
		if !strings.HasPrefix(line, "tokenprobe_") {
			continue
		}
		total++
		if strings.HasPrefix(line, "tokenprobe_run_last_ttft_breakdown") || strings.HasPrefix(line, "tokenprobe_run_last_ttft_dominant") ||
			strings.HasPrefix(line, "tokenprobe_run_last_server_") {
			server++
		}
	}
	t.Logf("the demo exports %d tokenprobe series, %d of them the server's view", total, server)
	if *update {
		const src = "../catalog/markdown.go"
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		b = regexp.MustCompile(`DemoSeries       = \d+`).ReplaceAll(b, []byte("DemoSeries       = "+strconv.Itoa(total)))
		b = regexp.MustCompile(`DemoServerSeries = \d+`).ReplaceAll(b, []byte("DemoServerSeries = "+strconv.Itoa(server)))
		if err := os.WriteFile(src, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if total != catalog.DemoSeries || server != catalog.DemoServerSeries {
		t.Errorf("the demo exports %d series (%d the server's view); catalog.DemoSeries says %d (%d): run make docs",
			total, server, catalog.DemoSeries, catalog.DemoServerSeries)
	}
}
