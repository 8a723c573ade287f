package daemon

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenprobe/tokenprobe/internal/hostile"
)

// A collector that accepts and never answers holds nothing up: runs end
// (a run's span used to wait for room in the exporter's full queue, and
// the run with it, for good), shutdown ends within its deadline, and the
// spans that never reached the collector are counted.
func TestACollectorThatNeverAnswersHoldsNoRun(t *testing.T) {
	h, err := hostile.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	path := filepath.Join(t.TempDir(), "tokenprobe.yaml")
	writeFile(t, path, `otlp: {endpoint: "http://`+h.Addr()+`/`+hostile.Silent+`", interval: 1s}
tracing: {sample: 1}
`+endpoints+"profiles:\n"+profile("p", "{concurrency: 16, requests: 3000}"))
	reg := prometheus.NewRegistry()
	d, err := New(Options{ConfigFile: path, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		started, err := d.RunNow("p", "")
		if err != nil {
			t.Fatal(err)
		}
		waitEnded(t, d, started[0].ID)
	}
	if h.Connections() == 0 {
		t.Fatal("nothing was pushed to the collector")
	}
	// Each export waits its default 10 s (and retries for 20 s): the
	// deadline ends the shutdown.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Shutdown(ctx) }()
	select {
	case err = <-done:
	case <-time.After(time.Minute): // a hang, not a timing
		t.Fatal("shutdown did not end within a minute of its 3 s deadline")
	}
	if err == nil || !strings.Contains(err.Error(), "otlp flush") {
		t.Errorf("shutdown: %v; want the failed flush said", err)
	}
	if n := gaugeWith(t, reg, "tokenprobe_otlp_dropped_total", "signal", "traces"); n != 6002 {
		t.Errorf("tokenprobe_otlp_dropped_total{signal=\"traces\"} %v; want the 6,002 spans the collector never took (two runs of 3,000 requests, and the runs), each once", n)
	}
}

// waitEnded waits for run id to end, bounded by a hang guard: how long a
// run takes is the machine's business.
func waitEnded(t *testing.T, d *Daemon, id int64) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if r, ok := run(d, "p")(); ok && r.ID == id && r.Finished() && !d.Jobs()[0].State.Running {
			return
		}
	}
	t.Fatalf("run %d did not end within two minutes (held by the exporter?)", id)
}
