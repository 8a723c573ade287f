package daemon

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var soakFor = flag.Duration("soak.duration", 25*time.Second, "how long TestSoak runs (make soak sets minutes)")

const soakKey = "sk-soak-planted-7c1e"

func soakConfig(level int) string {
	return fmt.Sprintf(`
endpoints:
  - name: sim
    api_key_env: TOKENPROBE_SOAK_KEY
    simulator:
      slots: 8
      decode_base: 2ms
      prefill_base: 1ms
      seed: 4
      faults: {error_500: 0.05, error_429: 0.05, disconnect: 0.05, malformed: 0.05, stall: 0.02, stall_for: 150ms}
profiles:
  - name: steady
    load: {concurrency: 3, duration: 600ms}
    workload: {input_tokens: {mean: 20}, output_tokens: {mean: 12}}
    slo: {ttft: 50ms, objective: 0.5}
    schedule: {every: 1s}
  - name: reloaded
    load: {concurrency: %d, duration: 1500ms}
    workload: {input_tokens: {mean: 20}, output_tokens: {mean: 12}}
    schedule: {every: 2s}
`, level)
}

type footprint struct {
	goroutines, fds, series int
	heap                    uint64
}

func measure(t *testing.T, reg *prometheus.Registry) footprint {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fds, _ := os.ReadDir("/proc/self/fd")
	n, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	return footprint{goroutines: runtime.NumGoroutine(), fds: len(fds), series: n, heap: ms.HeapAlloc}
}

// The daemon against the simulator with faults on and a reload every few
// seconds: goroutines, heap, open files and series stay flat, every tick of
// the job no reload touches is a run or a counted skip, and the planted API
// key appears in no log line and no run record.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	t.Setenv("TOKENPROBE_SOAK_KEY", soakKey)
	// The log is read as it is written and kept nowhere: a buffer of an
	// hour of debug lines was most of the heap the soak used to measure.
	var logs logWatch
	path := filepath.Join(t.TempDir(), "tokenprobe.yaml")
	writeFile(t, path, soakConfig(2))
	reg := prometheus.NewRegistry()
	d, err := New(Options{ConfigFile: path, Registerer: reg, Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
	}()

	warm := min(*soakFor/4, 8*time.Second)
	time.Sleep(warm)
	before := measure(t, reg)
	start := time.Now()
	reloads := 0
	for level := 2; time.Since(start) < *soakFor; level = 5 - level { // 2, 3, 2, ...
		time.Sleep(3 * time.Second)
		writeFile(t, path, soakConfig(level))
		if err := d.Reload(); err != nil {
			t.Fatal(err)
		}
		reloads++
	}
	elapsed := time.Since(start)
	after := measure(t, reg)
	t.Logf("soak %v, %d reloads: goroutines %d -> %d, heap %.1f -> %.1f MiB, fds %d -> %d, series %d -> %d; %.1f MiB of log lines read",
		elapsed.Round(time.Second), reloads, before.goroutines, after.goroutines, float64(before.heap)/(1<<20), float64(after.heap)/(1<<20),
		before.fds, after.fds, before.series, after.series, float64(logs.bytes.Load())/(1<<20))
	if after.goroutines > before.goroutines+40 {
		t.Errorf("goroutines grew from %d to %d", before.goroutines, after.goroutines)
	}
	if after.heap > 2*before.heap+16<<20 {
		t.Errorf("heap grew from %d to %d bytes", before.heap, after.heap)
	}
	if after.fds > before.fds+40 {
		t.Errorf("open files grew from %d to %d", before.fds, after.fds)
	}
	if after.series > before.series*5/4+50 {
		t.Errorf("series grew from %d to %d", before.series, after.series)
	}

	// The untouched job ticks every second: each tick is a run or a skip.
	runs := sumWhere(t, reg, "tokenprobe_runs_total", "steady")
	skips := sumWhere(t, reg, "tokenprobe_runs_skipped_total", "steady")
	total := time.Since(start) + warm
	if ticks := runs + skips; ticks < total.Seconds()-2 || ticks > total.Seconds()+2 {
		t.Errorf("%v runs + %v skips of 'steady' in %v at one tick a second", runs, skips, total.Round(time.Second))
	}
	errs := sumWhere(t, reg, "tokenprobe_request_errors_total", "")
	if errs == 0 {
		t.Error("no request failed: the faults were not on")
	}
	t.Logf("'steady': %v runs, %v skipped; %v failed requests counted", runs, skips, errs)

	recent, failed := d.History().Runs()
	var records bytes.Buffer
	for _, r := range append(recent, failed...) {
		fmt.Fprintf(&records, "%+v\n", r)
	}
	if strings.Contains(records.String(), soakKey) {
		t.Error("the API key appears in the run records")
	}
	if logs.keyed.Load() {
		t.Error("the API key appears in the logs")
	}
	if !logs.failed.Load() {
		t.Error("the logs have no failed request: the grep would prove nothing")
	}
}

// logWatch reads each log line as it is written for the planted key and
// for a failed request, and keeps no line.
type logWatch struct {
	bytes         atomic.Int64
	keyed, failed atomic.Bool
}

func (w *logWatch) Write(p []byte) (int, error) {
	w.bytes.Add(int64(len(p)))
	if bytes.Contains(p, []byte(soakKey)) {
		w.keyed.Store(true)
	}
	if bytes.Contains(p, []byte("request failed")) {
		w.failed.Store(true)
	}
	return len(p), nil
}

func sumWhere(t *testing.T, reg *prometheus.Registry, name, profile string) float64 {
	t.Helper()
	mfs, _ := reg.Gather()
	var total float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			match := profile == ""
			for _, l := range m.Label {
				if l.GetName() == "profile" && l.GetValue() == profile {
					match = true
				}
			}
			if match {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}
