package openai

import "encoding/json"

// Messages is the Anthropic Messages API (POST /messages), which vLLM,
// llama.cpp's server, Ollama and LiteLLM serve beside Anthropic: typed
// events (message_start, content_block_delta, message_delta, ...), the
// key in x-api-key with an anthropic-version, max_tokens required.
const Messages API = "messages"

var messages = &Protocol{
	API: Messages, Operation: "chat", Provider: "anthropic",
	URL:       at("/messages"),
	Root:      "/v1",
	Body:      messagesBody,
	Event:     func(data []byte, c *Chunk) error { s := reading(data, c); return s.end(s.messagesEvent(c)) },
	Whole:     func(data []byte, c *Chunk) error { s := reading(data, c); return s.end(s.messagesWhole(c)) },
	Answer:    messagesAnswer,
	KeyHeader: "X-Api-Key",
	Headers:   [][2]string{{"Anthropic-Version", AnthropicVersion}},
	// The Messages API takes no seed; top_k 1 is its greedy choice.
	Greedy: map[string]any{"temperature": 0, "top_k": 1},
}

// DefaultMaxTokens is the max_tokens of a Messages request that sets
// none: the API requires one.
const DefaultMaxTokens = 4096

// AnthropicVersion is the anthropic-version header sent when the
// endpoint's headers set none.
const AnthropicVersion = "2023-06-01"

// messagesBody writes chat's tools as {name, description, input_schema}
// with tool_choice {"type": "any" | "auto" | "none" | "tool"}, and a
// response_format as the output_config.format vLLM reads. The Messages
// API reports usage in every stream.
func messagesBody(b *RequestBody) ([]byte, error) {
	out := append(b.open(), `,"messages":[`...)
	out = append(b.appendMessages(out), ']')
	maxTokens := b.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	extra := reshapeTools(b.Extra, func(d map[string]any, params any) { d["input_schema"] = params },
		func(c string, named bool) any {
			switch {
			case named:
				return map[string]any{"type": "tool", "name": c}
			case c == "required":
				return map[string]any{"type": "any"}
			}
			return map[string]any{"type": c}
		})
	extra = reshapeFormat(extra, "output_config", func(format, js map[string]any) { format["json_schema"] = js["schema"] })
	return b.close(out, "max_tokens", maxTokens, false, extra)
}

// stopReason is an Anthropic stop_reason in chat's words: end_turn and
// stop_sequence are stop, max_tokens is length, tool_use is tool_calls
// (as vLLM maps them the other way); others as they are.
func stopReason(raw []byte) []byte {
	switch string(raw) {
	case "end_turn", "stop_sequence":
		return reasonStop
	case "max_tokens":
		return reasonLength
	case "tool_use":
		return reasonToolCalls
	}
	return raw
}

// messagesEvent reads one Messages event: message_start (the model, the
// prompt's usage), content_block_start (a tool_use block's name is
// output), content_block_delta (text_delta, thinking_delta,
// input_json_delta; signature_delta is not content), message_delta (the
// stop reason, the output's usage), message_stop (the end), ping, error.
func (s *scanner) messagesEvent(c *Chunk) error {
	var typ []byte
	var delta, start block
	stop := []byte(nil)
	err := s.members(func(k []byte) error {
		switch string(k) {
		case "type":
			var err error
			typ, err = s.strOrSkip()
			return err
		case "delta":
			return s.members(func(k []byte) error {
				if string(k) == "stop_reason" {
					var err error
					if !s.isNull() {
						stop, err = s.strOrSkip()
					}
					return err
				}
				return delta.member(s, k)
			})
		case "content_block":
			return s.members(func(k []byte) error { return start.member(s, k) })
		case "message":
			return s.members(func(k []byte) error {
				switch string(k) {
				case "model":
					var err error
					c.Model, err = s.strOrSkip()
					return err
				case "usage":
					return s.anthropicUsage(c)
				}
				return s.skip()
			})
		case "usage":
			return s.anthropicUsage(c)
		case "error":
			return s.errorMember(c)
		}
		return s.skip()
	})
	if err != nil {
		return err
	}
	switch string(typ) {
	case "content_block_delta":
		delta.output(c)
	case "content_block_start":
		if string(start.typ) == "tool_use" {
			start.output(c) // its name; text and thinking blocks start empty
		}
	case "message_stop":
		c.End = true
	case "message_delta":
		// Its stop_reason ends the answer: nothing but message_stop may
		// follow, and a server that never sends it, nor ends the stream,
		// would hold the request until its timeout. What follows is the
		// client's to drain, within its bound.
		c.End = stop != nil
	case "error":
		c.Error = true
	}
	if stop != nil {
		c.Finished, c.FinishReason = true, stopReason(stop)
	}
	return nil
}

// messagesWhole reads a whole Messages response: its content blocks, stop
// reason, usage and model.
func (s *scanner) messagesWhole(c *Chunk) error {
	var typ []byte
	err := s.members(func(k []byte) error {
		var err error
		switch string(k) {
		case "type":
			typ, err = s.strOrSkip()
		case "model":
			c.Model, err = s.strOrSkip()
		case "usage":
			err = s.anthropicUsage(c)
		case "error":
			err = s.errorMember(c)
		case "stop_reason":
			if !s.isNull() {
				var r []byte
				if r, err = s.strOrSkip(); r != nil {
					c.Finished, c.FinishReason = true, stopReason(r)
				}
			}
		case "content":
			err = s.array(func() error {
				var b block
				if err := s.members(func(k []byte) error { return b.member(s, k) }); err != nil {
					return err
				}
				if string(b.typ) != "tool_use" {
					b.json, b.name = 0, 0
				}
				b.output(c)
				return nil
			})
		default:
			err = s.skip()
		}
		return err
	})
	if string(typ) == "error" {
		c.Error = true
	}
	return err
}

// messagesAnswer adds a Messages event or whole response: text and
// thinking blocks, tool_use blocks with their streamed input joined.
func messagesAnswer(raw []byte, a *answerBuilder) {
	var e struct {
		Type         string          `json:"type"`
		Index        *int            `json:"index"`
		Delta        json.RawMessage `json:"delta"`
		ContentBlock *contentBlock   `json:"content_block"`
		Content      []contentBlock  `json:"content"` // a whole response
	}
	if json.Unmarshal(raw, &e) != nil {
		return
	}
	switch e.Type {
	case "content_block_start":
		if b := e.ContentBlock; b != nil && b.Type == "tool_use" {
			a.call(e.Index, true).Name = b.Name
		}
	case "content_block_delta": // its delta: text, thinking or a tool's input
		var d contentBlock
		_ = json.Unmarshal(e.Delta, &d)
		a.text.WriteString(d.Text)
		a.reasoning.WriteString(d.Thinking)
		if d.PartialJSON != "" {
			a.call(e.Index, false).Arguments += d.PartialJSON
		}
	case "message":
		for _, b := range e.Content {
			a.text.WriteString(b.Text)
			a.reasoning.WriteString(b.Thinking)
			if b.Type == "tool_use" {
				a.calls = append(a.calls, ToolCall{Name: b.Name, Arguments: string(b.Input)})
			}
		}
	}
}

type contentBlock struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Text        string          `json:"text"`
	Thinking    string          `json:"thinking"`
	PartialJSON string          `json:"partial_json"`
	Input       json.RawMessage `json:"input"`
}
