package stats

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
)

// addTriples adds n triples whose cold, warm and fresh TTFTs are drawn by
// ttft, each with a jitter of ±jitter (a share), warm requests reporting
// cached tokens.
func addTriples(a *Aggregator, rng *rand.Rand, n int, cold, warm, fresh time.Duration, jitter float64, cached int) {
	start := time.Unix(1_700_000_000, 0)
	for i := range n {
		for phase, d := range map[result.CachePhase]time.Duration{result.CacheCold: cold, result.CacheWarm: warm, result.CacheFresh: fresh} {
			d = time.Duration(float64(d) * (1 + jitter*(2*rng.Float64()-1)))
			r := &result.Request{Outcome: result.Success, Streaming: true, ContentChunks: 3, Start: start, TTFT: d, E2E: d + time.Millisecond,
				End: start.Add(d + time.Millisecond), CachePhase: phase, CacheTriple: 1000 + i, InputTokens: 1040}
			if phase == result.CacheWarm {
				r.CachedInputTokens = cached
			}
			a.Add(r, slo.Verdict{})
		}
	}
}

// The verdict stands on the interval: a cache that saves two thirds of
// TTFT works, one that saves nothing is broken, and either from two noisy
// triples is not enough evidence; a starved probe gives no broken verdict.
func TestPrefixCacheVerdict(t *testing.T) {
	for _, c := range []struct {
		name                string
		n                   int
		cold, warm, fresh   time.Duration
		jitter              float64
		starved             bool
		want                Outcome
		speedLow, speedHigh float64
	}{
		{"working", 8, 36 * time.Millisecond, 15 * time.Millisecond, 36 * time.Millisecond, 0.1, false, CacheWorking, 2.2, 2.6},
		{"broken", 8, 34 * time.Millisecond, 34 * time.Millisecond, 34 * time.Millisecond, 0.1, false, CacheBroken, 0.9, 1.1},
		{"two noisy triples", 2, 34 * time.Millisecond, 30 * time.Millisecond, 34 * time.Millisecond, 0.5, false, Undecided, 0.5, 2},
		{"at the bar", 30, 125 * time.Millisecond, 100 * time.Millisecond, 125 * time.Millisecond, 0.2, false, Undecided, 1.1, 1.4},
		{"broken but starved", 8, 34 * time.Millisecond, 34 * time.Millisecond, 34 * time.Millisecond, 0.1, true, Undecided, 0.9, 1.1},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := NewAggregator("cache", "ls", "m", 1, 0)
			a.SetPrefixCache(1.25)
			addTriples(a, rand.New(rand.NewPCG(1, 2)), c.n, c.cold, c.warm, c.fresh, c.jitter, 1024)
			if c.starved {
				a.SetProbe(Probe{DelayP99Ms: 30, Samples: 100, StealPercent: -1})
			}
			s := a.Summary()
			pc := s.PrefixCache
			if pc == nil || pc.Triples != c.n {
				t.Fatalf("prefix cache %+v, want %d triples", pc, c.n)
			}
			if pc.Verdict != c.want || pc.Speedup < c.speedLow || pc.Speedup > c.speedHigh {
				t.Fatalf("verdict %s, speed-up %.2f (%.2f to %.2f), want %s within %.2f to %.2f: %s", pc.Verdict, pc.Speedup, pc.Interval.Low, pc.Interval.High, c.want, c.speedLow, c.speedHigh, pc.Why)
			}
			if !(pc.Interval.Low <= pc.Speedup && pc.Speedup <= pc.Interval.High) {
				t.Errorf("the interval %.2f to %.2f does not hold its estimate %.2f", pc.Interval.Low, pc.Interval.High, pc.Speedup)
			}
			if c.starved && !strings.Contains(pc.Why, "starved") {
				t.Errorf("a starved probe's undecided verdict says %q", pc.Why)
			}
			if pc.WarmCached != 1024 || pc.ColdCached != 0 {
				t.Errorf("cached tokens cold %v warm %v, want 0 and 1024", pc.ColdCached, pc.WarmCached)
			}
		})
	}
}

// A triple with a request that failed or was never sent is left out, and
// a profile that is no prefix-cache probe has no verdict.
func TestPrefixCacheCountsCompleteTriples(t *testing.T) {
	a := NewAggregator("cache", "ls", "m", 1, 0)
	a.SetPrefixCache(1.25)
	addTriples(a, rand.New(rand.NewPCG(1, 2)), 3, 30*time.Millisecond, 10*time.Millisecond, 30*time.Millisecond, 0.05, 0)
	start := time.Unix(1_700_000_000, 0)
	a.Add(&result.Request{Outcome: result.Success, Streaming: true, ContentChunks: 2, Start: start, End: start.Add(time.Second), TTFT: time.Millisecond, E2E: time.Second,
		CachePhase: result.CacheCold, CacheTriple: 7}, slo.Verdict{})
	a.Add(&result.Request{Outcome: result.Error, Start: start, End: start.Add(time.Second), CachePhase: result.CacheWarm, CacheTriple: 7}, slo.Verdict{})
	if pc := a.Summary().PrefixCache; pc == nil || pc.Triples != 3 || pc.Verdict != CacheWorking {
		t.Fatalf("%+v: want the 3 complete triples, working", pc)
	}
	b := NewAggregator("chat", "ls", "m", 1, 0)
	addTriples(b, rand.New(rand.NewPCG(1, 2)), 3, 30*time.Millisecond, 10*time.Millisecond, 30*time.Millisecond, 0.05, 0)
	if pc := b.Summary().PrefixCache; pc != nil {
		t.Fatalf("a profile without prefix_cache has a verdict: %+v", pc)
	}
	e := NewAggregator("cache", "ls", "m", 1, 0)
	e.SetPrefixCache(1.25)
	if pc := e.Summary().PrefixCache; pc == nil || pc.Triples != 0 || pc.Verdict != Undecided || pc.Why == "" {
		t.Fatalf("no triple: %+v", pc)
	}
}

// The t quantiles: the table's, and past it within 0.001 of the exact
// values (R's qt(0.975, df)).
func TestTQuantile(t *testing.T) {
	for df, want := range map[int]float64{1: 12.706, 9: 2.262, 30: 2.042, 31: 2.0395, 60: 2.0003, 120: 1.9799, 1000: 1.9623} {
		if got := tQuantile(df); math.Abs(got-want) > 0.001 {
			t.Errorf("t(0.975, %d) = %.4f, want %.4f", df, got, want)
		}
	}
}

// One whole triple has a speed-up and no interval, and its summary is
// JSON (an infinite bound would not be).
func TestPrefixCacheOneTripleIsJSON(t *testing.T) {
	a := NewAggregator("cache", "ls", "m", 1, 0)
	a.SetPrefixCache(1.25)
	addTriples(a, rand.New(rand.NewPCG(1, 2)), 1, 30*time.Millisecond, 10*time.Millisecond, 30*time.Millisecond, 0, 0)
	s := a.Summary()
	if pc := s.PrefixCache; pc.Triples != 1 || pc.Verdict != Undecided || pc.Interval != (Interval{}) || pc.Speedup < 2.9 {
		t.Fatalf("%+v", pc)
	}
	if _, err := json.Marshal(s); err != nil {
		t.Fatal(err)
	}
}
