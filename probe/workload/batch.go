package workload

import (
	"strings"

	"github.com/tokenprobe/tokenprobe/probe/client"
)

// Batched draws N prompts for each request, for an embeddings batch: the
// first is the request's prompt, the others its Inputs; the intended
// input length is theirs together.
type Batched struct {
	Source
	N int
}

func (b Batched) Next() client.Prompt {
	p := b.Source.Next()
	for range b.N - 1 {
		q := b.Source.Next()
		text := q.Text
		if q.Parts != nil {
			text = strings.Join(q.Parts, " ")
		}
		p.Inputs = append(p.Inputs, text)
		p.InputTokens += q.InputTokens
	}
	return p
}
