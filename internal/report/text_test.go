package report

import (
	"strings"
	"testing"

	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// A capacity search overshoots on purpose: its pooled attainment below the
// objective is never printed beside PASSED; its verdict is its capacity,
// said on the search's own line, FAILED where no level met the objective.
func TestASearchSaysItsVerdictOnce(t *testing.T) {
	for _, c := range []struct {
		capacity float64
		passed   bool
		want     string
	}{
		{8, true, "concurrency 8: found in 5 steps, within 10% (PASSED: a level was shown to meet the objective)"},
		{0, false, "concurrency 0: found in 5 steps, within 10% (FAILED: no level it tried met the objective)"},
	} {
		s := &stats.Summary{Profile: "p", Objective: 0.9, Attainment: 0.781, Passed: c.passed, SLOThresholds: map[string]float64{"ttft": 200},
			Search: &stats.Search{Capacity: c.capacity, Precision: 0.1, Steps: 5, Done: true}}
		var b strings.Builder
		Text(&b, s, "concurrency")
		out := b.String()
		if strings.Contains(out, "90.0%: PASSED") || strings.Contains(out, "90.0%: FAILED") ||
			!strings.Contains(out, "78.1% over every step") || !strings.Contains(out, c.want) {
			t.Errorf("capacity %g:\n%s\nwant %q and no verdict beside the pooled attainment", c.capacity, out, c.want)
		}
	}
}
