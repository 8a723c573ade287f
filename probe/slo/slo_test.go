package slo

import (
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/result"
)

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

func TestEvaluate(t *testing.T) {
	set := Set{Thresholds: []Threshold{
		{Kind: TTFT, Max: ms(500)},
		{Kind: ITL, Max: ms(50)},
		{Kind: OutputTokensPerSecond, Floor: 10},
	}}
	ok := result.Request{Streaming: true, Outcome: result.Success, ContentChunks: 11, OutputTokens: 11, TTFT: ms(200), E2E: ms(700)}
	// ITL = (700-200)/10 = 50 ms: on the threshold, met. tps = 11/0.7 = 15.7.
	slowFirst := ok
	slowFirst.TTFT, slowFirst.E2E = ms(600), ms(1100)
	oneToken := ok
	oneToken.ContentChunks, oneToken.OutputTokens, oneToken.E2E = 1, 1, ms(200)
	failed := ok
	failed.Outcome, failed.Reason = result.Error, result.ReasonStream
	cancelled := ok
	cancelled.Outcome = result.Cancelled

	cases := []struct {
		name    string
		r       result.Request
		counted bool
		good    bool
		met     map[Kind]bool
	}{
		{"meets all", ok, true, true, map[Kind]bool{TTFT: true, ITL: true, OutputTokensPerSecond: true}},
		{"slow first token", slowFirst, true, false, map[Kind]bool{TTFT: false, ITL: true, OutputTokensPerSecond: true}},
		// A one-token answer has no ITL, so the ITL threshold is missed,
		// and 1 token in 200 ms is 5 tokens/s, under the floor.
		{"one token", oneToken, true, false, map[Kind]bool{TTFT: true, ITL: false, OutputTokensPerSecond: false}},
		// An error counts against attainment and meets nothing, even with
		// fast timings before it failed.
		{"error", failed, true, false, map[Kind]bool{TTFT: false, ITL: false, OutputTokensPerSecond: false}},
		{"cancelled", cancelled, false, false, map[Kind]bool{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := set.Evaluate(&c.r)
			if v.Counted != c.counted || v.Good != c.good {
				t.Fatalf("counted=%v good=%v, want %v %v", v.Counted, v.Good, c.counted, c.good)
			}
			for k, want := range c.met {
				if !v.Checked[k] || v.Met[k] != want {
					t.Errorf("%s: checked=%v met=%v, want met=%v", k, v.Checked[k], v.Met[k], want)
				}
			}
			if v.Checked[TTST] || v.Checked[RequestLatency] {
				t.Errorf("unconfigured thresholds were checked: %+v", v.Checked)
			}
		})
	}
}

func TestNoThresholdsMeansGoodIsSuccess(t *testing.T) {
	var set Set
	r := result.Request{Outcome: result.Success}
	if !set.Evaluate(&r).Good {
		t.Fatal("a success with no SLOs configured must be good")
	}
	r.Outcome = result.Error
	if set.Evaluate(&r).Good {
		t.Fatal("an error is never good")
	}
}
