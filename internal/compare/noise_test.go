package compare_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenprobe/tokenprobe/internal/compare"
	"github.com/tokenprobe/tokenprobe/internal/runonce"
	"github.com/tokenprobe/tokenprobe/internal/timingtest"
)

// simRun runs one closed-loop profile against the in-process simulator,
// whose steps are decode long (prefill half that), and returns its
// artifacts folder.
func simRun(t *testing.T, decodeUs int) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tokenprobe.yaml")
	body := fmt.Sprintf(`
endpoints:
  - name: sim
    simulator: {slots: 4, decode_base: %dus, prefill_base: %dus, jitter: 0.1}
profiles:
  - name: p
    load: {concurrency: 2, requests: 40}
    workload: {output_tokens: {mean: 8}}
    slo: {ttft: 1s}
`, decodeUs, decodeUs/2)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "artifacts")
	if code := runonce.Run(context.Background(), runonce.Options{ConfigFile: cfg, ArtifactsDir: out, Out: io.Discard, Progress: io.Discard}); code != 0 {
		t.Fatalf("run exited %d", code)
	}
	return out
}

// gate compares two artifact folders under rules and returns the exit
// code and what it printed.
func gate(t *testing.T, base, next, rules string) (int, string) {
	t.Helper()
	var out strings.Builder
	code := compare.Main(&out, base, next, rules, "", compare.Options{})
	return code, out.String()
}

// Identical runs on this machine differ by its noise alone: twenty pairs
// of them fail no gate of 5% on a rate (the finding: two identical
// all-success runs 10 s apart failed throughput<-5% with a zero-width
// interval). A simulator 20% slower at every step fails it.
func TestRunsOwnNoiseFailsNoGate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 60 profiles against the simulator")
	}
	const rules = "throughput<-5%,goodput<-5%"
	const pairs = 20
	// The machine's own noise: .ci/run's busy pass runs this beside four
	// busy loops at the same priority (load average 6 to 8 on two cores). Six, two of
	// them the test's own, failed both sets there: between two one-second
	// runs the scheduler's bursts shifted the second by 6 to 8%, which no
	// interval drawn from within a run sees (docs/MEASUREMENT.md).
	// A gate that mistakes noise for change does so in every set of
	// twenty pairs on a busy machine (the zero-width interval failed 3 to
	// 6 of 20); a burst that shifts one pair's whole second does not
	// recur: another set of twenty settles it, as timingtest settles
	// other real-time checks. Two sets were not always enough: a CI
	// rehearsal's busy pass (2026-11-27) failed one pair in each of two
	// sets, by 5.4% and 11.9% of throughput; a third set is allowed.
	timingtest.Retry(t, 3, func(at *timingtest.Attempt) {
		for i := range pairs {
			a, b := simRun(t, 5000), simRun(t, 5000)
			if code, out := gate(t, a, b, rules); code != compare.ExitOK {
				at.Errorf("pair %d of identical runs failed the gate (exit %d):\n%s", i+1, code, out)
			}
		}
	})
	base := simRun(t, 5000)
	slower := simRun(t, 6000)
	code, out := gate(t, base, slower, "throughput<-5%")
	if code != compare.ExitTripped {
		t.Errorf("a 20%% slower simulator passed throughput<-5%% (exit %d):\n%s", code, out)
	} else {
		t.Logf("%s", out[strings.Index(out, "throughput"):])
	}
}
