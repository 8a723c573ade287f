package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// chatAPI is OpenAI's Chat Completions API, as vLLM serves it: chunks
// of choices with deltas (reasoning_content before the answer, a tool
// call's name then its arguments), a usage chunk when asked for, [DONE].
var chatAPI = &api{
	routes: []string{"/v1/chat/completions"}, chat: true, thinks: true,
	thinking: chatThinking, text: chatText, end: chatEnd, whole: chatWhole,
}

func chatThinking(buf []byte, a streamArgs, _ int, text string) []byte {
	return fmt.Appendf(buf, "data: {\"id\":%q,\"object\":%q,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":%s},\"finish_reason\":null}]}\n\n",
		a.id, object(a.chat, true), a.model, quoted(text))
}

func chatText(buf []byte, a streamArgs, at int, text string) []byte {
	return appendChunk(buf, a, at, text, "")
}

// chatEnd appends the chunk with the finish reason, the usage chunk when
// the request asked for it (stream_options), and [DONE].
func chatEnd(buf []byte, a streamArgs) []byte {
	buf = appendChunk(buf, a, -1, "", a.finish)
	if a.usage {
		buf = fmt.Appendf(buf, "data: {\"id\":%q,\"object\":%q,\"model\":%q,\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\n",
			a.id, object(a.chat, true), a.model, a.inTokens, a.outTokens(), a.inTokens+a.outTokens())
	}
	return append(buf, "data: [DONE]\n\n"...)
}

func quoted(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func object(chat, stream bool) string {
	switch {
	case chat && stream:
		return "chat.completion.chunk"
	case chat:
		return "chat.completion"
	}
	return "text_completion"
}

// appendChunk appends the chunk of text, the answer's from token at (-1:
// the last chunk, with finish).
func appendChunk(buf []byte, a streamArgs, at int, text, finish string) []byte {
	fin := "null"
	if finish != "" {
		fin = strconv.Quote(finish)
	}
	buf = fmt.Appendf(buf, "data: {\"id\":%q,\"object\":%q,\"model\":%q,\"choices\":[{\"index\":0,", a.id, object(a.chat, true), a.model)
	switch {
	case a.tool != nil && at < 0:
		buf = append(buf, "\"delta\":{}"...)
	case a.tool != nil && at == 0: // as vLLM streams a call: its name first, with the first arguments
		buf = fmt.Appendf(buf, "\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"call_%s\",\"type\":\"function\",\"function\":{\"name\":%q,\"arguments\":%q}}]}", a.id, a.tool.name, text)
	case a.tool != nil:
		buf = fmt.Appendf(buf, "\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":%q}}]}", text)
	case a.chat:
		buf = fmt.Appendf(buf, "\"delta\":{\"content\":%q}", text)
	default:
		buf = fmt.Appendf(buf, "\"text\":%q", text)
	}
	return fmt.Appendf(buf, ",\"finish_reason\":%s}]}\n\n", fin)
}

// chatWhole writes a whole chat or completions answer.
func chatWhole(w http.ResponseWriter, a streamArgs, text string) {
	chat, id, model, outTokens, inTokens := a.chat, a.id, a.model, a.maxTokens, a.inTokens
	choice := map[string]any{"index": 0, "finish_reason": a.finish}
	switch {
	case a.tool != nil:
		choice["message"] = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"id": "call_" + id, "type": "function", "function": map[string]any{"name": a.tool.name, "arguments": text}}}}
	case chat:
		choice["message"] = map[string]string{"role": "assistant", "content": text}
	default:
		choice["text"] = text
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": id, "object": object(chat, false), "model": model, "choices": []any{choice},
		"usage": map[string]int{"prompt_tokens": inTokens, "completion_tokens": outTokens, "total_tokens": inTokens + outTokens},
	})
}
