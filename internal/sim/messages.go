package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// messagesAPI is the Anthropic Messages API, its events written as
// vLLM's serving code writes them: message_start, a thinking block, the
// answer's text or tool_use block, message_delta with the stop reason and
// usage, message_stop. max_tokens is required.
var messagesAPI = &api{
	routes: []string{"/v1/messages"}, chat: true, thinks: true,
	read: func(req *request, _ *http.Request) string {
		if req.MaxTokens <= 0 {
			return "max_tokens: field required"
		}
		return ""
	},
	thinking: messagesThinking, text: messagesText, end: messagesEnd,
	whole: func(w http.ResponseWriter, a streamArgs, text string) { writeJSON(w, messagesWhole(a, text)) },
}

// stopReason is a chat finish reason in the Messages API's words.
func stopReason(finish string) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls":
		return "tool_use"
	}
	return "end_turn"
}

func appendEvent(buf []byte, name, data string) []byte {
	return fmt.Appendf(buf, "event: %s\ndata: %s\n\n", name, data)
}

func messagesStart(buf []byte, a streamArgs) []byte {
	return appendEvent(buf, "message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":%q,"type":"message","role":"assistant","content":[],"model":%s,"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"output_tokens":0}}}`,
		a.id, quoted(a.model), a.inTokens))
}

// messagesThinking appends reasoning in a thinking block, the first.
func messagesThinking(buf []byte, a streamArgs, at int, text string) []byte {
	if at == 0 {
		buf = messagesStart(buf, a)
		buf = appendEvent(buf, "content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`)
	}
	return appendEvent(buf, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":`+quoted(text)+`}}`)
}

// messagesText appends the answer's text, or a tool call's arguments,
// from token at: the first chunk opens the message (after no reasoning)
// and its block (the second after reasoning).
func messagesText(buf []byte, a streamArgs, at int, text string) []byte {
	if at == 0 && a.thinking == 0 {
		buf = messagesStart(buf, a)
	}
	idx := min(a.thinking, 1)
	if at == 0 && idx == 1 {
		buf = appendEvent(buf, "content_block_stop", `{"type":"content_block_stop","index":0}`)
	}
	if at == 0 {
		block := `{"type":"text","text":""}`
		if a.tool != nil {
			block = fmt.Sprintf(`{"type":"tool_use","id":"toolu_%s","name":%s,"input":{}}`, a.id, quoted(a.tool.name))
		}
		buf = appendEvent(buf, "content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":%s}`, idx, block))
	}
	delta := `{"type":"text_delta","text":` + quoted(text) + `}`
	if a.tool != nil {
		delta = `{"type":"input_json_delta","partial_json":` + quoted(text) + `}`
	}
	return appendEvent(buf, "content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":%s}`, idx, delta))
}

// messagesEnd appends the events that end the answer, with its usage (an
// empty answer's stream opens here).
func messagesEnd(buf []byte, a streamArgs) []byte {
	if a.maxTokens == 0 && a.thinking == 0 {
		buf = messagesStart(buf, a)
	}
	if a.maxTokens > 0 {
		buf = appendEvent(buf, "content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, min(a.thinking, 1)))
	}
	buf = appendEvent(buf, "message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"input_tokens":%d,"output_tokens":%d}}`,
		stopReason(a.finish), a.inTokens, a.outTokens()))
	return appendEvent(buf, "message_stop", `{"type":"message_stop"}`)
}

// messagesWhole is a whole Messages answer.
func messagesWhole(a streamArgs, text string) map[string]any {
	block := map[string]any{"type": "text", "text": text}
	if a.tool != nil {
		var input any = map[string]any{}
		_ = json.Unmarshal([]byte(text), &input) // broken arguments stay an empty input, as a parser would leave them
		block = map[string]any{"type": "tool_use", "id": "toolu_" + a.id, "name": a.tool.name, "input": input}
	}
	content := []any{block}
	if a.maxTokens == 0 {
		content = []any{}
	}
	return map[string]any{"id": a.id, "type": "message", "role": "assistant", "model": a.model, "content": content,
		"stop_reason": stopReason(a.finish), "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": a.inTokens, "output_tokens": a.maxTokens}}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
