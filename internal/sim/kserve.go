package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// kserveAPI is KServe v2's generate extension as Triton Inference Server
// serves it (docs/protocol/extension_generate.md in
// triton-inference-server/server): the model in the path, text_input,
// max_tokens in parameters (or, as TensorRT-LLM's ensemble takes it, an
// input beside them); /generate answers one object, /generate_stream the
// same objects as events, each with the text since the last, and no end
// marker. Asked for return_num_output_tokens (the vLLM backend's
// optional output), each object carries its own count of tokens.
var kserveAPI = &api{
	routes: []string{"/v2/models/{model}/generate", "/v2/models/{model}/generate_stream"},
	read:   kserveRead,
	text: func(buf []byte, a streamArgs, at int, text string) []byte {
		buf = kserveObject(append(buf, "data: "...), a, text, min(a.maxTokens-at, a.chunkTokens))
		return append(buf, "\n\n"...)
	},
	end: func(buf []byte, _ streamArgs) []byte { return buf },
	whole: func(w http.ResponseWriter, a streamArgs, text string) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(kserveObject(nil, a, text, a.maxTokens))
	},
}

func kserveRead(req *request, r *http.Request) string {
	var k struct {
		TextInput  *string `json:"text_input"`
		Parameters struct {
			MaxTokens int  `json:"max_tokens"`
			Stream    bool `json:"stream"`
		} `json:"parameters"`
		ReturnNumOutputTokens bool `json:"return_num_output_tokens"`
	}
	if err := json.Unmarshal(req.raw, &k); err != nil || k.TextInput == nil {
		return "text_input: a string is required"
	}
	req.Prompt, _ = json.Marshal(*k.TextInput)
	req.Model = r.PathValue("model")
	if k.Parameters.MaxTokens > 0 {
		req.MaxTokens = k.Parameters.MaxTokens
	}
	req.Stream = strings.HasSuffix(r.URL.Path, "_stream")
	req.countTokens = k.ReturnNumOutputTokens
	return ""
}

// kserveObject appends one generate response: text and, when asked for,
// the tokens it holds.
func kserveObject(out []byte, a streamArgs, text string, tokens int) []byte {
	out = fmt.Appendf(out, `{"model_name":%s,"model_version":"1","text_output":%s`, quoted(a.model), quoted(text))
	if a.countTokens {
		out = fmt.Appendf(out, `,"num_output_tokens":%d`, tokens)
	}
	return append(out, '}')
}
