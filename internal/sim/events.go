package sim

import (
	"encoding/json"
	"fmt"
)

// The APIs the simulator speaks, by their path.
const (
	apiChat        = "chat"
	apiCompletions = "completions"
	// apiMessages is the Anthropic Messages API, apiResponses OpenAI's
	// Responses API: both stream typed events, written here as vLLM's
	// serving code writes them.
	apiMessages   = "messages"
	apiResponses  = "responses"
	apiEmbeddings = "embeddings"
)

// outTokens is the answer's tokens, its reasoning's included (as every
// API counts them).
func (a streamArgs) outTokens() int { return a.maxTokens + a.thinking }

// typed reports whether a's API streams typed events.
func (a streamArgs) typed() bool { return a.api == apiMessages || a.api == apiResponses }

func quoted(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
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

// appendTyped appends the events that carry text, the answer's from
// token at: the first chunk opens the message and its block or item.
func appendTyped(buf []byte, a streamArgs, at int, text string) []byte {
	if at == 0 && a.thinking == 0 {
		buf = appendTypedStart(buf, a)
	}
	// After reasoning, the answer is the second block or item.
	idx := 0
	if a.thinking > 0 {
		idx = 1
	}
	if a.api == apiMessages {
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
	if at == 0 {
		item := fmt.Sprintf(`{"id":"msg_%s","type":"message","status":"in_progress","role":"assistant","content":[]}`, a.id)
		if a.tool != nil {
			item = fmt.Sprintf(`{"id":"fc_%s","type":"function_call","call_id":"call_%s","name":%s,"arguments":"","status":"in_progress"}`, a.id, a.id, quoted(a.tool.name))
		}
		buf = appendEvent(buf, "response.output_item.added", fmt.Sprintf(`{"type":"response.output_item.added","sequence_number":1,"output_index":%d,"item":%s}`, idx, item))
	}
	name := "response.output_text.delta"
	if a.tool != nil {
		name = "response.function_call_arguments.delta"
	}
	return appendEvent(buf, name, fmt.Sprintf(`{"type":%q,"sequence_number":%d,"item_id":"msg_%s","output_index":%d,"content_index":0,"delta":%s}`, name, at+2, a.id, idx, quoted(text)))
}

// appendThinking appends reasoning token at of the answer, in a's API:
// chat's reasoning_content, a Messages thinking block, a Responses
// reasoning item.
func appendThinking(buf []byte, a streamArgs, at int, text string) []byte {
	switch a.api {
	case apiMessages:
		if at == 0 {
			buf = appendTypedStart(buf, a)
			buf = appendEvent(buf, "content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`)
		}
		return appendEvent(buf, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":`+quoted(text)+`}}`)
	case apiResponses:
		if at == 0 {
			buf = appendTypedStart(buf, a)
			buf = appendEvent(buf, "response.output_item.added", fmt.Sprintf(`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"rs_%s","type":"reasoning","summary":[],"content":[]}}`, a.id))
		}
		return appendEvent(buf, "response.reasoning_text.delta", fmt.Sprintf(`{"type":"response.reasoning_text.delta","item_id":"rs_%s","output_index":0,"content_index":0,"delta":%s}`, a.id, quoted(text)))
	}
	return fmt.Appendf(buf, "data: {\"id\":%q,\"object\":%q,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":%s},\"finish_reason\":null}]}\n\n",
		a.id, object(a.chat, true), a.model, quoted(text))
}

// appendTypedStart appends the event that opens a stream.
func appendTypedStart(buf []byte, a streamArgs) []byte {
	if a.api == apiMessages {
		return appendEvent(buf, "message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":%q,"type":"message","role":"assistant","content":[],"model":%s,"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"output_tokens":0}}}`,
			a.id, quoted(a.model), a.inTokens))
	}
	return appendEvent(buf, "response.created", fmt.Sprintf(`{"type":"response.created","sequence_number":0,"response":{"id":"resp_%s","object":"response","status":"in_progress","model":%s,"output":[],"usage":null}}`,
		a.id, quoted(a.model)))
}

// appendTypedEnd appends the events that end the answer, with its usage
// (an empty answer's stream opens here).
func appendTypedEnd(buf []byte, a streamArgs) []byte {
	if a.maxTokens == 0 && a.thinking == 0 {
		buf = appendTypedStart(buf, a)
	}
	if a.api == apiMessages {
		if a.maxTokens > 0 {
			buf = appendEvent(buf, "content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, min(a.thinking, 1)))
		}
		buf = appendEvent(buf, "message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"input_tokens":%d,"output_tokens":%d}}`,
			stopReason(a.finish), a.inTokens, a.outTokens()))
		return appendEvent(buf, "message_stop", `{"type":"message_stop"}`)
	}
	name, status, details := "response.completed", "completed", "null"
	if a.finish == "length" {
		name, status, details = "response.incomplete", "incomplete", `{"reason":"max_output_tokens"}`
	}
	return appendEvent(buf, name, fmt.Sprintf(`{"type":%q,"sequence_number":%d,"response":{"id":"resp_%s","object":"response","status":%q,"model":%s,"incomplete_details":%s,"output":[],"usage":{"input_tokens":%d,"output_tokens":%d,"total_tokens":%d}}}`,
		name, a.maxTokens+2, a.id, status, quoted(a.model), details, a.inTokens, a.outTokens(), a.inTokens+a.outTokens()))
}

// wholeTyped is a whole (not streamed) answer of a typed API.
func wholeTyped(a streamArgs, text string) map[string]any {
	if a.api == apiMessages {
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
	item := map[string]any{"id": "msg_" + a.id, "type": "message", "status": "completed", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
	if a.tool != nil {
		item = map[string]any{"id": "fc_" + a.id, "type": "function_call", "call_id": "call_" + a.id, "name": a.tool.name, "arguments": text, "status": "completed"}
	}
	output := []any{item}
	if a.maxTokens == 0 {
		output = []any{}
	}
	status, details := "completed", any(nil)
	if a.finish == "length" {
		status, details = "incomplete", map[string]any{"reason": "max_output_tokens"}
	}
	return map[string]any{"id": "resp_" + a.id, "object": "response", "status": status, "model": a.model, "output": output,
		"incomplete_details": details, "usage": map[string]int{"input_tokens": a.inTokens, "output_tokens": a.maxTokens, "total_tokens": a.inTokens + a.maxTokens}}
}
