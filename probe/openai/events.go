package openai

// The Anthropic Messages API and OpenAI's Responses API stream typed
// events, not chat chunks: each event's data is an object whose "type"
// says what it carries. Their readers fill the same Chunk, with the same
// rules (docs/MEASUREMENT.md has a table per API), and allocate nothing.

// Parse reads one streamed event's data of api into c.
func Parse(api API, data []byte, c *Chunk) error {
	if api != Messages && api != Responses {
		return ParseChunk(data, c)
	}
	return parseTop(api, false, data, c)
}

// ParseWhole reads a whole (not streamed) response of api into c.
func ParseWhole(api API, data []byte, c *Chunk) error {
	if api != Messages && api != Responses && api != Embeddings {
		return ParseChunk(data, c)
	}
	return parseTop(api, true, data, c)
}

// parseTop reads one object of api, an event or a whole response. It
// calls the readers directly: a reader passed as a function value would
// move the scanner to the heap.
func parseTop(api API, whole bool, data []byte, c *Chunk) error {
	*c = Chunk{}
	s := scanner{b: data}
	if s.peek() != '{' {
		return ErrMalformed
	}
	var err error
	switch {
	case api == Messages && whole:
		err = s.messagesWhole(c)
	case api == Messages:
		err = s.messagesEvent(c)
	case api == Embeddings:
		err = s.embeddings(c)
	case whole:
		err = s.responsesWhole(c)
	default:
		err = s.responsesEvent(c)
	}
	if err != nil {
		return err
	}
	s.ws()
	if s.i != len(s.b) {
		return ErrMalformed
	}
	return nil
}

// Finish reasons in chat's words, whatever the API said.
var (
	reasonStop      = []byte("stop")
	reasonLength    = []byte("length")
	reasonToolCalls = []byte("tool_calls")
)

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

// strOrSkip reads a string's raw bytes, or skips another value (nil).
func (s *scanner) strOrSkip() ([]byte, error) {
	if s.peek() != '"' {
		return nil, s.skip()
	}
	v := s.str()
	if v == nil {
		return nil, ErrMalformed
	}
	return v, nil
}

// anthropicUsage reads {"input_tokens", "output_tokens"} and the prompt
// cache's counts. The Messages API's input_tokens leaves out what it read
// from (cache_read_input_tokens) and wrote to (cache_creation_input_tokens)
// the prompt cache, each billed: the prompt's length is their sum, as chat
// counts it in prompt_tokens (llama.cpp's server answered 1 input and 13
// cache-read tokens where chat said 14). The Responses API's input_tokens
// already holds its cached part (input_tokens_details).
func (s *scanner) anthropicUsage(c *Chunk) error {
	var input, read, created int
	var prompt bool
	err := s.members(func(k []byte) error {
		var err error
		switch string(k) {
		case "input_tokens":
			input, err = s.int()
			prompt = true
		case "cache_read_input_tokens":
			read, err = s.int()
			prompt = true
		case "cache_creation_input_tokens":
			created, err = s.int()
			prompt = true
		case "input_tokens_details":
			err = s.cached(c)
		case "output_tokens":
			c.CompletionTokens, err = s.int()
			c.Usage = true
		default:
			err = s.skip()
		}
		return err
	})
	if prompt {
		c.PromptTokens, c.Usage = input+read+created, true
		if input == Untrusted || read == Untrusted || created == Untrusted {
			c.PromptTokens = Untrusted
		}
		if read > 0 {
			c.CachedTokens = read
		}
	}
	return err
}

// errorMember reads an "error" member: anything but null is an error.
func (s *scanner) errorMember(c *Chunk) error {
	if s.isNull() {
		return nil
	}
	c.Error = true
	return s.skip()
}

// block is what one content block (Anthropic) or output item or delta
// says, classified once all its members are read, whatever their order.
type block struct {
	typ                        []byte
	text, thinking, json, name int
}

func (b *block) member(s *scanner, k []byte) error {
	var err error
	var n int
	switch string(k) {
	case "type":
		b.typ, err = s.strOrSkip()
	case "text":
		n, err = s.textLen()
		b.text += n
	case "thinking":
		n, err = s.textLen()
		b.thinking += n
	case "partial_json", "arguments":
		n, err = s.textLen()
		b.json += n
	case "name":
		n, err = s.textLen()
		b.name += n
	default:
		err = s.skip()
	}
	return err
}

// output adds what b carries to c: text is output, thinking is
// reasoning, a tool call's name or arguments are output of a tool call.
func (b *block) output(c *Chunk) {
	if b.text > 0 {
		c.Content = true
		c.ContentBytes += b.text
	}
	if b.thinking > 0 {
		c.Reasoning = true
		c.ContentBytes += b.thinking
	}
	if b.json > 0 || b.name > 0 {
		c.Content, c.ToolCall = true, true
		c.ContentBytes += b.json
	}
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

// array reads an array (null or another value is skipped), calling elem
// at each element, which elem must consume.
func (s *scanner) array(elem func() error) error {
	if s.peek() != '[' {
		return s.skip()
	}
	s.i++
	if s.expect(']') {
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		more, err := s.more(']')
		if err != nil || !more {
			return err
		}
	}
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

// vector is one item of an embeddings response's data, as it is read:
// the elements of its embedding, and whether each began as a number.
type vector struct {
	dims       int
	notNumbers bool
}

// element counts an element of the embedding, whose first byte is b. A
// vector of strings, nulls or objects has a length but no dimensions:
// ["NaN", null, true, {}] is no vector of 4.
func (v *vector) element(b byte) {
	if b != '-' && (b < '0' || b > '9') {
		v.notNumbers = true
	}
	v.dims++
}

// add counts the vector in c: its dimensions where every vector so far
// had as many, -1 where they differ, NotNumbers once one was not numbers.
func (v *vector) add(c *Chunk) {
	switch {
	case c.Dimensions == NotNumbers:
	case v.notNumbers && v.dims > 0:
		c.Dimensions = NotNumbers
	case c.Vectors == 0:
		c.Dimensions = v.dims
	case v.dims != c.Dimensions && c.Dimensions != 0:
		c.Dimensions = -1
	}
	if v.dims == 0 {
		c.Dimensions = 0
	}
	c.Vectors++
}

// embeddings reads an embeddings response: its vectors counted and
// their dimensions, the prompt's usage, the model. A response with
// vectors is content.
func (s *scanner) embeddings(c *Chunk) error {
	var typ []byte
	err := s.members(func(k []byte) error {
		var err error
		switch string(k) {
		case "data":
			err = s.array(func() error {
				var v vector
				err := s.members(func(k []byte) error {
					if string(k) != "embedding" || s.peek() != '[' {
						return s.skip()
					}
					return s.array(func() error {
						v.element(s.peek())
						return s.skip()
					})
				})
				v.add(c)
				return err
			})
		case "model":
			c.Model, err = s.strOrSkip()
		case "usage":
			err = s.usage(c)
		case "error":
			err = s.errorMember(c)
		case "object":
			typ, err = s.strOrSkip()
		default:
			err = s.skip()
		}
		return err
	})
	if string(typ) == "error" {
		c.Error = true
	}
	c.Content = c.Vectors > 0
	return err
}

// responsesWhole reads a whole Responses API response.
func (s *scanner) responsesWhole(c *Chunk) error {
	status, incomplete, err := s.response(c, true)
	c.finish(status, incomplete)
	return err
}
