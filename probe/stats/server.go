package stats

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Server is what the endpoint's server said about itself during a run,
// read from its own /metrics: deltas of its histograms and counters over
// the run's window, and its gauges sampled while the run went. Times are
// in milliseconds. A phase the server exposes no series for is absent.
type Server struct {
	Kind string `json:"kind"`
	URL  string `json:"url"`
	// Replica is the base URL of the replica this is, in Replicas.
	Replica string `json:"replica,omitempty"`
	// Replicas are each replica's own figures, for an endpoint of several
	// (base_urls, one metrics page each): each set against the requests
	// the probe sent that replica. The figures around them are the
	// replicas' pooled as one server.
	Replicas []Server `json:"replicas,omitempty"`
	Scrapes  int      `json:"scrapes"`
	// Err is why the figures are missing or partial: the server could not
	// be read, restarted during the run, or exposes none of the series.
	Err string `json:"error,omitempty"`
	// Missing names the figures the server exposes no series for.
	Missing []string `json:"missing,omitempty"`

	// Population is the requests the server finished in the window (its
	// end-to-end histogram's count, or a phase's where larger): the
	// queue, prefill and TTFT means are over it.
	Population float64 `json:"population,omitempty"`

	Queue   *Phase `json:"queue_time_ms,omitempty"`
	Prefill *Phase `json:"prefill_time_ms,omitempty"`
	TTFT    *Phase `json:"server_ttft_ms,omitempty"`
	ITL     *Phase `json:"server_itl_ms,omitempty"`
	E2E     *Phase `json:"server_e2e_ms,omitempty"`

	Running *Level `json:"running_requests,omitempty"`
	Waiting *Level `json:"waiting_requests,omitempty"`
	KVCache *Level `json:"kv_cache_usage,omitempty"`

	PrefixCacheHitRate *float64 `json:"prefix_cache_hit_rate,omitempty"`
	Preemptions        *float64 `json:"preemptions,omitempty"`
	PromptTokens       *float64 `json:"prompt_tokens,omitempty"`
	GenerationTokens   *float64 `json:"generation_tokens,omitempty"`

	// Breakdown splits the client's TTFT into the server's queue, its
	// prefill and the rest; nil where the server has no queue series.
	Breakdown *Breakdown `json:"ttft_breakdown,omitempty"`
	// Note says what the figures cannot show: no breakdown and why, or
	// other traffic on the server mixed into them.
	Note string `json:"note,omitempty"`
}

// Phase is one server histogram's change over a window.
type Phase struct {
	// Count is the observations in the window: requests, for the
	// per-request histograms.
	Count float64 `json:"count"`
	// Over is the population Mean and P50 are over where it is not Count:
	// a server that observes its queue time only for requests that waited
	// counts fewer than it finished, and the rest waited zero.
	Over float64 `json:"over,omitempty"`
	Mean float64 `json:"mean"`
	// P50 is interpolated within the server's buckets, as
	// histogram_quantile does: only as fine as they are. Absent where the
	// histogram has no classic buckets.
	P50 *float64 `json:"p50,omitempty"`
	// P50Bucket is the bucket the median lies in, [lower, upper]: how far
	// P50 may be off.
	P50Bucket []float64 `json:"p50_bucket,omitempty"`
}

// Level is a gauge sampled over a window.
type Level struct {
	Avg  float64 `json:"avg"`
	Peak float64 `json:"peak"`
}

// Breakdown is where the client's TTFT went, in milliseconds.
type Breakdown struct {
	Mean Split `json:"mean"`
	// P50 splits the medians; absent where a phase has no median or its
	// buckets are too coarse to split the client's (P50Note says which).
	P50     *Split `json:"p50,omitempty"`
	P50Note string `json:"p50_note,omitempty"`
	// Dominant is the largest part of the mean: "queue", "prefill" or
	// "elsewhere" (network, gateway, tokenization, the client).
	Dominant string `json:"dominant"`
	// Verdict says it in one line.
	Verdict string `json:"verdict"`
	// ServerTTFTClock is where the server's own TTFT was found to start,
	// read from its means over the window: "arrival" (its queue included)
	// or "scheduling" (left out); "" where it has no TTFT series or its
	// TTFT fits neither, Withheld then saying what is not given and why.
	ServerTTFTClock string `json:"server_ttft_clock,omitempty"`
	Withheld        string `json:"withheld,omitempty"`
}

// Split is a TTFT and its parts. Prefill is absent where the server does
// not expose it; Elsewhere is then everything but the queue. Where the
// server's own TTFT is known, Elsewhere splits into ServerOther (the rest
// of the server's TTFT: its front end, tokenising) and Outside (the
// client's TTFT less the server's: network, gateways and their queues).
type Split struct {
	TTFT        float64  `json:"ttft"`
	Queue       float64  `json:"queue"`
	Prefill     *float64 `json:"prefill,omitempty"`
	Elsewhere   float64  `json:"elsewhere"`
	ServerOther *float64 `json:"server_other,omitempty"`
	Outside     *float64 `json:"outside,omitempty"`
	// Network is the client's own share of what lies outside the server
	// (or elsewhere, where the server has no TTFT clock): its mean DNS,
	// connect and TLS time per request.
	Network *float64 `json:"network,omitempty"`
}

// AddsUp says how the parts of s fail to add up to their wholes, or ""
// where they do: queue, prefill and elsewhere make the TTFT, the server's
// front end and outside make elsewhere, the client's network is within
// what lies outside the server, and none is below zero; within a
// thousandth of a millisecond (rounding).
func (s Split) AddsUp() string {
	const eps = 1e-3
	var why []string
	parts := s.Queue + s.Elsewhere
	if s.Prefill != nil {
		parts += *s.Prefill
	}
	if math.Abs(parts-s.TTFT) > eps {
		why = append(why, fmt.Sprintf("queue, prefill and elsewhere make %.3f ms of a %.3f ms TTFT", parts, s.TTFT))
	}
	for name, v := range map[string]*float64{"queue": &s.Queue, "prefill": s.Prefill, "elsewhere": &s.Elsewhere, "front end": s.ServerOther, "outside": s.Outside, "network": s.Network} {
		if v != nil && *v < -eps {
			why = append(why, fmt.Sprintf("%s is %.3f ms", name, *v))
		}
	}
	if (s.ServerOther == nil) != (s.Outside == nil) {
		why = append(why, "front end and outside are not given together")
	} else if s.Outside != nil && math.Abs(*s.ServerOther+*s.Outside-s.Elsewhere) > eps {
		why = append(why, fmt.Sprintf("front end and outside make %.3f ms of %.3f ms elsewhere", *s.ServerOther+*s.Outside, s.Elsewhere))
	}
	if s.Network != nil {
		within := s.Elsewhere
		if s.Outside != nil {
			within = *s.Outside
		}
		if *s.Network > within+eps {
			why = append(why, fmt.Sprintf("network %.3f ms is over the %.3f ms it is part of", *s.Network, within))
		}
	}
	slices.Sort(why)
	return strings.Join(why, "; ")
}

// FormatMillis writes a time in milliseconds for a person: "4.3 s",
// "230 ms", "4.2 ms".
func FormatMillis(ms float64) string {
	switch a := math.Abs(ms); {
	case a >= 1000:
		return fmt.Sprintf("%.1f s", (time.Duration(ms * float64(time.Millisecond))).Seconds())
	case a >= 10:
		return fmt.Sprintf("%.0f ms", ms)
	}
	return fmt.Sprintf("%.1f ms", ms)
}
