package probe

import (
	"context"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/hostile"
	"github.com/tokenprobe/tokenprobe/probe/stats"
	"github.com/tokenprobe/tokenprobe/probe/workload"
)

// A server that answers each model-identity prompt with 100 chunks, each
// carrying 1,000 log-probabilities (5 MB): the run keeps each answer to the
// checks' budget (1 MiB: about 21,000 of them), reads at most
// openai.MaxAnswerLogprobs from it, and the reference holds
// MaxIdentityLogprobs a prompt; the heap stays far under the flood.
func TestModelIdentityKeepsALogprobFloodToItsBounds(t *testing.T) {
	h, err := hostile.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	prompts := workload.IdentityPrompts[:4]
	run := runAgainst(t, h.URL(hostile.LogprobFlood), Plan{Stages: []Stage{{Concurrency: 1, Requests: len(prompts)}}}, DefaultFailure())
	run.Endpoint.Timeout = 2 * time.Minute
	run.Workload = &workload.Identity{Prompts: prompts, MaxTokens: 16, Stream: true}
	tracker := stats.NewIdentityTracker(prompts, 1, 0.5, 0.0005, nil, nil)
	run.Identity = tracker.Begin()
	rec := &recorder{}
	run.Sinks = []Sink{rec}
	var sum stats.Summary
	grew := heapGrowth(func() { sum, err = run.Execute(context.Background()) })
	if err != nil {
		for _, r := range rec.seen {
			t.Logf("%v %q", r.Outcome, r.Err)
		}
		t.Fatal(err)
	}
	if sum.ModelIdentity == nil || sum.ModelIdentity.Verdict != stats.Learning || sum.ModelIdentity.LearnedRuns != 1 {
		t.Fatalf("the flooded run: %+v (%d successes, errors %v)", sum.ModelIdentity, sum.Success, sum.ByReason)
	}
	ref := tracker.Reference()
	for i := range prompts {
		if n, a := len(ref.Logprobs[i]), ref.Answers[i][0]; n != stats.MaxIdentityLogprobs || len(a) > stats.MaxIdentityAnswerBytes {
			t.Errorf("prompt %d: %d log-probabilities and an answer of %d bytes kept, want %d and at most %d", i+1, n, len(a), stats.MaxIdentityLogprobs, stats.MaxIdentityAnswerBytes)
		}
	}
	t.Logf("heap grew by %.1f MB at its peak over 4 answers of 5 MB", float64(grew)/1e6)
	if grew > 64<<20 {
		t.Errorf("the heap grew by %.1f MB", float64(grew)/1e6)
	}
}
