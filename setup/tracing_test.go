package setup

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/tokenprobe/tokenprobe/config"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/result"
)

// A configured tracestate goes beside every traceparent, through both
// HTTP clients, with the endpoint's own headers kept; without one no
// tracestate is sent.
func TestTraceStateIsSentWithEveryRequest(t *testing.T) {
	var mu sync.Mutex
	var states, custom []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		states, custom = append(states, r.Header.Get("Tracestate")), append(custom, r.Header.Get("X-Team-Route"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	for _, httpClient := range []string{"tokenprobe", "net/http"} {
		for _, state := range []string{"tp=eu-west,congo=t61", ""} {
			tracing := ""
			if state != "" {
				tracing = fmt.Sprintf("tracing: {tracestate: %q}\n", state)
			}
			yml := fmt.Sprintf("endpoints:\n  - {name: gw, base_url: '%s/v1', model: m, http_client: %s, headers: {X-Team-Route: blue}}\nprofiles:\n  - name: p\n%s",
				srv.URL, httpClient, tracing)
			cfg, err := config.Parse("tokenprobe.yaml", []byte(yml))
			if err != nil {
				t.Fatal(err)
			}
			tg, err := OpenEndpoint(cfg.Endpoints[0], nil, TraceContext(cfg))
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				var r result.Request
				tg.Client.Do(context.Background(), tg.Endpoint, client.Prompt{Text: "x", Stream: true}, &r)
				if r.Outcome != result.Success {
					t.Fatalf("%s: %v/%v %s", httpClient, r.Outcome, r.Reason, r.Err)
				}
			}
			_ = tg.Close()
			mu.Lock()
			got, route := states[len(states)-2:], custom[len(custom)-2:]
			mu.Unlock()
			if got[0] != state || got[1] != state || route[0] != "blue" || route[1] != "blue" {
				t.Errorf("%s, tracestate %q: the server saw tracestate %q and X-Team-Route %q", httpClient, state, got, route)
			}
		}
	}
}
