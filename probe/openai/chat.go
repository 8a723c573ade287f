package openai

import "encoding/json"

// Chat is OpenAI's Chat Completions API (POST /chat/completions), which
// every OpenAI-compatible server speaks: streamed as chunks of choices
// with deltas, ended by [DONE].
const Chat API = "chat"

var chat = &Protocol{API: Chat, Operation: "chat", Provider: "openai", URL: at("/chat/completions"), Root: "/v1",
	Body: chatBody, Event: ParseChunk, Whole: ParseChunk, Answer: chatAnswer,
	Greedy:   map[string]any{"temperature": 0, "top_p": 1, "seed": 1},
	Logprobs: map[string]any{"logprobs": true, "top_logprobs": 1}}

func chatBody(b *RequestBody) ([]byte, error) {
	out := append(b.open(), `,"messages":[`...)
	out = append(b.appendMessages(out), ']')
	return b.close(out, "max_tokens", b.MaxTokens, true, b.Extra)
}

// ParseChunk reads one `data:` payload into c. Unknown members are skipped,
// so servers that add their own fields (timings, logprobs) parse the same.
func ParseChunk(data []byte, c *Chunk) error {
	*c = Chunk{}
	s := scanner{b: data}
	if err := s.top(c); err != nil {
		return err
	}
	s.ws()
	if s.i != len(s.b) {
		return ErrMalformed
	}
	return nil
}

// top reads a chunk, or a whole response: its choices, usage, model and
// whether it is an error (an `error` member, or "object": "error" as vLLM
// sends one). The per-chunk readers walk their objects with first and
// next, not members: a closure called per key cost 10% of a chunk's
// parse (docs/BENCHMARKS.md).
func (s *scanner) top(c *Chunk) error {
	if s.peek() != '{' {
		return ErrMalformed
	}
	var err error
	for k := s.first(&err); k != nil; k = s.next(&err) {
		switch string(k) {
		case "choices":
			err = s.choices(c)
		case "usage":
			err = s.usage(c)
		case "error":
			err = s.errorMember(c)
		case "model":
			c.Model, err = s.strOrSkip()
		case "object":
			var v []byte
			if v, err = s.strOrSkip(); string(v) == "error" {
				c.Error = true
			}
		default:
			err = s.skip()
		}
	}
	return err
}

// choices reads the choices array (null, or another shape, is skipped).
func (s *scanner) choices(c *Chunk) error {
	var err error
	for ok := s.firstElem(&err); ok; ok = s.nextElem(&err) {
		err = s.choice(c)
	}
	return err
}

// choice reads one choice: its delta or message, completions' text, its
// finish reason (any value but null finishes it; a string is kept).
func (s *scanner) choice(c *Chunk) error {
	var err error
	for k := s.first(&err); k != nil; k = s.next(&err) {
		switch string(k) {
		case "delta", "message":
			err = s.delta(c)
		case "text":
			var n int
			n, err = s.textLen()
			c.text(n)
		case "finish_reason":
			if !s.isNull() {
				c.Finished = true
				c.FinishReason, err = s.strOrSkip()
			}
		default:
			err = s.skip()
		}
	}
	return err
}

// delta reads a delta or message: its content, reasoning
// (reasoning_content, or reasoning as some servers name it) and tool
// calls.
func (s *scanner) delta(c *Chunk) error {
	var err error
	for k := s.first(&err); k != nil; k = s.next(&err) {
		var n int
		switch string(k) {
		case "content":
			n, err = s.textLen()
			c.text(n)
		case "reasoning_content", "reasoning":
			n, err = s.textLen()
			if n > 0 {
				c.Reasoning = true
				c.ContentBytes += n
			}
		case "tool_calls":
			err = s.toolCalls(c)
		default:
			err = s.skip()
		}
	}
	return err
}

// toolCalls reads `tool_calls`: an array of calls, each with a function
// whose name and arguments (a string, streamed in pieces) are output.
func (s *scanner) toolCalls(c *Chunk) error {
	var err error
	for ok := s.firstElem(&err); ok; ok = s.nextElem(&err) {
		err = s.members(func(k []byte) error {
			if string(k) != "function" {
				return s.skip()
			}
			return s.members(func(k []byte) error {
				switch string(k) {
				case "name", "arguments":
					n, err := s.textLen()
					if n > 0 {
						c.Content, c.ToolCall = true, true
						if string(k) == "arguments" {
							c.ContentBytes += n
						}
					}
					return err
				}
				return s.skip()
			})
		})
	}
	return err
}

// usage reads {"prompt_tokens", "completion_tokens"} and the prompt
// cache's part.
func (s *scanner) usage(c *Chunk) error {
	var err error
	for k := s.first(&err); k != nil; k = s.next(&err) {
		switch string(k) {
		case "prompt_tokens":
			c.PromptTokens, err = s.int()
			c.Usage = true
		case "completion_tokens":
			c.CompletionTokens, err = s.int()
			c.Usage = true
		case "prompt_tokens_details":
			err = s.cached(c)
		default:
			err = s.skip()
		}
	}
	return err
}

// text counts n bytes of output text: content where there is any.
func (c *Chunk) text(n int) {
	if n > 0 {
		c.Content = true
		c.ContentBytes += n
	}
}

// cached reads a {"cached_tokens": N} details object (or null).
func (s *scanner) cached(c *Chunk) error {
	if s.peek() != '{' {
		return s.skip()
	}
	return s.members(func(k []byte) error {
		if string(k) != "cached_tokens" {
			return s.skip()
		}
		var err error
		c.CachedTokens, err = s.int()
		return err
	})
}

type chatCall struct {
	Index    *int `json:"index"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatMessage struct {
	Content          string     `json:"content"`
	ReasoningContent string     `json:"reasoning_content"`
	Reasoning        string     `json:"reasoning"`
	ToolCalls        []chatCall `json:"tool_calls"`
}

// chatAnswer adds a chat or completions chunk, or a whole response: its
// deltas' or message's text and reasoning, completions' text, tool
// calls, a streamed call's pieces joined by their index, and the
// tokens' log-probabilities in either shape: chat's logprobs.content
// (which llama-server also sends for completions) or the legacy
// completions' logprobs.token_logprobs (vLLM's).
func chatAnswer(raw []byte, a *answerBuilder) {
	var e struct {
		Choices []struct {
			Text     string      `json:"text"`
			Delta    chatMessage `json:"delta"`
			Message  chatMessage `json:"message"`
			Logprobs *struct {
				Content []struct {
					Logprob *float64 `json:"logprob"`
				} `json:"content"`
				TokenLogprobs []*float64 `json:"token_logprobs"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return
	}
	for _, ch := range e.Choices {
		for _, m := range []*chatMessage{&ch.Delta, &ch.Message} {
			a.reasoning.WriteString(m.ReasoningContent)
			a.reasoning.WriteString(m.Reasoning)
			a.text.WriteString(m.Content)
			for _, tc := range m.ToolCalls {
				var c *ToolCall
				switch {
				case tc.Index != nil:
					c = a.call(tc.Index, false)
				case m == &ch.Delta && tc.Function.Name == "" && len(a.calls) > 0:
					c = &a.calls[len(a.calls)-1] // a piece of the call before, unnumbered
				default:
					c = a.call(nil, true)
				}
				c.Name += tc.Function.Name
				c.Arguments += tc.Function.Arguments
			}
		}
		a.text.WriteString(ch.Text)
		if lp := ch.Logprobs; lp != nil {
			for _, c := range lp.Content {
				a.logprob(c.Logprob)
			}
			for _, v := range lp.TokenLogprobs {
				a.logprob(v)
			}
		}
	}
}
