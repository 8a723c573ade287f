package probe

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/sim"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/workload"
)

// A session's turns go in order, after their delays, each carrying the
// conversation so far: the simulator's usage.prompt_tokens counts the
// earlier turns and answers.
func TestSessionsCarryTheConversation(t *testing.T) {
	plan := Plan{Stages: []Stage{{Concurrency: 2, Requests: 4}}, Seed: 1}
	run, _ := newRun(t, sim.Config{Slots: 8, DecodeBase: time.Millisecond, PrefillBase: time.Millisecond}, plan, 1, 1)
	run.Workload = nil
	run.Sessions = workload.NewSessions([]workload.Session{{ID: "chat", Turns: []workload.Turn{
		{Text: "one two three", OutputTokens: 5},
		{Text: "four five", Delay: 60 * time.Millisecond, OutputTokens: 4},
		{Text: "six", Delay: 10 * time.Millisecond, OutputTokens: 3},
	}}}, false, workload.Lengths{Mean: 8}, true, 1)
	rec := &recorder{}
	run.Sinks = []Sink{rec}
	sum, err := run.Execute(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Requests counts sessions: 4 sessions of 3 turns.
	if sum.Requests != 12 || len(rec.seen) != 12 {
		t.Fatalf("%d requests in the summary, %d seen: want 4 sessions x 3 turns", sum.Requests, len(rec.seen))
	}
	byTurn := map[int][]*result.Request{}
	for _, r := range rec.seen {
		if r.Session != "chat" || r.Outcome != result.Success {
			t.Fatalf("request %+v", r)
		}
		byTurn[r.Turn] = append(byTurn[r.Turn], r)
	}
	// Prompt tokens as the simulator counts them (one word, one token):
	// turn 0: 3; turn 1: 3 + 5 answer + 2; turn 2: 10 + 4 answer + 1.
	for turn, want := range map[int]int{0: 3, 1: 10, 2: 15} {
		for _, r := range byTurn[turn] {
			if r.InputTokens != want || r.InputSource != result.SourceUsage || r.IntendedInputTokens != want {
				t.Errorf("turn %d: %d input tokens (%s), intended %d; want %d", turn, r.InputTokens, r.InputSource, r.IntendedInputTokens, want)
			}
		}
	}
	// The second turn waited its delay after the first answer ended.
	// Two sessions run at once and requests do not say which session
	// instance they belong to, so pair the k-th earliest second turn with
	// the k-th earliest first answer: if every turn waited for its own
	// session's answer, the k earliest second turns waited for k answers,
	// so this pairing keeps the delay too.
	var ends, begins []time.Time
	for _, r := range byTurn[0] {
		ends = append(ends, r.End)
	}
	for _, r := range byTurn[1] {
		begins = append(begins, r.Start)
	}
	slices.SortFunc(ends, time.Time.Compare)
	slices.SortFunc(begins, time.Time.Compare)
	starts := []time.Duration{}
	for i := range begins {
		starts = append(starts, begins[i].Sub(ends[i]))
	}
	if slices.Min(starts) < 60*time.Millisecond {
		t.Errorf("second turns started %v after a first answer ended, want at least the 60 ms delay", starts)
	}
}

// A failed turn ends its session: later turns would continue a
// conversation the user never saw.
func TestFailedTurnEndsTheSession(t *testing.T) {
	plan := Plan{Stages: []Stage{{Concurrency: 1, Requests: 10}}, Seed: 1}
	run, _ := newRun(t, sim.Config{Slots: 8, DecodeBase: time.Millisecond, PrefillBase: time.Millisecond, Faults: sim.Faults{Error500: 0.5}, Seed: 3}, plan, 1, 1)
	run.Workload = nil
	run.Sessions = workload.NewSessions([]workload.Session{{ID: "s", Turns: []workload.Turn{{Text: "a"}, {Text: "b"}, {Text: "c"}}}}, false, workload.Lengths{Mean: 2}, true, 1)
	rec := &recorder{}
	run.Sinks = []Sink{rec}
	if _, err := run.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for i, r := range rec.seen {
		if r.Outcome == result.Error {
			failed++
			if i+1 < len(rec.seen) && rec.seen[i+1].Turn != 0 {
				t.Fatalf("turn %d followed a failed turn %d", rec.seen[i+1].Turn, r.Turn)
			}
		}
	}
	if failed == 0 {
		t.Fatal("no turn failed: the test proves nothing")
	}
}
