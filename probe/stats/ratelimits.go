package stats

import (
	"github.com/tokenprobe/tokenprobe/probe/ratelimit"
	"github.com/tokenprobe/tokenprobe/probe/result"
)

// RateLimit is one kind of a provider's rate limit over a run: what its
// answers said, and how much of it the probe itself used.
type RateLimit struct {
	Kind string `json:"kind"`
	// Limit is the last limit an answer said (0 where only what remains
	// was sent, as Azure does).
	Limit float64 `json:"limit,omitempty"`
	// MinRemaining is the least that remained in any answer, and
	// MinShare that over the limit (where a limit was sent).
	MinRemaining float64  `json:"min_remaining"`
	MinShare     *float64 `json:"min_share,omitempty"`
	// ProbePerMinute is what the probe's own requests used of this kind
	// per minute of the run (requests; input and output tokens as the
	// usage counted them), and ProbeShare that over the limit: the
	// providers' limits are per minute.
	ProbePerMinute float64  `json:"probe_per_minute"`
	ProbeShare     *float64 `json:"probe_share,omitempty"`
}

type rateLimitSeen struct {
	seen                bool
	limit, minRemaining float64
}

func (a *Aggregator) addRateLimit(r *result.Request) {
	for _, k := range ratelimit.Kinds {
		rem, ok := r.RateLimit.Get(k, ratelimit.Remaining, r.End)
		if !ok {
			continue
		}
		s := &a.rateLimits[k]
		if !s.seen || rem < s.minRemaining {
			s.minRemaining = rem
		}
		s.seen = true
		if lim, ok := r.RateLimit.Get(k, ratelimit.Limit, r.End); ok {
			s.limit = lim
		}
	}
}

func (a *Aggregator) rateLimitSummary(seconds float64, requests int) []RateLimit {
	var out []RateLimit
	for _, k := range ratelimit.Kinds {
		s := a.rateLimits[k]
		if !s.seen {
			continue
		}
		rl := RateLimit{Kind: k.String(), Limit: s.limit, MinRemaining: s.minRemaining}
		if s.limit > 0 {
			share := s.minRemaining / s.limit
			rl.MinShare = &share
		}
		if seconds > 0 {
			used := map[ratelimit.Kind]float64{
				ratelimit.Requests: float64(requests), ratelimit.Tokens: float64(a.inTokens + a.outTokens),
				ratelimit.InputTokens: float64(a.inTokens), ratelimit.OutputTokens: float64(a.outTokens),
			}[k]
			rl.ProbePerMinute = used / seconds * 60
			if s.limit > 0 {
				share := rl.ProbePerMinute / s.limit
				rl.ProbeShare = &share
			}
		}
		out = append(out, rl)
	}
	return out
}
