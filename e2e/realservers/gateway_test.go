package realservers

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/realserver"
	"github.com/tokenprobe/tokenprobe/internal/sim"
	"github.com/tokenprobe/tokenprobe/internal/timingtest"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Portkey's gateway (@portkey-ai/gateway 1.15.2, from npm) between the
// probe and two model servers, tokenprobe's simulator and llama.cpp's
// llama-server: whole answers come through it, right and counted once;
// its own failures are told from the server's, each classified and the
// gateway named: its validation (bad_request), its guardrail's deny (a
// 446, content_filter). A streamed answer through it fails in the gateway itself
// on this Node.js (20: "TypeError: immutable" as it appends its headers to
// the upstream's response), with either upstream: classified as the
// gateway's server_error, never as the model server's. Captured in
// probe/apierror/testdata/portkey-*.http.
func TestThroughPortkeysGateway(t *testing.T) {
	gw := realserver.Portkey(t)
	s, err := sim.Start("127.0.0.1:0", sim.Config{Slots: 4, DecodeBase: 2 * time.Millisecond, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	llama := realserver.LlamaServer(t)
	for _, up := range []struct{ name, url, model string }{
		{"simulator", "http://" + s.Addr(), s.Config().Model},
		{"llama-server", llama.URL, llama.Model},
	} {
		t.Run(up.name, func(t *testing.T) {
			endpoint := func(name string, provider bool) string {
				h := fmt.Sprintf("x-portkey-custom-host: %q", up.url+"/v1")
				if provider {
					h += ", x-portkey-provider: openai"
				}
				return fmt.Sprintf("  - {name: %s, base_url: %q, model: %q, timeout: 60s, headers: {%s}}\n", name, gw.URL+"/v1", up.model, h)
			}
			// An input guardrail of the gateway's own (its default.wordCount
			// plugin, no network) that denies every prompt: its 446.
			guard := fmt.Sprintf(`{"provider":"openai","custom_host":%q,"input_guardrails":[{"default.wordCount":{"minWords":5000,"maxWords":10000},"deny":true}]}`, up.url+"/v1")
			guarded := fmt.Sprintf("  - {name: gateway-guarded, base_url: %q, model: %q, timeout: 60s, headers: {x-portkey-config: %q}}\n", gw.URL+"/v1", up.model, guard)
			cfg := "endpoints:\n" + endpoint("gateway", true) + endpoint("gateway-misconfigured", false) + guarded + `profiles:
  - name: whole
    endpoints: [gateway]
    load: {concurrency: 2, requests: 8}
    workload: {input_tokens: {mean: 16}, output_tokens: {mean: 8}, stream: false}
  - name: streamed
    endpoints: [gateway]
    load: {concurrency: 1, requests: 3}
    workload: {input_tokens: {mean: 16}, output_tokens: {mean: 8}}
    failure: {abort: {error_ratio: 0}, backoff: {base: 0s}}
  - name: misconfigured
    endpoints: [gateway-misconfigured]
    load: {concurrency: 1, requests: 3}
    workload: {input_tokens: {mean: 16}, output_tokens: {mean: 8}, stream: false}
    failure: {abort: {error_ratio: 0}, backoff: {base: 0s}}
  - name: guarded
    endpoints: [gateway-guarded]
    load: {concurrency: 1, requests: 3}
    workload: {input_tokens: {mean: 16}, output_tokens: {mean: 8}, stream: false}
    failure: {abort: {error_ratio: 0}, backoff: {base: 0s}}
`
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			_, sums, _, out := runConfig(ctx, t, cfg)
			by := map[string]stats.Summary{}
			defer func() {
				t.Logf("by profile: whole %d/%d, streamed %v, misconfigured %v, guarded %v", by["whole"].Success, by["whole"].Requests, by["streamed"].ByReason, by["misconfigured"].ByReason, by["guarded"].ByReason)
			}()
			for _, s := range sums {
				by[s.Profile] = s
			}
			if w := by["whole"]; w.Success != 8 || w.Errors != 0 || w.WrongAnswers != 0 || w.OutputTokens == 0 {
				t.Errorf("whole answers through the gateway: %d of 8 right (%d errors, %d wrong), %d output tokens:\n%s", w.Success, w.Errors, w.WrongAnswers, w.OutputTokens, out)
			}
			if st := by["streamed"]; st.Success == 0 {
				// The gateway's own failure, named, and never the server's.
				if st.ByReason["server_error"] != st.Requests || len(st.Failures) == 0 || !strings.Contains(st.Failures[0].Message, "from the Portkey gateway itself") {
					t.Errorf("streamed answers through the gateway: %v, %+v; want each the gateway's own server_error, naming it", st.ByReason, st.Failures)
				}
			} else if st.Errors != 0 {
				t.Errorf("streamed answers through the gateway: %d of %d", st.Success, st.Requests)
			}
			if m := by["misconfigured"]; m.ByReason["bad_request"] != m.Requests || len(m.Failures) == 0 ||
				!strings.Contains(m.Failures[0].Message, "from the Portkey gateway itself") || !strings.Contains(m.Failures[0].Message, "x-portkey-provider header is required") {
				t.Errorf("a request the gateway refuses: %v, %+v; want bad_request naming the gateway and its message", m.ByReason, m.Failures)
			}
			if g := by["guarded"]; g.ByReason["content_filter"] != g.Requests || len(g.Failures) == 0 || !strings.Contains(g.Failures[0].Message, "HTTP 446 from the Portkey gateway itself") {
				t.Errorf("a prompt the gateway's guardrail denies: %v, %+v; want content_filter, its 446 naming the gateway", g.ByReason, g.Failures)
			}
		})
	}
}

// The gateway's own retries (its retry config: on 429, up to five
// attempts) are its, not the probe's: the probe counts each request it
// sent once, however many times the gateway sent it on, while the model
// server, behind a counter, sees the retries.
func TestPortkeysRetriesAreNotTheProbes(t *testing.T) {
	gw := realserver.Portkey(t)
	s, err := sim.Start("127.0.0.1:0", sim.Config{Slots: 4, DecodeBase: time.Millisecond, Seed: 3, Faults: sim.Faults{Error429: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var seen atomic.Int64
	target, _ := url.Parse("http://" + s.Addr())
	proxy := httputil.NewSingleHostReverseProxy(target)
	counter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			seen.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(counter.Close)
	retry := fmt.Sprintf(`{"provider":"openai","custom_host":%q,"retry":{"attempts":5,"on_status_codes":[429]}}`, counter.URL+"/v1")
	cfg := fmt.Sprintf(`endpoints:
  - {name: gateway, base_url: %q, model: %q, timeout: 60s, headers: {x-portkey-config: %q}}
profiles:
  - name: retried
    endpoints: [gateway]
    load: {concurrency: 1, requests: 12}
    workload: {input_tokens: {mean: 16}, output_tokens: {mean: 8}, stream: false}
    failure: {abort: {error_ratio: 0}, max_error_ratio: 0, backoff: {base: 0s}, retry_after_max: 0s}
`, gw.URL+"/v1", s.Config().Model, retry)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, sums, recs, out := runConfig(ctx, t, cfg)
	r := sums[0]
	if r.Requests != 12 || len(recs) != 12 || r.Success+r.Errors != 12 {
		t.Fatalf("%d requests counted, %d records, %d success and %d errors: want the probe's 12, each once\n%s", r.Requests, len(recs), r.Success, r.Errors, out)
	}
	if n := seen.Load(); n <= 12 {
		t.Errorf("the model server saw %d requests for the probe's 12: the gateway retried none of half the answers being 429", n)
	} else {
		t.Logf("the probe sent 12 requests, the model server saw %d (the gateway's retries), %d succeeded", n, r.Success)
	}
}

// Streaming through a gateway that streams (one-api v0.6.10, nobody on
// this project wrote it) leaves a stream's timing as the server made it:
// the gaps between its chunks as the probe measures them within 2 ms of
// the same server's measured directly, every answer right, and the TTFT
// the gateway adds reported, not hidden. Portkey's gateway cannot stream
// on this Node.js (TestThroughPortkeysGateway).
func TestStreamingThroughAGateway(t *testing.T) {
	s, err := sim.Start("127.0.0.1:0", sim.Config{Slots: 8, DecodeBase: 20 * time.Millisecond, Jitter: 0.01, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	gw := realserver.OneAPI(t, "http://"+s.Addr(), s.Config().Model)
	t.Setenv("TOKENPROBE_TEST_ONE_API_KEY", "sk-"+realserver.OneAPIToken)
	cfg := fmt.Sprintf(`endpoints:
  - {name: direct, base_url: %q, model: %q}
  - {name: one-api, base_url: %q, model: %q, api_key_env: TOKENPROBE_TEST_ONE_API_KEY, timeout: 60s}
profiles:
  - name: streamed
    endpoints: [direct, one-api]
    load: {concurrency: 2, requests: 16}
    workload: {input_tokens: {mean: 16}, output_tokens: {mean: 16}}
`, s.URL(), s.Config().Model, gw.URL+"/v1", s.Config().Model)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	timingtest.Retry(t, 3, func(a *timingtest.Attempt) {
		_, sums, _, out := runConfig(ctx, t, cfg)
		by := map[string]stats.Summary{}
		for _, s := range sums {
			by[s.Endpoint] = s
		}
		direct, via := by["direct"], by["one-api"]
		if via.Success != 16 || via.WrongAnswers != 0 || via.InterChunk.Count == 0 {
			t.Fatalf("through one-api: %d of 16 right (%d wrong, %v):\n%s", via.Success, via.WrongAnswers, via.ByReason, out)
		}
		t.Logf("inter-chunk p50 %.2f ms direct, %.2f through one-api; TTFT p50 %.2f and %.2f ms",
			direct.InterChunk.P50, via.InterChunk.P50, direct.TTFT.P50, via.TTFT.P50)
		if d := math.Abs(via.InterChunk.P50 - direct.InterChunk.P50); d > 2 {
			a.Errorf("the gaps between chunks moved by %.2f ms through the gateway (p50 %.2f against %.2f): its relay changed the stream's timing", d, via.InterChunk.P50, direct.InterChunk.P50)
		}
	})
}
