package probe

import (
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
)

// A plan of one fixed level keeps no group of its own: the run's summary
// is that level's, and a second copy of every result would be added and
// sorted again at the end (issue 48). Two levels, or one ramp, keep theirs.
func TestOneLevelKeepsNoGroupOfItsOwn(t *testing.T) {
	ep := &client.Endpoint{Name: "e", Model: "m"}
	for _, tc := range []struct {
		name   string
		stages []Stage
		groups int
	}{
		{"one fixed level", []Stage{{Concurrency: 4, Duration: time.Second}}, 0},
		{"two levels", []Stage{{Concurrency: 4, Duration: time.Second}, {Concurrency: 8, Duration: time.Second}}, 2},
		{"one ramp", []Stage{{Concurrency: 1, RampTo: 8, Duration: time.Second}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newLevelGroups(&Run{Plan: Plan{Stages: tc.stages}, Endpoint: ep})
			now := time.Now()
			for i, level := range []float64{1, 5} {
				stage := min(i, len(tc.stages)-1)
				g.add(&result.Request{Stage: stage, Level: level, Scheduled: now, Start: now, End: now, Outcome: result.Success}, slo.Verdict{})
			}
			if n := len(g.summaries()); n != tc.groups {
				t.Errorf("%d summaries, want %d", n, tc.groups)
			}
		})
	}
}
