package openai

// The Anthropic Messages API and OpenAI's Responses API stream typed
// events, not chat chunks: each event's data is an object whose "type"
// says what it carries. Their readers (messages.go, responses.go) fill
// the same Chunk, with the same rules (docs/MEASUREMENT.md has a table
// per API), and allocate nothing; what they share is here.

// Finish reasons in chat's words, whatever the API said.
var (
	reasonStop      = []byte("stop")
	reasonLength    = []byte("length")
	reasonToolCalls = []byte("tool_calls")
)

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
