package openai

import "encoding/json"

// Responses is OpenAI's Responses API (POST /responses): input in place
// of messages, max_output_tokens, typed events (response.created,
// response.output_text.delta, response.completed, ...) that carry usage
// in every stream.
const Responses API = "responses"

var responses = &Protocol{
	API: Responses, Operation: "chat", Provider: "openai",
	URL:    at("/responses"),
	Root:   "/v1",
	Body:   responsesBody,
	Event:  func(data []byte, c *Chunk) error { s := reading(data, c); return s.end(s.responsesEvent(c)) },
	Whole:  func(data []byte, c *Chunk) error { s := reading(data, c); return s.end(s.responsesWhole(c)) },
	Answer: responsesAnswer,
	// The Responses API takes no seed.
	Greedy: map[string]any{"temperature": 0, "top_p": 1},
}

// responsesBody sends a lone prompt as the input string, a conversation
// as its messages; chat's tools flat ({"type": "function", name,
// description, parameters}), a response_format as text.format.
func responsesBody(b *RequestBody) ([]byte, error) {
	out := append(b.open(), `,"input":`...)
	if len(b.History) == 0 {
		out = b.appendPrompt(out, "")
	} else {
		out = append(b.appendMessages(append(out, '[')), ']')
	}
	extra := reshapeTools(b.Extra, func(d map[string]any, params any) { d["type"], d["parameters"] = "function", params },
		func(c string, named bool) any {
			if named {
				return map[string]any{"type": "function", "name": c}
			}
			return nil
		})
	extra = reshapeFormat(extra, "text", func(format, js map[string]any) { format["name"], format["schema"] = js["name"], js["schema"] })
	return b.close(out, "max_output_tokens", b.MaxTokens, false, extra)
}

// response reads a Responses API response object (in an event or whole):
// its model, status, usage, incomplete reason and error; its output only
// when output is set (a whole response: in an event, the output repeats
// what the deltas streamed).
func (s *scanner) response(c *Chunk, output bool) (status, incomplete []byte, err error) {
	err = s.members(func(k []byte) error {
		var err error
		switch string(k) {
		case "model":
			c.Model, err = s.strOrSkip()
		case "status":
			status, err = s.strOrSkip()
		case "usage":
			err = s.anthropicUsage(c) // input_tokens and output_tokens here too
		case "error":
			err = s.errorMember(c)
		case "incomplete_details":
			err = s.members(func(k []byte) error {
				if string(k) == "reason" {
					var err error
					incomplete, err = s.strOrSkip()
					return err
				}
				return s.skip()
			})
		case "output":
			if !output {
				return s.skip()
			}
			err = s.array(func() error { return s.outputItem(c) })
		default:
			err = s.skip()
		}
		return err
	})
	return status, incomplete, err
}

// outputItem reads one item of a whole response's output: a message's
// output_text parts are output, a reasoning item's text is reasoning, a
// function_call is output of a tool call.
func (s *scanner) outputItem(c *Chunk) error {
	var typ []byte
	var item, text block
	err := s.members(func(k []byte) error {
		switch string(k) {
		case "content", "summary":
			return s.array(func() error { return s.members(func(k []byte) error { return text.member(s, k) }) })
		}
		return item.member(s, k)
	})
	typ = item.typ
	switch string(typ) {
	case "message":
		text.output(c)
	case "reasoning":
		c.Reasoning = c.Reasoning || text.text > 0
		c.ContentBytes += text.text
	case "function_call":
		item.text, item.thinking = 0, 0
		item.output(c)
	}
	return err
}

// finish ends c as a Responses response with status ends it.
func (c *Chunk) finish(status, incomplete []byte) {
	switch string(status) {
	case "completed":
		c.Finished, c.FinishReason = true, reasonStop
	case "incomplete":
		// A capped answer ends incomplete: the expected end of a request
		// whose max_output_tokens is its OSL, not a failure.
		c.Finished, c.FinishReason = true, incomplete
		if string(incomplete) == "max_output_tokens" {
			c.FinishReason = reasonLength
		}
	case "failed", "cancelled":
		c.Error = true
	}
}

// responsesEvent reads one Responses API event: output_text, refusal and
// function_call_arguments deltas are output, reasoning_text and
// reasoning_summary_text deltas reasoning; output_item.added of a
// function_call is output (its name); completed and incomplete end the
// stream (with usage), failed and error are errors; the rest (created,
// in_progress, the done events that repeat the deltas) carry nothing.
func (s *scanner) responsesEvent(c *Chunk) error {
	var typ, status, incomplete []byte
	var delta, item block
	err := s.members(func(k []byte) error {
		var err error
		switch string(k) {
		case "type":
			typ, err = s.strOrSkip()
		case "delta":
			var n int
			n, err = s.textLen()
			delta.text += n
		case "item":
			err = s.members(func(k []byte) error { return item.member(s, k) })
		case "response":
			status, incomplete, err = s.response(c, false)
		case "error":
			err = s.errorMember(c)
		default:
			err = s.skip()
		}
		return err
	})
	if err != nil {
		return err
	}
	switch string(typ) {
	case "response.output_text.delta", "response.refusal.delta":
		delta.output(c)
	case "response.reasoning_text.delta", "response.reasoning_summary_text.delta":
		delta.thinking, delta.text = delta.text, 0
		delta.output(c)
	case "response.function_call_arguments.delta":
		delta.json, delta.text = delta.text, 0
		delta.output(c)
	case "response.output_item.added":
		if string(item.typ) == "function_call" {
			item.text, item.thinking = 0, 0
			item.output(c)
		}
	case "response.completed", "response.incomplete", "response.failed":
		c.finish(status, incomplete)
		c.End = true
	case "error":
		c.Error = true
	}
	return nil
}

// responsesWhole reads a whole Responses API response.
func (s *scanner) responsesWhole(c *Chunk) error {
	status, incomplete, err := s.response(c, true)
	c.finish(status, incomplete)
	return err
}

// responsesAnswer adds a Responses event or whole response: output text
// and refusal, reasoning text and summaries, function calls with their
// streamed arguments joined.
func responsesAnswer(raw []byte, a *answerBuilder) {
	var e struct {
		Type        string          `json:"type"`
		OutputIndex *int            `json:"output_index"`
		Delta       json.RawMessage `json:"delta"`
		Item        *outputItem     `json:"item"`
		Output      []outputItem    `json:"output"` // a whole response
	}
	if json.Unmarshal(raw, &e) != nil {
		return
	}
	var delta string
	_ = json.Unmarshal(e.Delta, &delta)
	switch e.Type {
	case "response.output_text.delta", "response.refusal.delta":
		a.text.WriteString(delta)
	case "response.reasoning_text.delta", "response.reasoning_summary_text.delta":
		a.reasoning.WriteString(delta)
	case "response.output_item.added":
		if it := e.Item; it != nil && it.Type == "function_call" {
			c := a.call(e.OutputIndex, true)
			c.Name, c.Arguments = it.Name, it.Arguments
		}
	case "response.function_call_arguments.delta":
		a.call(e.OutputIndex, false).Arguments += delta
	}
	for _, it := range e.Output {
		switch it.Type {
		case "message":
			for _, p := range it.Content {
				a.text.WriteString(p.Text)
			}
		case "reasoning":
			for _, p := range it.Content {
				a.reasoning.WriteString(p.Text)
			}
			for _, p := range it.Summary {
				a.reasoning.WriteString(p.Text)
			}
		case "function_call":
			a.calls = append(a.calls, ToolCall{Name: it.Name, Arguments: it.Arguments})
		}
	}
}

type outputItem struct {
	Type      string `json:"type"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Content   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Summary []struct {
		Text string `json:"text"`
	} `json:"summary"`
}
