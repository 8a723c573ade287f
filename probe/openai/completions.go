package openai

import "strings"

// Completions is OpenAI's legacy Completions API (POST /completions):
// a prompt, not messages; streamed as chat's chunks with text in place of
// deltas, which chat's reader reads.
const Completions API = "completions"

var completions = &Protocol{API: Completions, Operation: "text_completion", Provider: "openai", URL: at("/completions"),
	Body: completionsBody, Event: ParseChunk, Whole: ParseChunk, Answer: chatAnswer}

// completionsBody sends the conversation before the prompt as text
// before it.
func completionsBody(b *RequestBody) ([]byte, error) {
	out := append(b.open(), `,"prompt":`...)
	var sb strings.Builder
	for _, h := range b.History {
		sb.WriteString(h.Content)
		sb.WriteString("\n\n")
	}
	out = b.appendPrompt(out, sb.String())
	return b.close(out, "max_tokens", b.MaxTokens, true, b.Extra)
}
