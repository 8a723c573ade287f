package sim

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// embeddingsAPI is POST /v1/embeddings, as vLLM serves it: an input or a
// list of them, answered with a vector each, never streamed.
var embeddingsAPI = &api{
	routes: []string{"/v1/embeddings"}, chat: true, vectors: true,
	read: func(req *request, _ *http.Request) string {
		if req.inputs = req.embeddingInputs(); req.inputs == 0 {
			return "input: no text to embed"
		}
		req.MaxTokens = 1
		return ""
	},
}

// embeddingInputs reads an embeddings request's input (a string or a
// list of them) into its messages, so that its prompt tokens count as a
// chat prompt's do, and returns how many inputs it holds.
func (r *request) embeddingInputs() int {
	var inputs []string
	var one string
	if json.Unmarshal(r.Input, &one) == nil {
		inputs = []string{one}
	} else if json.Unmarshal(r.Input, &inputs) != nil {
		return 0
	}
	r.Messages = r.Messages[:0]
	for _, in := range inputs {
		raw, _ := json.Marshal(in)
		r.Messages = append(r.Messages, chatMessage{Role: "user", Content: raw})
	}
	return len(inputs)
}

// writeEmbeddings answers n inputs with a vector of dims each, as vLLM's
// /v1/embeddings does; a wrong answer's fault breaks them: empty vectors
// (empty), one vector fewer (truncate), a last vector shorter (garbage).
func writeEmbeddings(w http.ResponseWriter, a streamArgs, n, dims int, wrong wrongAnswer) {
	count := n
	if wrong == answerTruncated {
		count = max(n-1, 0)
	}
	buf := make([]byte, 0, 64+count*(dims*8+48))
	buf = append(buf, `{"id":"embd-`...)
	buf = append(buf, a.id...)
	buf = append(buf, `","object":"list","created":0,"model":`...)
	buf = strconv.AppendQuote(buf, a.model)
	buf = append(buf, `,"data":[`...)
	for i := range count {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"index":`...)
		buf = strconv.AppendInt(buf, int64(i), 10)
		buf = append(buf, `,"object":"embedding","embedding":[`...)
		d := dims
		switch {
		case wrong == answerEmpty:
			d = 0
		case wrong == answerGarbage && i == count-1:
			d = dims / 2
		}
		for j := range d {
			if j > 0 {
				buf = append(buf, ',')
			}
			buf = strconv.AppendFloat(buf, float64((i*31+j*7)%97)/97-0.5, 'f', 6, 64)
		}
		buf = append(buf, "]}"...)
	}
	buf = append(buf, `],"usage":{"prompt_tokens":`...)
	buf = strconv.AppendInt(buf, int64(a.inTokens), 10)
	buf = append(buf, `,"total_tokens":`...)
	buf = strconv.AppendInt(buf, int64(a.inTokens), 10)
	buf = append(buf, "}}\n"...)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(buf)
}
