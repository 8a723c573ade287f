package daemon

import (
	"strings"
	"testing"

	"github.com/tokenprobe/tokenprobe/internal/hostile"
)

// A job whose endpoint is down: its run is aborted early and recorded as
// an error that says why, the gauge of aborted runs in a row says 1, and
// the job's state says it backs off.
func TestAbortedRunBacksTheJobOff(t *testing.T) {
	addr, err := hostile.ClosedAddr()
	if err != nil {
		t.Fatal(err)
	}
	d, _, reg := start(t, `
endpoints:
  - {name: down, base_url: "http://`+addr+`/v1", model: m}
profiles:
  - name: probe
    endpoints: [down]
    load: {concurrency: 4, duration: 30s}
    workload: {output_tokens: {mean: 4}}
    schedule: {every: 1h}
`)
	started, err := d.RunNow("probe", "")
	if err != nil || len(started) != 1 {
		t.Fatalf("RunNow: %v %v", started, err)
	}
	var rec RunRecord
	eventually(t, "the run to end", func() bool {
		r, ok := run(d, "probe")()
		rec = r
		return ok && r.Finished()
	})
	if rec.ID != started[0].ID || rec.Result != ResultError || !strings.HasPrefix(rec.Error, "aborted: ") || !rec.Summary.Aborted {
		t.Fatalf("run #%d (RunNow said #%d): %s, %q", rec.ID, started[0].ID, rec.Result, rec.Error)
	}
	if len(rec.Summary.Failures) == 0 || rec.Summary.Failures[0].Reason != "connect" || rec.Summary.Failures[0].Hint == "" {
		t.Fatalf("failures %+v", rec.Summary.Failures)
	}
	eventually(t, "the backoff", func() bool {
		jobs := d.Jobs()
		return len(jobs) == 1 && jobs[0].State.Aborts == 1 && !jobs[0].State.BackoffUntil.IsZero()
	})
	if g := gaugeWith(t, reg, "tokenprobe_runs_aborted_in_a_row", "profile", "probe"); g != 1 {
		t.Fatalf("tokenprobe_runs_aborted_in_a_row %v", g)
	}
	// The endpoint's state, which the pages on its cause read while the
	// job backs off and sends nothing.
	if g := gaugeWith(t, reg, "tokenprobe_endpoint_failing", "reason", "connect"); g != 1 {
		t.Fatalf("tokenprobe_endpoint_failing{reason=\"connect\"} %v", g)
	}
}
