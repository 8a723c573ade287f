package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/timingtest"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
)

// kserveObject is a generate_stream response as Triton's vLLM backend
// writes it, with its optional count of the response's tokens.
func kserveObject(text string, tokens int) string {
	return fmt.Sprintf(`{"model_name":"m","model_version":"1","text_output":%q,"num_output_tokens":%d}`, text, tokens)
}

// KServe's generate stream is timed by AIPerf's rules: TTFT at the first
// response with text (an empty first one is not a token), gaps between
// responses with text, the end at the last; it has no end marker, so the
// body's end ends it. Its requests go to /v2/models/{model}/generate_stream
// at the server's root, text_input and parameters in the body.
func TestKServeGenerateTiming(t *testing.T) { bothClients(t, testKServeGenerateTiming) }

func testKServeGenerateTiming(t *testing.T, newClient func(Options) *Client) {
	c := newClient(Options{})
	timingtest.Retry(t, 3, func(a *timingtest.Attempt) {
		s := &script{steps: []step{
			{0, kserveObject("", 0), false},
			{100 * time.Millisecond, kserveObject("Hello", 1), false},
			{20 * time.Millisecond, kserveObject(" big", 1), false},
			{60 * time.Millisecond, kserveObject(" wide", 2), false},
			{20 * time.Millisecond, kserveObject(" world", 1), false},
		}}
		var path string
		var body map[string]any
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			path = r.URL.Path
			b, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(b, &body)
			s.ServeHTTP(w, r)
		}))
		defer srv.Close()
		ep := &Endpoint{Name: "t", BaseURL: srv.URL + "/v1", API: openai.KServeGenerate, Model: "m", Timeout: 5 * time.Second}
		var r result.Request
		r.Scheduled = time.Now()
		c.Do(context.Background(), ep, Prompt{Text: "hi", InputTokens: 20, MaxTokens: 10, Stream: true}, &r)
		if r.Outcome != result.Success {
			t.Fatalf("outcome %v/%v: %s", r.Outcome, r.Reason, r.Err)
		}
		params, _ := body["parameters"].(map[string]any)
		if path != "/v2/models/m/generate_stream" || body["text_input"] != "hi" || params["max_tokens"] != 10.0 || params["stream"] != true {
			t.Fatalf("request to %s with %v", path, body)
		}
		if r.ContentChunks != 4 || len(r.Gaps) != 3 || r.OutputTokens != 5 || r.OutputSource != result.SourceUsage || r.ServedModel != "m" {
			t.Fatalf("chunks %d, gaps %v, OSL %d from %v, model %q; want 4 chunks, 3 gaps, 5 tokens counted by the server, m",
				r.ContentChunks, r.Gaps, r.OutputTokens, r.OutputSource, r.ServedModel)
		}
		sent := s.sent
		const tol = 5 * time.Millisecond
		within(a, "TTFT", r.TTFT, sent[1].Sub(r.Start), tol)
		within(a, "E2E", r.E2E, sent[4].Sub(r.Start), tol)
		for i, g := range r.Gaps {
			within(a, fmt.Sprintf("gap %d", i), g, sent[i+2].Sub(sent[i+1]), tol)
		}
	})
}

// An error object in a generate stream, sent under the 200 already
// written (the generate extension's own warning), fails the request, as
// does a stream cut before its chunked body ended (the stream's only end
// is the body's); a whole answer is read from /generate.
func TestKServeGenerateErrorsAndWhole(t *testing.T) { bothClients(t, testKServeGenerateErrorsAndWhole) }

func testKServeGenerateErrorsAndWhole(t *testing.T, newClient func(Options) *Client) {
	c := newClient(Options{})
	srv := httptest.NewServer(&script{steps: []step{
		{0, kserveObject("Hello", 1), false},
		{0, `{"error":"Executor failed to process the request"}`, false},
		{0, kserveObject(" more", 1), false},
	}})
	defer srv.Close()
	ep := &Endpoint{Name: "t", BaseURL: srv.URL, API: openai.KServeGenerate, Model: "m", Timeout: 5 * time.Second}
	var r result.Request
	c.Do(context.Background(), ep, Prompt{Text: "hi", MaxTokens: 10, Stream: true}, &r)
	if r.Outcome != result.Error {
		t.Fatalf("a stream with an error object: outcome %v %s", r.Outcome, r.Err)
	}

	// A connection cut mid-stream is no end: the chunked body did not end.
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", kserveObject("Hello", 1))
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	defer cut.Close()
	ep.BaseURL = cut.URL
	r = result.Request{}
	c.Do(context.Background(), ep, Prompt{Text: "hi", MaxTokens: 10, Stream: true}, &r)
	if r.Outcome != result.Error || r.Reason != result.ReasonStream {
		t.Fatalf("a stream cut mid-way: outcome %v/%v %s, want a stream error", r.Outcome, r.Reason, r.Err)
	}

	var path string
	whole := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		path = req.URL.Path
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"model_name":"m","model_version":"1","text_output":"Paris is the capital."}`)
	}))
	defer whole.Close()
	ep.BaseURL = whole.URL
	r = result.Request{}
	c.Do(context.Background(), ep, Prompt{Text: "hi", MaxTokens: 10, KeepText: true}, &r)
	if r.Outcome != result.Success || path != "/v2/models/m/generate" || openai.AnswerText(openai.KServeGenerate, r.Answer) != "Paris is the capital." {
		t.Fatalf("whole: outcome %v %s at %s, answer %q", r.Outcome, r.Err, path, openai.AnswerText(openai.KServeGenerate, r.Answer))
	}
}

// A generate stream that sends its finish reason and then stays open
// ends at the finish reason, as a Messages stream ends at its stop
// reason: it ended as a timeout, its answer lost. And counts that are no
// counts (fractions) are never added up as counts: 1.5 four times and
// 40 made 36 tokens, taken as the server's.
func TestKServeGenerateEndsAtItsFinishReason(t *testing.T) {
	bothClients(t, testKServeGenerateEndsAtItsFinishReason)
}

func testKServeGenerateEndsAtItsFinishReason(t *testing.T, newClient func(Options) *Client) {
	c := newClient(Options{})
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, o := range []string{
			`{"model_name":"m","text_output":"Hello","num_output_tokens":1.5}`,
			`{"model_name":"m","text_output":" big","num_output_tokens":1.5}`,
			`{"model_name":"m","text_output":" wide","num_output_tokens":1.5}`,
			`{"model_name":"m","text_output":" world","num_output_tokens":1.5}`,
			`{"model_name":"m","text_output":"!","num_output_tokens":40,"finish_reason":"stop"}`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", o)
		}
		w.(http.Flusher).Flush()
		select { // and never ends the body
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	ep := &Endpoint{Name: "t", BaseURL: srv.URL, API: openai.KServeGenerate, Model: "m", Timeout: time.Minute}
	var r result.Request
	done := make(chan struct{})
	go func() {
		c.Do(context.Background(), ep, Prompt{Text: "hi", MaxTokens: 10, Stream: true}, &r)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the request still waits on a stream that finished and stayed open")
	}
	if r.Outcome != result.Success || r.FinishReason != "stop" || r.ContentChunks != 5 {
		t.Fatalf("outcome %v/%v %q, finish %q, %d chunks: want the answer, ended at its finish reason", r.Outcome, r.Reason, r.Err, r.FinishReason, r.ContentChunks)
	}
	if r.OutputSource == result.SourceUsage || r.OutputTokens == 36 {
		t.Errorf("%d output tokens from %v: fractions were added up as the server's count", r.OutputTokens, r.OutputSource)
	}
}
