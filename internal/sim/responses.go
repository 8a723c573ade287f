package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// responsesAPI is OpenAI's Responses API, its events written as vLLM's
// serving code writes them: response.created, a reasoning item, the
// answer's message or function_call item and its deltas,
// response.completed (or incomplete, at max_output_tokens) with usage.
var responsesAPI = &api{
	routes: []string{"/v1/responses"}, chat: true, thinks: true,
	read: func(req *request, _ *http.Request) string {
		var s string
		if json.Unmarshal(req.Input, &s) == nil {
			req.Messages = []chatMessage{{Role: "user", Content: req.Input}}
		} else {
			_ = json.Unmarshal(req.Input, &req.Messages)
		}
		req.MaxTokens = req.MaxOutputTokens
		return ""
	},
	thinking: responsesThinking, text: responsesText, end: responsesEnd,
	whole: func(w http.ResponseWriter, a streamArgs, text string) { writeJSON(w, responsesWhole(a, text)) },
}

func responsesStart(buf []byte, a streamArgs) []byte {
	return appendEvent(buf, "response.created", fmt.Sprintf(`{"type":"response.created","sequence_number":0,"response":{"id":"resp_%s","object":"response","status":"in_progress","model":%s,"output":[],"usage":null}}`,
		a.id, quoted(a.model)))
}

// responsesThinking appends reasoning in a reasoning item, the first.
func responsesThinking(buf []byte, a streamArgs, at int, text string) []byte {
	if at == 0 {
		buf = responsesStart(buf, a)
		buf = appendEvent(buf, "response.output_item.added", fmt.Sprintf(`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"rs_%s","type":"reasoning","summary":[],"content":[]}}`, a.id))
	}
	return appendEvent(buf, "response.reasoning_text.delta", fmt.Sprintf(`{"type":"response.reasoning_text.delta","item_id":"rs_%s","output_index":0,"content_index":0,"delta":%s}`, a.id, quoted(text)))
}

// responsesText appends the answer's text, or a function call's
// arguments, from token at: the first chunk opens the response (after no
// reasoning) and its item (the second after reasoning).
func responsesText(buf []byte, a streamArgs, at int, text string) []byte {
	if at == 0 && a.thinking == 0 {
		buf = responsesStart(buf, a)
	}
	idx := min(a.thinking, 1)
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

// responsesEnd appends the event that ends the answer, with its usage
// (an empty answer's stream opens here).
func responsesEnd(buf []byte, a streamArgs) []byte {
	if a.maxTokens == 0 && a.thinking == 0 {
		buf = responsesStart(buf, a)
	}
	name, status, details := "response.completed", "completed", "null"
	if a.finish == "length" {
		name, status, details = "response.incomplete", "incomplete", `{"reason":"max_output_tokens"}`
	}
	return appendEvent(buf, name, fmt.Sprintf(`{"type":%q,"sequence_number":%d,"response":{"id":"resp_%s","object":"response","status":%q,"model":%s,"incomplete_details":%s,"output":[],"usage":{"input_tokens":%d,"output_tokens":%d,"total_tokens":%d}}}`,
		name, a.maxTokens+2, a.id, status, quoted(a.model), details, a.inTokens, a.outTokens(), a.inTokens+a.outTokens()))
}

// responsesWhole is a whole Responses answer.
func responsesWhole(a streamArgs, text string) map[string]any {
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
