package compare_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/tokenprobe/tokenprobe/internal/compare"
	"github.com/tokenprobe/tokenprobe/internal/rundir"
	"github.com/tokenprobe/tokenprobe/internal/runonce"
	"github.com/tokenprobe/tokenprobe/internal/timingtest"
)

// simRun runs one closed-loop profile against the in-process simulator,
// whose steps are decode long (prefill half that), and returns its
// artifacts folder.
func simRun(t *testing.T, decodeUs, requests int) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tokenprobe.yaml")
	body := fmt.Sprintf(`
endpoints:
  - name: sim
    simulator: {slots: 4, decode_base: %dus, prefill_base: %dus, jitter: 0.1}
profiles:
  - name: p
    load: {concurrency: 2, requests: %d}
    workload: {output_tokens: {mean: 8}}
    slo: {ttft: 1s}
`, decodeUs, decodeUs/2, requests)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "artifacts")
	// Any verdict on the objective will do: the gate compares.
	if code := runonce.Run(context.Background(), runonce.Options{ConfigFile: cfg, ArtifactsDir: out, Out: io.Discard, Progress: io.Discard, Undecided: runonce.UndecidedPass}); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	return out
}

// decisions compares two artifact folders' runs under rules.
func decisions(t *testing.T, base, next, rules string) []compare.Decision {
	t.Helper()
	rs, err := compare.ParseRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	load := func(dir string) *compare.Run {
		d, _, err := rundir.Find(dir)
		if err != nil {
			t.Fatal(err)
		}
		runs, err := rundir.Load(d)
		if err != nil || len(runs) != 1 {
			t.Fatalf("%s: %d runs, %v", dir, len(runs), err)
		}
		return runs[0]
	}
	b, n := load(base), load(next)
	return compare.Check(b.Key(), compare.Compare(b, n, compare.Options{}), rs)
}

// starved reports whether the probe was starved in either run.
func starved(t *testing.T, dirs ...string) bool {
	t.Helper()
	for _, dir := range dirs {
		d, _, err := rundir.Find(dir)
		if err != nil {
			t.Fatal(err)
		}
		runs, err := rundir.Load(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if p := r.Summary.Probe; p != nil && p.Starved {
				return true
			}
		}
	}
	return false
}

// Identical runs on this machine differ by its noise alone: twenty pairs
// of them fail no gate of 5% on a rate, nor the README's example gate
// (the finding: two identical all-success runs 10 s apart failed
// throughput<-5% with a zero-width interval; on a busy host the README's
// gate failed one pair in five at "+203%, interval [+1.7%, +585%]"). A
// gate fails only when the whole interval of a change, widened by what
// the probe's own delay could have moved it, lies past its threshold;
// between the two it says there is not enough evidence, which is no
// failure. A simulator 20% slower at every step fails throughput<-5%, or
// is not enough evidence with a number of requests that then decides it,
// or, where the probe was starved (beside eight busy loops its own delay
// is a third of these 40 ms requests), says no number would.
func TestRunsOwnNoiseFailsNoGate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 60 profiles against the simulator")
	}
	const rules = "throughput<-5%,goodput<-5%,ttft.p95>+10%"
	const pairs = 20
	// .ci/run's busy pass runs this beside eight busy loops at the same
	// priority. A burst of the machine that shifts one run's whole second
	// is outside any interval drawn from within a run (docs/MEASUREMENT.md):
	// a second set of twenty settles it, as timingtest settles other
	// real-time checks.
	undecided := 0
	timingtest.Retry(t, 2, func(at *timingtest.Attempt) {
		for i := range pairs {
			a, b := simRun(t, 5000, 40), simRun(t, 5000, 40)
			for _, d := range decisions(t, a, b, rules) {
				switch d.Outcome {
				case compare.Failed:
					at.Errorf("pair %d of identical runs: %s", i+1, d.Line())
				case compare.Undecided:
					undecided++
				}
			}
		}
	})
	t.Logf("identical pairs: %d undecided decisions of %d", undecided, 3*pairs)
	need := 0
	base, slower := simRun(t, 5000, 40), simRun(t, 6000, 40)
	for _, d := range decisions(t, base, slower, "throughput<-5%") {
		switch {
		case d.Outcome == compare.Undecided && d.RequestsToDecide > 40:
			need = d.RequestsToDecide
			t.Logf("40 requests: %s", d.Line())
		case d.Outcome == compare.Undecided && d.RequestsToDecide == -1 && starved(t, base, slower):
			// Beside busy loops the probe's own delay is a large part of
			// these 40 ms requests: what it says is that it cannot tell.
			t.Logf("the probe starved: %s", d.Line())
			return
		case d.Outcome != compare.Failed:
			t.Fatalf("a 20%% slower simulator: %s", d.Line())
		}
	}
	if need > 0 {
		// At twice what it asked for, from a change that was an
		// estimate.
		n := min(2*need, 2000)
		for _, d := range decisions(t, simRun(t, 5000, n), simRun(t, 6000, n), "throughput<-5%") {
			if d.Outcome != compare.Failed {
				t.Errorf("a 20%% slower simulator at %d requests: %s", n, d.Line())
			}
		}
	}
}
