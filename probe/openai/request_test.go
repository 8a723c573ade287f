package openai

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// The hand-written encoder must mean what encoding/json would have
// written: decoded, the two bodies are equal.
func TestBodyMatchesEncodingJSON(t *testing.T) {
	texts := []string{"", "plain words", `quote " and \ backslash`, "tab\tnew\nline\rcarriage", "\x00\x01\x1f control",
		"héllo wörld ✓ 🚀", "<html> & </html>", "line\u2028sep\u2029para", "bad \xff utf8 \xc3", "\x7f del"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		texts = append(texts, string(b))
	}
	for _, text := range texts {
		for _, api := range []API{Chat, Completions} {
			rb := RequestBody{API: api, Model: "m\"odel", Prompt: text, MaxTokens: 7, Stream: true, IncludeUsage: true,
				History: []Message{{Role: "user", Content: text}, {Role: "assistant", Content: "ok"}},
				Extra:   map[string]any{"temperature": 0.5, "ignore_eos": true, "stream": false, "z": []int{1}, "a": map[string]string{"k": text}}}
			got, err := Body(rb)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]any{"model": rb.Model, "max_tokens": 7, "stream": true, "stream_options": map[string]bool{"include_usage": true},
				"temperature": 0.5, "ignore_eos": true, "z": []int{1}, "a": map[string]string{"k": text}}
			if api == Chat {
				want["messages"] = append(append([]Message{}, rb.History...), Message{Role: "user", Content: text})
			} else {
				want["prompt"] = text + "\n\n" + "ok" + "\n\n" + text
			}
			wantJSON, _ := json.Marshal(want)
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("%q: invalid JSON %s: %v", text, got, err)
			}
			_ = json.Unmarshal(wantJSON, &w)
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("%s %q:\n got %s\nwant %s", api, text, got, wantJSON)
			}
		}
	}
}

// A prompt given in parts is the parts joined by spaces, escapes and all.
func TestBodyParts(t *testing.T) {
	parts := []string{"first block", `a "quoted" \ one`, "", "\x01 last \xff"}
	for _, api := range []API{Chat, Completions} {
		hist := []Message{{Role: "user", Content: "h"}}
		got, err := Body(RequestBody{API: api, Model: "m", Parts: parts, History: hist})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := Body(RequestBody{API: api, Model: "m", Prompt: strings.Join(parts, " "), History: hist})
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", api, got, want)
		}
	}
}

func TestBodyRejectsUnknownAPIAndBadExtras(t *testing.T) {
	if _, err := Body(RequestBody{API: "rerank"}); err == nil {
		t.Error("an unknown API must fail")
	}
	if _, err := Body(RequestBody{API: Chat, Extra: map[string]any{"f": func() {}}}); err == nil {
		t.Error("an extra field JSON cannot encode must fail")
	}
}

func BenchmarkBody(b *testing.B) {
	rb := RequestBody{API: Chat, Model: "meta-llama/Llama-3.1-8B-Instruct", Prompt: string(make([]byte, 0)) + "the quick brown fox jumps over the lazy dog again and again", MaxTokens: 128, Stream: true, IncludeUsage: true}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Body(rb); err != nil {
			b.Fatal(err)
		}
	}
}

// Each API's body holds its own fields, and the body's own fields win
// over extra ones.
func TestBodiesOfEveryAPI(t *testing.T) {
	extra := map[string]any{"temperature": 0, "input": "not this", "max_output_tokens": 1}
	for api, want := range map[API]string{
		Chat:       `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true,"temperature":0}`,
		Responses:  `{"model":"m","input":"hi","max_output_tokens":5,"stream":true,"temperature":0}`,
		Messages:   `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true,"temperature":0}`,
		Embeddings: `{"model":"m","input":["hi","b","c"],"encoding_format":"float","max_output_tokens":1,"temperature":0}`,
	} {
		got, err := Body(RequestBody{API: api, Model: "m", Prompt: "hi", Inputs: []string{"b", "c"}, MaxTokens: 5, Stream: true, Extra: extra})
		if err != nil || string(got) != want {
			t.Errorf("%s: %s %v\nwant %s", api, got, err, want)
		}
	}
	// A Messages request always carries max_tokens; a Responses
	// conversation goes as input messages.
	got, _ := Body(RequestBody{API: Messages, Model: "m", Prompt: "x"})
	if !strings.Contains(string(got), `"max_tokens":4096`) {
		t.Errorf("messages without max_tokens: %s", got)
	}
	got, _ = Body(RequestBody{API: Responses, Model: "m", Prompt: "x", History: []Message{{"user", "a"}, {"assistant", "b"}}})
	if !strings.Contains(string(got), `"input":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"x"}]`) {
		t.Errorf("a responses conversation: %s", got)
	}
}

// Chat's response_format (what the JSON checks send) goes in each API's
// own shape: the Responses API's text.format, vLLM's output_config for
// the Messages API.
func TestResponseFormatInEveryAPI(t *testing.T) {
	extra := map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "n", "schema": map[string]any{"type": "object"}}}}
	for api, want := range map[API]string{
		Chat:      `"response_format":{"json_schema":{"name":"n","schema":{"type":"object"}},"type":"json_schema"}`,
		Responses: `"text":{"format":{"name":"n","schema":{"type":"object"},"type":"json_schema"}}`,
		Messages:  `"output_config":{"format":{"json_schema":{"type":"object"},"type":"json_schema"}}`,
	} {
		got, err := Body(RequestBody{API: api, Model: "m", Prompt: "x", Extra: extra})
		if err != nil || !strings.Contains(string(got), want) || api != Chat && strings.Contains(string(got), "response_format") {
			t.Errorf("%s: %s %v, want %s", api, got, err, want)
		}
	}
}
