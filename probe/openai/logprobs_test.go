package openai

import (
	"slices"
	"strings"
	"testing"
)

// kept joins chunks as client.Prompt.KeepText keeps them: each followed
// by a 0 byte.
func kept(chunks ...string) []byte {
	return []byte(strings.Join(chunks, "\x00") + "\x00")
}

// An answer's log-probabilities are read in both shapes servers send:
// chat's logprobs.content, which llama-server sends for completions too
// (captured from llama-server de3ff81 serving the tiny llama, asked with
// the chat and completions Logprobs fields, streamed and whole), and the
// legacy completions' token_logprobs (vLLM's, from its
// CompletionLogProbs). A null or missing value adds nothing.
func TestAnswerLogprobs(t *testing.T) {
	for _, c := range []struct {
		name   string
		api    API
		chunks []byte
		want   []float64
	}{
		{"llama-server chat, streamed", Chat, kept(
			`{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"object":"chat.completion.chunk"}`,
			`{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" guns"},"logprobs":{"content":[{"id":18788,"token":" guns","bytes":[32,103,117,110,115],"logprob":-9.735520362854004,"top_logprobs":[{"id":18788,"token":" guns","bytes":[32,103,117,110,115],"logprob":-9.735520362854004}]}]}}],"object":"chat.completion.chunk"}`,
			`{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"daten"},"logprobs":{"content":[{"id":1,"token":"daten","bytes":[],"logprob":-9.735275,"top_logprobs":[]}]}}],"object":"chat.completion.chunk"}`,
			`{"choices":[{"finish_reason":"length","index":0,"delta":{}}],"object":"chat.completion.chunk"}`),
			[]float64{-9.735520362854004, -9.735275}},
		{"llama-server chat, whole", Chat, kept(
			`{"choices":[{"finish_reason":"length","index":0,"message":{"role":"assistant","content":" gunsdaten"},"logprobs":{"content":[{"id":18788,"token":" guns","logprob":-9.76,"top_logprobs":[]},{"id":1,"token":"daten","logprob":-9.73,"top_logprobs":[]}]}}]}`),
			[]float64{-9.76, -9.73}},
		{"llama-server completions, whole", Completions, kept(
			`{"choices":[{"text":"Service восто top","index":0,"logprobs":{"content":[{"id":3170,"token":"Service","bytes":[83,101,114,118,105,99,101],"logprob":-9.711152076721191,"top_logprobs":[{"id":3170,"token":"Service","bytes":[83,101,114,118,105,99,101],"logprob":-9.711152076721191}]},{"id":26170,"token":" восто","logprob":-9.710775375366211,"top_logprobs":[]},{"id":2246,"token":" top","logprob":-9.716084480285645,"top_logprobs":[]}]},"finish_reason":"length"}],"object":"text_completion"}`),
			[]float64{-9.711152076721191, -9.710775375366211, -9.716084480285645}},
		{"vLLM completions, streamed", Completions, kept(
			`{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":" Paris","logprobs":{"text_offset":[0],"token_logprobs":[-0.0123],"tokens":[" Paris"],"top_logprobs":[{" Paris":-0.0123}]},"finish_reason":null}]}`,
			`{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":".","logprobs":{"text_offset":[6],"token_logprobs":[null],"tokens":["."],"top_logprobs":[null]},"finish_reason":null}]}`,
			`{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"length"}]}`),
			[]float64{-0.0123}},
		{"none asked", Chat, kept(`{"choices":[{"index":0,"delta":{"content":"hi"}}]}`), nil},
	} {
		got := ParseAnswer(c.api, c.chunks)
		if !slices.Equal(got.Logprobs, c.want) {
			t.Errorf("%s: log-probabilities %v, want %v", c.name, got.Logprobs, c.want)
		}
	}
}

// An answer keeps at most MaxAnswerLogprobs, however many chunks send.
func TestAnswerLogprobsAreBounded(t *testing.T) {
	chunk := `{"choices":[{"index":0,"delta":{"content":"x"},"logprobs":{"content":[` + strings.Repeat(`{"logprob":-1},`, 99) + `{"logprob":-1}]}}]}`
	var chunks []string
	for range MaxAnswerLogprobs/100 + 5 {
		chunks = append(chunks, chunk)
	}
	if got := len(ParseAnswer(Chat, kept(chunks...)).Logprobs); got != MaxAnswerLogprobs {
		t.Fatalf("%d log-probabilities kept, want %d", got, MaxAnswerLogprobs)
	}
}

// The APIs that offer log-probabilities ask for the chosen token's alone
// (no alternatives: llama-server otherwise sends 20 with every token).
func TestLogprobsFieldsAskForTheChosenTokenAlone(t *testing.T) {
	if got := Of(Chat).Logprobs; got["logprobs"] != true || got["top_logprobs"] != 1 {
		t.Errorf("chat asks %v", got)
	}
	if got := Of(Completions).Logprobs; got["logprobs"] != 1 {
		t.Errorf("completions asks %v", got)
	}
	for _, api := range []API{Messages, Responses, Embeddings} {
		if got := Of(api).Logprobs; got != nil {
			t.Errorf("%s asks %v", api, got)
		}
	}
}
