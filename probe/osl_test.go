package probe

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/workload"
)

// A server that sends three tokens in a chunk: "a b c", then 70 ms later
// "d e f", with or without usage. From the chunks the answer is 2 tokens
// and its ITL 70 ms; counted by a tokenizer (one token a word here) or
// from usage, 6 tokens and 14 ms, as AIPerf measures it.
func TestOSLModes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{"content":"a b c"}}]}`+"\n\n")
		fl.Flush()
		time.Sleep(70 * time.Millisecond)
		fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{"content":" d e f"},"finish_reason":"length"}]}`+"\n\n")
		if r.URL.Path == "/usage/v1/chat/completions" {
			fmt.Fprint(w, `data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":6}}`+"\n\n")
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	words := func(s string) (int, error) { return len(strings.Fields(s)), nil }
	for _, c := range []struct {
		name   string
		usage  bool
		osl    OSL
		count  func(string) (int, error)
		tokens int
		source result.TokenSource
	}{
		{"auto, no usage, no tokenizer: the chunks", false, OSLAuto, nil, 2, result.SourceChunks},
		{"auto, no usage, a tokenizer", false, OSLAuto, words, 6, result.SourceTokenizer},
		{"auto, usage", true, OSLAuto, words, 6, result.SourceUsage},
		{"usage, none sent", false, OSLUsage, words, 2, result.SourceChunks},
		{"chunks, usage sent", true, OSLChunks, nil, 2, result.SourceChunks},
		{"tokenizer, usage sent", true, OSLTokenizer, words, 6, result.SourceTokenizer},
	} {
		base := srv.URL + "/v1"
		if c.usage {
			base = srv.URL + "/usage/v1"
		}
		var got *result.Request
		run := &Run{Profile: "p", Plan: Plan{Stages: []Stage{{Concurrency: 1, Requests: 1}}},
			Workload: workload.NewSynthetic(workload.Lengths{Mean: 3}, workload.Lengths{Mean: 6}, true, 1),
			Endpoint: &client.Endpoint{Name: "e", BaseURL: base, API: openai.Chat, Model: "m", Timeout: 5 * time.Second, IncludeUsage: true},
			Client:   client.New(client.Options{}), OSL: c.osl, CountTokens: c.count,
			Sinks: []Sink{sinkFunc(func(r *result.Request) { got = r })}}
		if _, err := run.Execute(context.Background()); err != nil || got == nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		// The ITL is the time between the chunks as the client saw it
		// (the server's 70 ms, less a late first chunk on a busy
		// machine), over the tokens after the first.
		itl, _ := got.ITL()
		var gap time.Duration
		if len(got.Gaps) == 1 {
			gap = got.Gaps[0]
		}
		want := gap / time.Duration(c.tokens-1)
		if got.OutputTokens != c.tokens || got.OutputSource != c.source || gap == 0 || itl < want || itl > want+want/2 || got.Answer != nil {
			t.Errorf("%s: OSL %d from %v, ITL %v, answer kept %d bytes; want %d from %v, ITL %v (the chunks' gap %v over %d)", c.name, got.OutputTokens, got.OutputSource, itl, len(got.Answer), c.tokens, c.source, want, gap, c.tokens-1)
		}
	}
}

// sinkFunc is a Sink of one function.
type sinkFunc func(*result.Request)

func (f sinkFunc) Observe(r *result.Request, _ slo.Verdict) { f(r) }
