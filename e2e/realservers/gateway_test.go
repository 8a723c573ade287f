package realservers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/realserver"
	"github.com/tokenprobe/tokenprobe/internal/sim"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Portkey's gateway (@portkey-ai/gateway 1.15.2, from npm) between the
// probe and two model servers, tokenprobe's simulator and llama.cpp's
// llama-server: whole answers come through it, right and counted once;
// its own failures are told from the server's, each classified and the
// gateway named. A streamed answer through it fails in the gateway itself
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
			cfg := "endpoints:\n" + endpoint("gateway", true) + endpoint("gateway-misconfigured", false) + `profiles:
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
`
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			_, sums, _, out := runConfig(ctx, t, cfg)
			by := map[string]stats.Summary{}
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
		})
	}
}
