package openai

import (
	"encoding/json"
	"fmt"
	"strings"
)

// API is the kind of OpenAI-compatible endpoint.
type API string

const (
	Chat        API = "chat"
	Completions API = "completions"
)

// Path returns the request path below the base URL (which, as with OpenAI
// clients, normally ends in /v1).
func (a API) Path() string {
	if a == Completions {
		return "/completions"
	}
	return "/chat/completions"
}

// RequestBody is the input to Body.
type RequestBody struct {
	API    API
	Model  string
	Prompt string
	// History is the conversation before Prompt (multi-turn sessions):
	// earlier messages for chat, text before the prompt for completions.
	History   []Message
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

// Body encodes the JSON request body.
func Body(b RequestBody) ([]byte, error) {
	m := make(map[string]any, len(b.Extra)+6)
	for k, v := range b.Extra {
		m[k] = v
	}
	m["model"] = b.Model
	switch b.API {
	case Chat:
		msgs := make([]Message, 0, len(b.History)+1)
		msgs = append(msgs, b.History...)
		m["messages"] = append(msgs, Message{Role: "user", Content: b.Prompt})
	case Completions:
		prompt := b.Prompt
		if len(b.History) > 0 {
			var sb strings.Builder
			for _, h := range b.History {
				sb.WriteString(h.Content)
				sb.WriteString("\n\n")
			}
			prompt = sb.String() + prompt
		}
		m["prompt"] = prompt
	default:
		return nil, fmt.Errorf("unknown API %q", b.API)
	}
	if b.MaxTokens > 0 {
		m["max_tokens"] = b.MaxTokens
	}
	m["stream"] = b.Stream
	if b.Stream && b.IncludeUsage {
		m["stream_options"] = map[string]bool{"include_usage": true}
	} else {
		delete(m, "stream_options")
	}
	return json.Marshal(m)
}
