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

// API is the request shape an endpoint speaks.
type API string

const (
	Chat        API = "chat"
	Completions API = "completions"
	// Responses is OpenAI's Responses API, streamed as typed events.
	Responses API = "responses"
	// Messages is the Anthropic Messages API, which vLLM, llama.cpp's
	// server, Ollama and LiteLLM serve beside Anthropic.
	Messages API = "messages"
	// Embeddings is POST /embeddings: never streamed, answered with
	// vectors.
	Embeddings API = "embeddings"
)

// APIs lists the APIs, as the configuration names them.
var APIs = []API{Chat, Completions, Responses, Messages, Embeddings}

// Path returns the request path below the base URL (which, as with OpenAI
// clients, normally ends in /v1).
func (a API) Path() string {
	switch a {
	case Completions:
		return "/completions"
	case Responses:
		return "/responses"
	case Messages:
		return "/messages"
	case Embeddings:
		return "/embeddings"
	}
	return "/chat/completions"
}

// DefaultMaxTokens is the max_tokens of a Messages request that sets
// none: the API requires one.
const DefaultMaxTokens = 4096

// AnthropicVersion is the anthropic-version header sent when the
// endpoint's headers set none.
const AnthropicVersion = "2023-06-01"

// URL is where base's requests for a go: the API's path after base's
// path, base's query (Azure OpenAI's api-version) kept after it.
func (a API) URL(base string) string {
	b, query, ok := strings.Cut(base, "?")
	u := strings.TrimSuffix(b, "/") + a.Path()
	if ok {
		u += "?" + query
	}
	return u
}

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

// Body encodes the JSON request body. It writes the JSON itself rather
// than through encoding/json's reflection: a body is encoded for every
// request, and reflection's deep call chain and allocations showed in the
// load generator's stacks and collections (docs/BENCHMARKS.md). Extra
// fields are encoded with encoding/json, sorted by name, and cannot
// override the fields above.
func Body(b RequestBody) ([]byte, error) {
	if !slices.Contains(APIs, b.API) {
		return nil, fmt.Errorf("unknown API %q", b.API)
	}
	size := len(b.Prompt) + 128
	for _, p := range b.Parts {
		size += len(p) + 1
	}
	for _, h := range b.History {
		size += len(h.Content) + 32
	}
	out := make([]byte, 0, size)
	out = append(out, `{"model":`...)
	out = appendString(out, b.Model)
	if b.API == Embeddings {
		return b.embeddings(out)
	}
	switch b.API {
	case Responses:
		out = append(out, `,"input":`...)
		if len(b.History) == 0 {
			out = b.appendPrompt(out, "")
			break
		}
		out = b.appendMessages(append(out, '['))
		out = append(out, ']')
	case Chat, Messages:
		out = append(out, `,"messages":[`...)
		out = b.appendMessages(out)
		out = append(out, ']')
	default:
		out = append(out, `,"prompt":`...)
		var sb strings.Builder
		for _, h := range b.History {
			sb.WriteString(h.Content)
			sb.WriteString("\n\n")
		}
		out = b.appendPrompt(out, sb.String())
	}
	maxTokens := b.MaxTokens
	if b.API == Messages && maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	if maxTokens > 0 {
		if b.API == Responses {
			out = append(out, `,"max_output_tokens":`...)
		} else {
			out = append(out, `,"max_tokens":`...)
		}
		out = strconv.AppendInt(out, int64(maxTokens), 10)
	}
	out = append(out, `,"stream":`...)
	out = strconv.AppendBool(out, b.Stream)
	// The Responses and Messages APIs report usage in every stream.
	if b.Stream && b.IncludeUsage && (b.API == Chat || b.API == Completions) {
		out = append(out, `,"stream_options":{"include_usage":true}`...)
	}
	return appendExtra(out, formatFor(b.API, toolsFor(b.API, b.Extra)), "model", "messages", "prompt", "input", "max_tokens", "max_output_tokens", "stream", "stream_options")
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

// embeddings ends an embeddings body: the prompt and the batch's other
// inputs, as floats (the reader counts their dimensions).
func (b *RequestBody) embeddings(out []byte) ([]byte, error) {
	out = append(out, `,"input":[`...)
	out = b.appendPrompt(out, "")
	for _, in := range b.Inputs {
		out = append(out, ',')
		out = appendString(out, in)
	}
	out = append(out, `],"encoding_format":"float"`...)
	return appendExtra(out, b.Extra, "model", "input", "encoding_format")
}

// formatFor is extra with chat's response_format (what json and
// json_schema checks send) in api's own shape: the Responses API's
// text.format, and for the Messages API the output_config.format vLLM
// reads.
func formatFor(api API, extra map[string]any) map[string]any {
	rf, ok := extra["response_format"].(map[string]any)
	if !ok || api != Responses && api != Messages {
		return extra
	}
	out := maps.Clone(extra)
	delete(out, "response_format")
	format := map[string]any{"type": rf["type"]}
	if js, ok := rf["json_schema"].(map[string]any); ok {
		if api == Responses {
			format["name"], format["schema"] = js["name"], js["schema"]
		} else {
			format["json_schema"] = js["schema"]
		}
	}
	if api == Responses {
		out["text"] = map[string]any{"format": format}
	} else {
		out["output_config"] = map[string]any{"format": format}
	}
	return out
}

// toolsFor is extra with its chat-shaped tools and tool_choice (what
// answer checks send) in api's own shape: the Messages API's {name,
// description, input_schema} and {"type": "any" | "auto" | "none" |
// "tool"}, the Responses API's flat {"type": "function", name,
// description, parameters}. Fields already in another shape pass as they
// are.
func toolsFor(api API, extra map[string]any) map[string]any {
	tools, ok := extra["tools"].([]any)
	if !ok || api == Chat || api == Completions {
		return extra
	}
	out := maps.Clone(extra)
	shaped := make([]any, 0, len(tools))
	for _, t := range tools {
		def, _ := t.(map[string]any)
		fn, isChat := def["function"].(map[string]any)
		if !isChat {
			shaped = append(shaped, t)
			continue
		}
		d := map[string]any{"name": fn["name"]}
		if v, ok := fn["description"]; ok {
			d["description"] = v
		}
		params, ok := fn["parameters"]
		if !ok {
			params = map[string]any{"type": "object"}
		}
		if api == Messages {
			d["input_schema"] = params
		} else {
			d["type"], d["parameters"] = "function", params
		}
		shaped = append(shaped, d)
	}
	out["tools"] = shaped
	switch c := extra["tool_choice"].(type) {
	case string:
		if api == Messages {
			if c == "required" {
				c = "any"
			}
			out["tool_choice"] = map[string]any{"type": c}
		}
	case map[string]any:
		if fn, ok := c["function"].(map[string]any); ok {
			if api == Messages {
				out["tool_choice"] = map[string]any{"type": "tool", "name": fn["name"]}
			} else {
				out["tool_choice"] = map[string]any{"type": "function", "name": fn["name"]}
			}
		}
	}
	return out
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
