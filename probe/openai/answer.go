package openai

import (
	"bytes"
	"strings"
)

// Answer is an answer read back from its chunks (client.Prompt.KeepText)
// after the request: its output text, its reasoning apart, and its tool
// calls with their streamed arguments joined.
type Answer struct {
	Text, Reasoning string
	ToolCalls       []ToolCall
	// Logprobs are the generated tokens' log-probabilities, in order,
	// where the server sent them (at most MaxAnswerLogprobs).
	Logprobs []float64
}

// MaxAnswerLogprobs bounds the log-probabilities an answer keeps.
const MaxAnswerLogprobs = 4096

// ToolCall is one function call of an answer.
type ToolCall struct {
	Name, Arguments string
}

// ParseAnswer reads an answer of api kept as its chunks' JSON, each
// followed by a 0 byte, by its protocol's Answer: its chunks or events,
// or its whole response. Chunks that do not parse add nothing. It
// allocates, and is read after the request, never while it is measured.
func ParseAnswer(api API, chunks []byte) Answer {
	var a answerBuilder
	read := Of(api).Answer
	for raw := range bytes.SplitSeq(chunks, []byte{0}) {
		if len(raw) > 0 && read != nil {
			read(raw, &a)
		}
	}
	return Answer{Text: a.text.String(), Reasoning: a.reasoning.String(), ToolCalls: a.calls, Logprobs: a.logprobs}
}

type answerBuilder struct {
	text, reasoning strings.Builder
	calls           []ToolCall
	logprobs        []float64
	// slots maps an event's block or output index to its call.
	slots map[int]int
}

// call is the call at an event's index, a new one when fresh.
func (a *answerBuilder) call(index *int, fresh bool) *ToolCall {
	if a.slots == nil {
		a.slots = map[int]int{}
	}
	i := -1
	if index != nil {
		if at, ok := a.slots[*index]; ok && !fresh {
			i = at
		}
	}
	if i < 0 {
		a.calls = append(a.calls, ToolCall{})
		i = len(a.calls) - 1
		if index != nil {
			a.slots[*index] = i
		}
	}
	return &a.calls[i]
}

// logprob adds a token's log-probability, up to MaxAnswerLogprobs (JSON
// has no NaN nor infinity: every one decoded is finite).
func (a *answerBuilder) logprob(v *float64) {
	if v != nil && len(a.logprobs) < MaxAnswerLogprobs {
		a.logprobs = append(a.logprobs, *v)
	}
}

// AnswerText is all that an answer kept as its chunks generated: its
// reasoning, its text and its tool calls' arguments, what a tokenizer
// counts as the answer (as AIPerf counts it).
func AnswerText(api API, chunks []byte) string {
	a := ParseAnswer(api, chunks)
	out := a.Reasoning + a.Text
	for _, c := range a.ToolCalls {
		out += c.Arguments
	}
	return out
}
