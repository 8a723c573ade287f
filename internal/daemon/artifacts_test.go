package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenprobe/tokenprobe/exporter/prom"
)

// With --artifacts-dir the daemon keeps each run's records, summary and
// report in a folder of its own, the newest few only; an exemplar's
// request_id on /metrics is the id of a record in its run's folder.
func TestRunArtifactsJoinExemplars(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokenprobe.yaml")
	writeFile(t, path, endpoints+"profiles:\n"+profile("p", "{concurrency: 2, requests: 6}"))
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	d, err := New(Options{ConfigFile: path, Registerer: reg, ArtifactsDir: dir, ArtifactsRetain: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
	}()
	for i := range 3 {
		if i == 2 {
			time.Sleep(prom.ExemplarInterval) // run 3 gets a new exemplar
		}
		started, err := d.RunNow("p", "")
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the run to end", func() bool {
			r, ok := run(d, "p")()
			return ok && r.ID == started[0].ID && r.Finished() && !d.Jobs()[0].State.Running
		})
	}
	folders, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(folders) != 2 || !strings.Contains(folders[0], "-run2-p-sim") || !strings.Contains(folders[1], "-run3-p-sim") {
		t.Fatalf("folders %v, want runs 2 and 3 (the newest two)", folders)
	}
	records, err := os.ReadFile(filepath.Join(folders[1], "records.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"summary.json", "report.txt"} {
		if _, err := os.Stat(filepath.Join(folders[1], f)); err != nil {
			t.Error(err)
		}
	}
	// The last exemplar of the TTFT histogram is of run 3.
	mfs, _ := reg.Gather()
	var exemplar string
	for _, mf := range mfs {
		if mf.GetName() != "tokenprobe_time_to_first_token_seconds" {
			continue
		}
		for _, m := range mf.Metric {
			for _, b := range m.GetHistogram().GetBucket() {
				for _, l := range b.GetExemplar().GetLabel() {
					if l.GetName() == "request_id" && l.GetValue() > exemplar {
						exemplar = l.GetValue()
					}
				}
			}
		}
	}
	if !strings.HasPrefix(exemplar, "3") || len(exemplar) != 10 || !strings.Contains(string(records), `"id":`+exemplar+",") {
		t.Fatalf("exemplar request_id %q is not a record of run 3:\n%s", exemplar, records)
	}
}

// Artifacts that cannot be written (here, their folder is a file, as a
// lost mount or a full disk would refuse them) are not a silent pass:
// the run's page says so, a counter counts them, the run's own result
// stands, and probing goes on.
func TestLostArtifactsAreReported(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokenprobe.yaml")
	writeFile(t, path, endpoints+"profiles:\n"+profile("p", "{concurrency: 2, requests: 4}"))
	blocked := filepath.Join(t.TempDir(), "not-a-folder")
	writeFile(t, blocked, "a file where the artifacts folder should be")
	reg := prometheus.NewRegistry()
	d, err := New(Options{ConfigFile: path, Registerer: reg, ArtifactsDir: blocked, ArtifactsRetain: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
	}()
	for range 2 {
		started, err := d.RunNow("p", "")
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the run to end", func() bool {
			r, ok := run(d, "p")()
			return ok && r.ID == started[0].ID && r.Finished() && !d.Jobs()[0].State.Running
		})
	}
	r, _ := run(d, "p")()
	if r.Result != ResultPassed || !strings.Contains(r.ArtifactsError, "not-a-folder") {
		t.Fatalf("result %s, artifacts error %q", r.Result, r.ArtifactsError)
	}
	mfs, _ := reg.Gather()
	count := -1.0
	for _, mf := range mfs {
		if mf.GetName() == "tokenprobe_artifact_write_failures_total" {
			count = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if count != 2 {
		t.Fatalf("tokenprobe_artifact_write_failures_total %v, want 2", count)
	}
}
