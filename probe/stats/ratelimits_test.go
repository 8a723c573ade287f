package stats

import (
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/ratelimit"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
)

// TestRateLimitsOfARun: the least remaining over the run's answers, the
// last limit, and the probe's own use per minute against it, counted from
// the requests: 4 requests of 100 + 50 tokens over 2 minutes use 2
// requests and 300 tokens a minute.
func TestRateLimitsOfARun(t *testing.T) {
	a := NewAggregator("p", "openai", "gpt", 1, 0)
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	for i, remaining := range []string{"900", "700", "800", "750"} {
		var rl ratelimit.Reading
		rl.Header([]byte("x-ratelimit-limit-tokens"), []byte("1000"))
		rl.Header([]byte("x-ratelimit-remaining-tokens"), []byte(remaining))
		rl.Header([]byte("x-ratelimit-remaining-requests"), []byte("10"))
		start := t0.Add(time.Duration(i) * 40 * time.Second)
		r := result.Request{Outcome: result.Success, Start: start, End: start,
			InputTokens: 100, OutputTokens: 50, InputSource: result.SourceUsage, OutputSource: result.SourceUsage, RateLimit: &rl}
		a.Add(&r, slo.Verdict{Counted: true, Good: true})
	}
	s := a.Summary()
	if s.DurationSeconds != 120 {
		t.Fatalf("duration %v s", s.DurationSeconds)
	}
	if len(s.RateLimits) != 2 {
		t.Fatalf("rate limits %+v", s.RateLimits)
	}
	req, tok := s.RateLimits[0], s.RateLimits[1]
	if req.Kind != "requests" || req.Limit != 0 || req.MinRemaining != 10 || req.MinShare != nil || req.ProbePerMinute != 2 || req.ProbeShare != nil {
		t.Errorf("requests: %+v", req)
	}
	if tok.Kind != "tokens" || tok.Limit != 1000 || tok.MinRemaining != 700 || *tok.MinShare != 0.7 || tok.ProbePerMinute != 300 || *tok.ProbeShare != 0.3 {
		t.Errorf("tokens: %+v (share %v, probe share %v)", tok, *tok.MinShare, *tok.ProbeShare)
	}
}
