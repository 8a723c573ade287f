package client

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
)

// hooksFailed answers as Portkey's gateway 1.15.2 does when its
// guardrails fail without denying (its build/start-server.js: the
// upstream's 200 answer, status 246 "Hooks failed"; a whole answer gains
// hook_results). Node 20 fails that path in the gateway itself
// (TypeError: immutable, docs/REAL-SERVERS.md), so the shape is read from
// its source rather than captured.
func hooksFailed(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Stream") == "1" {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(246)
		fmt.Fprint(w, "data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n")
		fmt.Fprint(w, "data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(246)
	fmt.Fprint(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4},`+
		`"hook_results":{"before_request_hooks":[{"verdict":false,"id":"wc","checks":[{"id":"default.wordCount","verdict":false}]}],"after_request_hooks":[]}}`)
}

// A gateway's 246 (its hooks failed, the model's answer whole) is an
// answer measured as any other, and the anomaly status says the gateway
// did not answer 200; a 200 is no anomaly.
func TestAnAnswerWithAnother2xxIsAnAnomaly(t *testing.T) {
	bothClients(t, func(t *testing.T, newClient func(Options) *Client) {
		c := newClient(Options{})
		srv := httptest.NewServer(http.HandlerFunc(hooksFailed))
		defer srv.Close()
		for _, stream := range []bool{false, true} {
			ep := &Endpoint{Name: "gw", BaseURL: srv.URL + "/v1", API: openai.Chat, Model: "m", Timeout: time.Minute}
			if stream {
				ep.Headers = http.Header{"X-Stream": {"1"}}
			}
			var r result.Request
			c.Do(context.Background(), ep, Prompt{Text: "hello there", MaxTokens: 4, Stream: stream}, &r)
			if r.Outcome != result.Success || r.HTTPStatus != 246 || r.Anomaly != result.AnomalyStatus || r.OutputTokens != 1 {
				t.Fatalf("stream %v: outcome %v (%q), status %d, anomaly %q, %d output tokens: want the answer, anomaly status", stream, r.Outcome, r.Err, r.HTTPStatus, r.Anomaly, r.OutputTokens)
			}
		}
	})
}
