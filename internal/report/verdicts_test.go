package report

import (
	"strings"
	"testing"

	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// The prefix-cache and model-identity lines say the verdict in words,
// with the interval and the bar, and say when there is none.
func TestVerdictLines(t *testing.T) {
	for _, c := range []struct {
		got  string
		want []string
	}{
		{PrefixCacheLine(&stats.PrefixCache{Triples: 8, Speedup: 0.94, Interval: stats.Interval{Low: 0.77, High: 1.14}, MinSpeedup: 1.25, Verdict: stats.CacheBroken}),
			[]string{"warm 0.94x faster than uncached", "0.77x to 1.14x over 8 triples", "bar 1.2x", "BROKEN", "reported no cached tokens"}},
		{PrefixCacheLine(&stats.PrefixCache{Triples: 1, Speedup: 3, MinSpeedup: 1.25, Verdict: stats.Undecided, Why: "one triple: no interval", WarmCached: 1024}),
			[]string{"one triple, no interval", "NOT ENOUGH EVIDENCE", "warm 1024"}},
		{PrefixCacheLine(&stats.PrefixCache{Verdict: stats.Undecided, Why: "no triple had its three requests measured"}),
			[]string{"NOT ENOUGH EVIDENCE: no triple"}},
		{IdentityLine(&stats.ModelIdentity{Prompts: 16, Agreeing: 0, Interval: stats.Interval{High: 0.194}, MinAgreement: 0.5, Verdict: stats.ModelChanged}),
			[]string{"0 of 16 prompts", "0.0% to 19.4%", "bar 50.0%", "CHANGED"}},
		{IdentityLine(&stats.ModelIdentity{Verdict: stats.Learning, LearnedRuns: 2, LearnRuns: 3}),
			[]string{"LEARNING the reference: 2 of 3 runs"}},
	} {
		for _, w := range c.want {
			if !strings.Contains(c.got, w) {
				t.Errorf("%q lacks %q", c.got, w)
			}
		}
	}
}
