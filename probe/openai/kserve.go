package openai

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
)

// KServeGenerate is KServe v2's generate extension as Triton Inference
// Server serves it, over its TensorRT-LLM and vLLM backends
// (docs/protocol/extension_generate.md in triton-inference-server/server):
// POST v2/models/{model}/generate answers one JSON object,
// .../generate_stream the same objects as server-sent events, with no
// end marker: the stream ends with the body. The base URL is the
// server's root (a /v1 after it is dropped).
//
// Request: {"text_input", "parameters": {"max_tokens", "stream"}}, extra
// fields beside them (the generate extension passes them to the model as
// parameters or input tensors: TensorRT-LLM's ensemble takes max_tokens
// as a tensor, so a profile for it sets extra max_tokens too).
//
// Response: {"model_name", "model_version", "text_output"}, and the
// model's own outputs beside them; those read are the vLLM backend's
// optional finish_reason and num_output_tokens (vllm_backend's
// docs/additional_outputs.md: the output tokens of each response, which
// add up over a stream; asked for with return_num_output_tokens: true).
// No count of the prompt's tokens is documented: its length is the
// intended one, or the tokenizer's. An error is {"error": "..."},
// mid-stream too, under a 200 already sent.
const KServeGenerate API = "kserve_generate"

var kserveGenerate = &Protocol{
	API: KServeGenerate, Operation: "text_completion", Provider: "kserve",
	URL: func(base, model string, stream bool) string {
		path := "/v2/models/" + url.PathEscape(model) + "/generate"
		if stream {
			path += "_stream"
		}
		// The generate paths start at the server's root: a base URL that
		// ends in /v1, as the other APIs' do, has it dropped.
		b, query, _ := strings.Cut(base, "?")
		b = strings.TrimSuffix(strings.TrimSuffix(b, "/"), "/v1")
		if query != "" {
			b += "?" + query
		}
		return below(b, path)
	},
	Body:      kserveBody,
	Event:     kserveRead,
	Whole:     kserveRead,
	Answer:    kserveAnswer,
	EndsAtEOF: true,
	CountsAdd: true,
}

func kserveBody(b *RequestBody) ([]byte, error) {
	out := append(make([]byte, 0, len(b.Prompt)+128), `{"text_input":`...)
	out = b.appendPrompt(out, b.historyText())
	out = append(out, `,"parameters":{`...)
	if b.MaxTokens > 0 {
		out = append(out, `"max_tokens":`...)
		out = strconv.AppendInt(out, int64(b.MaxTokens), 10)
		out = append(out, ',')
	}
	out = append(out, `"stream":`...)
	out = strconv.AppendBool(out, b.Stream)
	out = append(out, '}')
	return appendExtra(out, b.Extra, "text_input", "parameters")
}

// kserveRead reads one generate response, streamed or whole.
func kserveRead(data []byte, c *Chunk) error {
	s := reading(data, c)
	return s.end(s.members(func(k []byte) error {
		var err error
		var n int
		switch string(k) {
		case "text_output":
			n, err = s.textLen()
			c.Content = c.Content || n > 0
			c.ContentBytes += n
		case "model_name":
			c.Model, err = s.strOrSkip()
		case "error":
			err = s.errorMember(c)
		case "finish_reason":
			// A string, or a list of one where the backend sends its
			// output tensor as it is.
			if s.peek() == '[' {
				err = s.array(func() error { return s.finishReason(c) })
			} else {
				err = s.finishReason(c)
			}
		case "num_output_tokens":
			c.CompletionTokens, err = s.int()
			c.Usage = true
		default:
			err = s.skip()
		}
		return err
	}))
}

// finishReason reads a finish reason string, null or empty meaning none.
// A finish reason ends the answer, and a generate stream, which has no
// end marker of its own: a server that sends one and leaves the stream
// open ended the request as a timeout, its answer lost.
func (s *scanner) finishReason(c *Chunk) error {
	r, err := s.strOrSkip()
	if len(r) > 0 && string(r) != "None" {
		c.Finished, c.FinishReason, c.End = true, r, true
	}
	return err
}

// kserveAnswer adds a response's text_output.
func kserveAnswer(raw []byte, a *answerBuilder) {
	var e struct {
		TextOutput string `json:"text_output"`
	}
	if json.Unmarshal(raw, &e) == nil {
		a.text.WriteString(e.TextOutput)
	}
}
