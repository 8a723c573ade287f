package openai

// Completions is OpenAI's legacy Completions API (POST /completions):
// a prompt, not messages; streamed as chat's chunks with text in place of
// deltas, which chat's reader reads.
const Completions API = "completions"

var completions = &Protocol{API: Completions, Operation: "text_completion", Provider: "openai", URL: at("/completions"), Root: "/v1",
	Body: completionsBody, Event: ParseChunk, Whole: ParseChunk, Answer: chatAnswer,
	Greedy:   map[string]any{"temperature": 0, "top_p": 1, "seed": 1},
	Logprobs: map[string]any{"logprobs": 1}}

// completionsBody sends the conversation before the prompt as text
// before it.
func completionsBody(b *RequestBody) ([]byte, error) {
	out := append(b.open(), `,"prompt":`...)
	out = b.appendPrompt(out, b.historyText())
	return b.close(out, "max_tokens", b.MaxTokens, true, b.Extra)
}
