package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/timingtest"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
)

// typedEvent is one event of a typed stream, as the script writes it.
func typedEvent(name, data string) step {
	return step{data: fmt.Sprintf("event: %s\ndata: %s\n\n", name, data), raw: true}
}

// The Messages and Responses APIs are timed as chat is: the first event
// that carries text (or thinking, or a tool call) is TTFT, every gap
// between them an ITL, the last one the end; events that carry nothing
// (message_start, ping, block stops, message_delta and message_stop;
// created, done events, completed) move none of them, and usage comes
// from the events that carry it.
func TestTypedAPIsTiming(t *testing.T) { bothClients(t, testTypedAPIsTiming) }

func testTypedAPIsTiming(t *testing.T, newClient func(Options) *Client) {
	delta := func(api openai.API, text string) step {
		if api == openai.Messages {
			return typedEvent("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%q}}`, text))
		}
		return typedEvent("response.output_text.delta", fmt.Sprintf(`{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":%q}`, text))
	}
	scripts := map[openai.API]func() []step{
		openai.Messages: func() []step {
			return []step{
				typedEvent("message_start", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":17,"output_tokens":1}}}`),
				typedEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
				typedEvent("ping", `{"type":"ping"}`),
				delta(openai.Messages, "Hello"), delta(openai.Messages, " big"), delta(openai.Messages, " wide"), delta(openai.Messages, " world"),
				typedEvent("content_block_stop", `{"type":"content_block_stop","index":0}`),
				typedEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":6}}`),
				typedEvent("message_stop", `{"type":"message_stop"}`),
			}
		},
		openai.Responses: func() []step {
			return []step{
				typedEvent("response.created", `{"type":"response.created","response":{"id":"r","status":"in_progress","model":"m","output":[]}}`),
				typedEvent("response.output_item.added", `{"type":"response.output_item.added","output_index":0,"item":{"type":"message","content":[]}}`),
				delta(openai.Responses, "Hello"), delta(openai.Responses, " big"), delta(openai.Responses, " wide"), delta(openai.Responses, " world"),
				typedEvent("response.output_text.done", `{"type":"response.output_text.done","output_index":0,"text":"Hello big wide world"}`),
				typedEvent("response.completed", `{"type":"response.completed","response":{"id":"r","status":"completed","model":"m","output":[{"type":"message","content":[{"type":"output_text","text":"Hello big wide world"}]}],"usage":{"input_tokens":17,"output_tokens":6,"total_tokens":23}}}`),
			}
		},
	}
	for api, steps := range scripts {
		c := newClient(Options{})
		timingtest.Retry(t, 3, func(a *timingtest.Attempt) {
			st := steps()
			// The first text 120 ms after the head, then 20, 90 and 20 ms
			// apart; the events after the last text 30 ms later.
			waits := map[int]time.Duration{0: 0}
			first := 3
			if api == openai.Responses {
				first = 2
			}
			for i, d := range []time.Duration{120, 20, 90, 20, 30} {
				waits[first+i] = d * time.Millisecond
			}
			for i := range st {
				st[i].after = waits[i]
			}
			s := &script{steps: st}
			srv := httptest.NewServer(s)
			defer srv.Close()
			ep := endpoint(srv.URL)
			ep.API = api
			var r result.Request
			r.Scheduled = time.Now()
			c.Do(context.Background(), ep, Prompt{Text: "hi", InputTokens: 20, MaxTokens: 10, Stream: true}, &r)
			if r.Outcome != result.Success || r.ContentChunks != 4 || len(r.Gaps) != 3 {
				t.Fatalf("%s: outcome %v %s, %d content chunks, gaps %v; want success, 4, 3 gaps", api, r.Outcome, r.Err, r.ContentChunks, r.Gaps)
			}
			if r.InputTokens != 17 || r.InputSource != result.SourceUsage || r.OutputTokens != 6 || r.OutputSource != result.SourceUsage || r.FinishReason != "stop" {
				t.Errorf("%s: ISL %d from %v, OSL %d from %v, finish %q; want 17 and 6 from usage, stop", api, r.InputTokens, r.InputSource, r.OutputTokens, r.OutputSource, r.FinishReason)
			}
			sent := s.sent
			const tol = 5 * time.Millisecond
			within(a, string(api)+" TTFT", r.TTFT, sent[first].Sub(r.Start), tol)
			within(a, string(api)+" E2E", r.E2E, sent[first+3].Sub(r.Start), tol)
			for i, g := range r.Gaps {
				within(a, fmt.Sprintf("%s gap %d", api, i), g, sent[first+i+1].Sub(sent[first+i]), tol)
			}
		})
	}
}

// Each API's request: its path, its body's shape, and the Messages API's
// key as x-api-key with an anthropic-version, never a bearer token.
func TestTypedAPIsRequestShape(t *testing.T) { bothClients(t, testTypedAPIsRequestShape) }

func testTypedAPIsRequestShape(t *testing.T, newClient func(Options) *Client) {
	var got *http.Request
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body, got = string(b), r
		http.Error(w, "recorded", http.StatusTeapot)
	}))
	defer srv.Close()
	for _, c := range []struct {
		api     openai.API
		path    string
		want    []string
		headers map[string]string
	}{
		{openai.Messages, "/v1/messages", []string{`"messages":[{"role":"user","content":"hello"}]`, `"max_tokens":7`, `"stream":true`},
			map[string]string{"X-Api-Key": "sk-test", "Anthropic-Version": "2023-06-01", "Authorization": ""}},
		{openai.Responses, "/v1/responses", []string{`"input":"hello"`, `"max_output_tokens":7`, `"stream":true`},
			map[string]string{"Authorization": "Bearer sk-test", "X-Api-Key": ""}},
	} {
		ep := endpoint(srv.URL)
		ep.API, ep.APIKey = c.api, "sk-test"
		var r result.Request
		newClient(Options{}).Do(context.Background(), ep, Prompt{Text: "hello", MaxTokens: 7, Stream: true}, &r)
		if got == nil || got.URL.Path != c.path {
			t.Fatalf("%s: request %v", c.api, got)
		}
		for _, w := range c.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: body %s lacks %s", c.api, body, w)
			}
		}
		if strings.Contains(body, "stream_options") {
			t.Errorf("%s: body %s asks for stream_options, which the API does not take", c.api, body)
		}
		for k, v := range c.headers {
			if g := got.Header.Get(k); g != v {
				t.Errorf("%s: header %s %q, want %q", c.api, k, g, v)
			}
		}
		if r.Outcome != result.Error || r.Reason != result.ReasonBadRequest {
			t.Errorf("%s: %v %v", c.api, r.Outcome, r.Reason)
		}
	}
}

// Absurd token counts from a server (an exponent, an overflow, far past
// max_tokens) are not believed: the chunks are counted, and the anomaly
// is noted, so no counter ever takes the absurd value.
func TestAbsurdUsageIsNotBelieved(t *testing.T) { bothClients(t, testAbsurdUsage) }

func testAbsurdUsage(t *testing.T, newClient func(Options) *Client) {
	for _, completion := range []string{"1e30", "9223372036854775807", "99999999999999999999999", "12.5", "5000", "3.0"} {
		srv := httptest.NewServer(&script{steps: []step{
			{0, chunk("a"), false}, {0, chunk("b"), false}, {0, chunk("c"), false}, {0, finish, false},
			{0, `{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":` + completion + `}}`, false}, {0, "[DONE]", false},
		}})
		var r result.Request
		newClient(Options{}).Do(context.Background(), endpoint(srv.URL), Prompt{Text: "x", MaxTokens: 10, Stream: true}, &r)
		srv.Close()
		believed := completion == "3.0"
		switch {
		case r.Outcome != result.Success:
			t.Fatalf("%s: %v %s", completion, r.Outcome, r.Err)
		case believed && (r.OutputTokens != 3 || r.OutputSource != result.SourceUsage || r.Anomaly != result.AnomalyNone):
			t.Errorf("%s: OSL %d from %v, anomaly %v; want 3 from usage", completion, r.OutputTokens, r.OutputSource, r.Anomaly)
		case !believed && (r.OutputTokens != 3 || r.OutputSource != result.SourceChunks || r.Anomaly != result.AnomalyUsage || r.InputSource == result.SourceUsage):
			t.Errorf("%s: OSL %d from %v, ISL from %v, anomaly %v; want 3 from chunks, the usage not believed", completion, r.OutputTokens, r.OutputSource, r.InputSource, r.Anomaly)
		}
	}
}

// A server that streams far more content chunks than max_tokens allows
// is cut off, the stream ended as an error that says so: the gaps a
// request keeps are bounded whatever the server sends.
func TestEndlessStreamIsEnded(t *testing.T) { bothClients(t, testEndlessStream) }

func testEndlessStream(t *testing.T, newClient func(Options) *Client) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for range 10_000 {
			if _, err := fmt.Fprintf(w, "data: %s\n\n", chunk("x")); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	var r result.Request
	newClient(Options{}).Do(context.Background(), endpoint(srv.URL), Prompt{Text: "x", MaxTokens: 10, Stream: true}, &r)
	if r.Outcome != result.Error || r.Reason != result.ReasonStream || !strings.Contains(r.Err, "more than 104 content chunks for max_tokens 10") || len(r.Gaps) > 104 {
		t.Fatalf("%v %v %q, %d gaps kept", r.Outcome, r.Reason, r.Err, len(r.Gaps))
	}
	// What was read before the end is kept, as for any broken stream.
	if r.ContentChunks != 105 || len(r.Gaps) != 104 || r.E2E <= 0 {
		t.Fatalf("%d content chunks, %d gaps, E2E %v kept; want 105, 104 and the time to the last", r.ContentChunks, len(r.Gaps), r.E2E)
	}
}

// A stream that breaks off after three content chunks is an error that
// keeps what was measured before the break, whichever way it broke: the
// chunks counted, their gaps and the time to the last.
func TestBrokenStreamKeepsWhatItMeasured(t *testing.T) {
	bothClients(t, testBrokenStreamKeepsWhatItMeasured)
}

func testBrokenStreamKeepsWhatItMeasured(t *testing.T, newClient func(Options) *Client) {
	three := []step{{0, chunk("a"), false}, {0, chunk("b"), false}, {0, chunk("c"), false}}
	for _, tc := range []struct {
		name string
		brk  step
	}{
		{"cut before [DONE]", step{0, "", true}},
		{"malformed chunk", step{0, `{"choices":[{"delta":`, false}},
		{"error event", step{0, "event: error\ndata: {\"error\":\"boom\"}\n\n", true}},
		{"error payload", step{0, `{"object":"error","message":"too long"}`, false}},
		{"line too long", step{0, "data: " + strings.Repeat("x", 2<<20) + "\n\n", true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(&script{steps: append(three[:3:3], tc.brk)})
			defer srv.Close()
			var r result.Request
			newClient(Options{}).Do(context.Background(), endpoint(srv.URL), Prompt{Text: "x", Stream: true}, &r)
			if r.Outcome != result.Error {
				t.Fatalf("outcome %v, want an error", r.Outcome)
			}
			if r.ContentChunks != 3 || len(r.Gaps) != 2 || !r.HasTTFO || r.E2E <= 0 {
				t.Fatalf("%d content chunks, gaps %v, TTFO kept %v, E2E %v; want 3, 2 gaps, a TTFO and the time to the last", r.ContentChunks, r.Gaps, r.HasTTFO, r.E2E)
			}
		})
	}
}

// A Messages stream that says its stop_reason (message_delta) and then
// neither sends message_stop nor ends: the answer is whole, so the request
// is a success, its end the last text, and the open stream an anomaly; it
// used to hold its load slot until the request's timeout, a timeout.
func TestMessagesEndAtStopReason(t *testing.T) { bothClients(t, testMessagesEndAtStopReason) }

func testMessagesEndAtStopReason(t *testing.T, newClient func(Options) *Client) {
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, st := range []step{
			typedEvent("message_start", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}`),
			typedEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`),
			typedEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" world"}}`),
			typedEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}`),
		} {
			_, _ = io.WriteString(w, st.data)
		}
		w.(http.Flusher).Flush()
		select { // no message_stop, no end
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	ep := endpoint(srv.URL)
	ep.API = openai.Messages
	ep.Timeout = time.Minute // far past the drain's bound: a hang shows as a timeout
	var r result.Request
	r.Scheduled = time.Now()
	newClient(Options{}).Do(context.Background(), ep, Prompt{Text: "hi", InputTokens: 5, MaxTokens: 10, Stream: true}, &r)
	if r.Outcome != result.Success || r.OutputTokens != 2 || r.FinishReason != "stop" || r.Anomaly != result.AnomalyDrain {
		t.Fatalf("outcome %v %v %q, %d output tokens, finish %q, anomaly %v; want a success of 2 tokens, stop, the open stream an anomaly",
			r.Outcome, r.Reason, r.Err, r.OutputTokens, r.FinishReason, r.Anomaly)
	}
}
