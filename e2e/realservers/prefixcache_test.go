package realservers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tokenprobe/tokenprobe/internal/realserver"
	"github.com/tokenprobe/tokenprobe/internal/timingtest"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// prefixCacheConfig probes a server with a prefix_cache profile of 8
// triples as served, and, where defeatedURL is set, a second one with
// extra (body fields of every request) as endpoint "defeated".
func prefixCacheConfig(url, defeatedURL, model, extra string, prefixTokens int) string {
	second, eps := "", "[served]"
	if defeatedURL != "" {
		second = fmt.Sprintf(`  - {name: defeated, base_url: %q, model: %q, timeout: 60s, extra_body: %s}
`, defeatedURL+"/v1", model, extra)
		eps = "[served, defeated]"
	}
	return fmt.Sprintf(`endpoints:
  - {name: served, base_url: %q, model: %q, timeout: 60s}
%sprofiles:
  - name: cache
    endpoints: %s
    prefix_cache: {prefix_tokens: %d}
`, url+"/v1", model, second, eps, prefixTokens)
}

func byEndpoint(sums []stats.Summary) map[string]*stats.PrefixCache {
	out := map[string]*stats.PrefixCache{}
	for _, s := range sums {
		out[s.Endpoint] = s.PrefixCache
	}
	return out
}

// llama-server (its prompt cache on by default, each slot keeping its
// last prompt) is found working; the same server with every request
// asking cache_prompt: false, which its completion handler documents as
// reusing nothing of the slot's KV cache, is found broken (a server of its
// own, so that neither evicts the other's prompt). Its usage says so too:
// prompt_tokens_details.cached_tokens is the prefix on the warm requests
// and 0 with the cache defeated. A verdict withheld because the probe was
// starved is the probe's to say: the interval must still be under the bar.
func TestPrefixCacheOnLlamaServer(t *testing.T) {
	srv, other := realserver.SlowPrefill(t), realserver.SlowPrefill(t)
	timingtest.Retry(t, 3, func(a *timingtest.Attempt) {
		_, sums, _, out := runConfig(context.Background(), t, prefixCacheConfig(srv.URL, other.URL, srv.Model, "{cache_prompt: false}", 1024))
		pc := byEndpoint(sums)
		on, off := pc["served"], pc["defeated"]
		if on == nil || off == nil || on.Triples != 8 || off.Triples != 8 {
			t.Fatalf("prefix cache verdicts %+v %+v, want 8 triples each:\n%s", on, off, out)
		}
		t.Logf("cache on: %.2fx (%.2fx to %.2fx), cold %.1f ms warm %.1f ms, warm cached %.0f tokens; cache_prompt false: %.2fx (%.2fx to %.2fx), cold %.1f ms, warm cached %.0f",
			on.Speedup, on.Interval.Low, on.Interval.High, on.ColdTTFT, on.WarmTTFT, on.WarmCached, off.Speedup, off.Interval.Low, off.Interval.High, off.ColdTTFT, off.WarmCached)
		// A cold prompt shares with the slot's last one only the chat
		// template's opening: a few tokens.
		if on.WarmCached < 1000 || off.WarmCached != 0 || on.ColdCached > 16 {
			t.Errorf("cached tokens: served cold %.0f warm %.0f, defeated warm %.0f; want the template's few, the prefix, 0", on.ColdCached, on.WarmCached, off.WarmCached)
		}
		if on.Verdict != stats.CacheWorking {
			a.Errorf("the working cache is %s: %s", on.Verdict, on.Why)
		}
		switch {
		case off.Verdict == stats.CacheBroken:
		case strings.Contains(off.Why, "starved") && off.Interval.High < off.MinSpeedup:
			t.Logf("the defeated cache's verdict was withheld, the probe starved: %s", off.Why)
		default:
			a.Errorf("the defeated cache is %s: %s", off.Verdict, off.Why)
		}
	})
}

// llm-d-inference-sim with its KV-cache simulation (--enable-kvcache, a
// prefill of 1 ms a prompt token less its cached ones) is found working;
// without it, every prompt is prefilled whole, and found broken.
func TestPrefixCacheOnLLMDSim(t *testing.T) {
	common := []string{"--max-num-seqs", "4", "--prefill-overhead", "5ms", "--prefill-time-per-token", "1ms", "--inter-token-latency", "2ms", "--seed", "1"}
	for _, c := range []struct {
		name string
		args []string
		want stats.Outcome
	}{
		{"kv cache on", append([]string{"--enable-kvcache", "--block-size", "16"}, common...), stats.CacheWorking},
		{"kv cache off", common, stats.CacheBroken},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := realserver.LLMDSim(t, "llmd-model", c.args...)
			timingtest.Retry(t, 3, func(a *timingtest.Attempt) {
				_, sums, _, out := runConfig(context.Background(), t, prefixCacheConfig(srv.URL, "", "llmd-model", "", 256))
				pc := byEndpoint(sums)["served"]
				if pc == nil || pc.Triples != 8 {
					t.Fatalf("prefix cache %+v, want 8 triples:\n%s", pc, out)
				}
				t.Logf("%s: %.2fx (%.2fx to %.2fx), cold %.1f ms warm %.1f ms fresh %.1f ms, cached per request cold %.0f warm %.0f",
					c.name, pc.Speedup, pc.Interval.Low, pc.Interval.High, pc.ColdTTFT, pc.WarmTTFT, pc.FreshTTFT, pc.ColdCached, pc.WarmCached)
				if pc.Verdict != c.want {
					a.Errorf("%s: %s, want %s: %s", c.name, pc.Verdict, c.want, pc.Why)
				}
			})
		})
	}
}
