package openai

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// RequestBody is the input to Body.
type RequestBody struct {
	API    API
	Model  string
	Prompt string
	// Parts, when set, replaces Prompt: the prompt is Parts joined by
	// single spaces.
	Parts []string
	// History is the conversation before Prompt (multi-turn sessions):
	// earlier messages for chat, text before the prompt for completions.
	History []Message
	// Inputs are an embeddings batch's inputs after Prompt.
	Inputs    []string
	MaxTokens int
	Stream    bool
	// IncludeUsage asks for a trailing usage chunk (stream_options); some
	// older servers reject the field, so it can be turned off.
	IncludeUsage bool
	// Extra fields are merged into the body (temperature, ignore_eos, ...).
	// They cannot override the fields above.
	Extra map[string]any
}

// Message is one message of a chat conversation.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// open starts b's body, {"model": ..., sized for the prompt and history.
func (b *RequestBody) open() []byte {
	size := len(b.Prompt) + 128
	for _, p := range b.Parts {
		size += len(p) + 1
	}
	for _, h := range b.History {
		size += len(h.Content) + 32
	}
	out := make([]byte, 0, size)
	out = append(out, `{"model":`...)
	return appendString(out, b.Model)
}

// fixed are the fields a body of the generating APIs writes itself: an
// extra field of the same name is not sent.
var fixed = []string{"model", "messages", "prompt", "input", "max_tokens", "max_output_tokens", "stream", "stream_options"}

// close ends a generating API's body: maxTokens under key where set, the
// stream flag, stream_options asking for usage where usage is set, then
// extra's fields.
func (b *RequestBody) close(out []byte, key string, maxTokens int, usage bool, extra map[string]any) ([]byte, error) {
	if maxTokens > 0 {
		out = append(out, `,"`...)
		out = append(out, key...)
		out = append(out, `":`...)
		out = strconv.AppendInt(out, int64(maxTokens), 10)
	}
	out = append(out, `,"stream":`...)
	out = strconv.AppendBool(out, b.Stream)
	if usage && b.Stream && b.IncludeUsage {
		out = append(out, `,"stream_options":{"include_usage":true}`...)
	}
	return appendExtra(out, extra, fixed...)
}

// reshapeFormat is extra with chat's response_format (what json and
// json_schema checks send) moved to key's format, shaped by fill from
// the type and chat's json_schema (nil when none).
func reshapeFormat(extra map[string]any, key string, fill func(format, js map[string]any)) map[string]any {
	rf, ok := extra["response_format"].(map[string]any)
	if !ok {
		return extra
	}
	out := maps.Clone(extra)
	delete(out, "response_format")
	format := map[string]any{"type": rf["type"]}
	if js, ok := rf["json_schema"].(map[string]any); ok {
		fill(format, js)
	}
	out[key] = map[string]any{"format": format}
	return out
}

// reshapeTools is extra with its chat-shaped tools and tool_choice (what
// answer checks send) in another API's shape: def makes one tool of a
// chat function (its name, and its description where it has one) and
// its parameters; choice makes a tool_choice of chat's string, or of a
// named function's name (named), nil leaving it as it is. Tools already
// in another shape pass as they are.
func reshapeTools(extra map[string]any, def func(d map[string]any, params any), choice func(c string, named bool) any) map[string]any {
	tools, ok := extra["tools"].([]any)
	if !ok {
		return extra
	}
	out := maps.Clone(extra)
	shaped := make([]any, 0, len(tools))
	for _, t := range tools {
		d, _ := t.(map[string]any)
		fn, isChat := d["function"].(map[string]any)
		if !isChat {
			shaped = append(shaped, t)
			continue
		}
		tool := map[string]any{"name": fn["name"]}
		if v, ok := fn["description"]; ok {
			tool["description"] = v
		}
		params, ok := fn["parameters"]
		if !ok {
			params = map[string]any{"type": "object"}
		}
		def(tool, params)
		shaped = append(shaped, tool)
	}
	out["tools"] = shaped
	var c any
	switch tc := extra["tool_choice"].(type) {
	case string:
		c = choice(tc, false)
	case map[string]any:
		if fn, ok := tc["function"].(map[string]any); ok {
			name, _ := fn["name"].(string)
			c = choice(name, true)
		}
	}
	if c != nil {
		out["tool_choice"] = c
	}
	return out
}

// appendExtra appends extra's fields, sorted by name, less those named
// in fixed (the body's own, which win), and closes the body.
func appendExtra(out []byte, extra map[string]any, fixed ...string) ([]byte, error) {
	keys := make([]string, 0, len(extra))
	for k := range extra {
		if !slices.Contains(fixed, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, err := json.Marshal(extra[k])
		if err != nil {
			return nil, fmt.Errorf("extra field %q: %w", k, err)
		}
		out = append(out, ',')
		out = appendString(out, k)
		out = append(out, ':')
		out = append(out, v...)
	}
	return append(out, '}'), nil
}

// historyText is the conversation before the prompt as text, each
// message followed by a blank line: how an API that takes one prompt
// (completions, KServe's generate) is sent a session's later turns.
func (b *RequestBody) historyText() string {
	var sb strings.Builder
	for _, h := range b.History {
		sb.WriteString(h.Content)
		sb.WriteString("\n\n")
	}
	return sb.String()
}

// appendMessages appends the conversation, the prompt its last user
// message, without the brackets around it.
func (b *RequestBody) appendMessages(out []byte) []byte {
	for _, h := range b.History {
		out = append(out, `{"role":`...)
		out = appendString(out, h.Role)
		out = append(out, `,"content":`...)
		out = appendString(out, h.Content)
		out = append(out, "},"...)
	}
	out = append(out, `{"role":"user","content":`...)
	out = b.appendPrompt(out, "")
	return append(out, '}')
}

// appendPrompt appends the prompt as one JSON string, after prefix.
func (b *RequestBody) appendPrompt(out []byte, prefix string) []byte {
	out = append(out, '"')
	out = appendEscaped(out, prefix)
	if b.Parts == nil {
		out = appendEscaped(out, b.Prompt)
	}
	for i, p := range b.Parts {
		if i > 0 {
			out = append(out, ' ')
		}
		out = appendEscaped(out, p)
	}
	return append(out, '"')
}

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it (invalid UTF-8 becomes U+FFFD), less the HTML escaping that
// no server needs.
func appendString(out []byte, s string) []byte {
	out = append(out, '"')
	out = appendEscaped(out, s)
	return append(out, '"')
}

// appendEscaped appends s escaped for the inside of a JSON string.
func appendEscaped(out []byte, s string) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			out = append(out, s[start:i]...)
			switch c {
			case '"', '\\':
				out = append(out, '\\', c)
			case '\n':
				out = append(out, '\\', 'n')
			case '\r':
				out = append(out, '\\', 'r')
			case '\t':
				out = append(out, '\\', 't')
			default:
				out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, s[start:i]...)
			out = append(out, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			out = append(out, s[start:i]...)
			out = append(out, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(out, s[start:]...)
}
