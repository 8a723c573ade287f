package probe

import (
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
)

// OSL says where a request's output length (OSL, and so its ITL) comes
// from.
type OSL uint8

const (
	// OSLAuto: the server's usage; without usage, the tokenizer's count of
	// the answer's text where the run has one (CountTokens), else the
	// content chunks. A server that sends several tokens in a chunk and no
	// usage gets the right ITL with a tokenizer, an overstated one without.
	OSLAuto OSL = iota
	// OSLUsage: the server's usage, else the content chunks.
	OSLUsage
	// OSLChunks: the content chunks, whatever the server reports.
	OSLChunks
	// OSLTokenizer: the tokenizer's count of the answer's text (reasoning
	// included), as AIPerf counts it.
	OSLTokenizer
)

// OSLModes names the modes as the configuration writes them.
var OSLModes = map[string]OSL{"auto": OSLAuto, "usage": OSLUsage, "chunks": OSLChunks, "tokenizer": OSLTokenizer}

// keepText reports whether the run needs its answers' text.
func (r *Run) keepText() bool {
	return r.CountTokens != nil && (r.OSL == OSLAuto || r.OSL == OSLTokenizer)
}

// settleOSL sets res's output length as the run's OSL mode says, after the
// request was measured: tokenizing an answer is never on its clock.
func (r *Run) settleOSL(res *result.Request) {
	if res.Outcome != result.Success || res.ContentChunks == 0 {
		return
	}
	switch r.OSL {
	case OSLChunks:
		res.OutputTokens, res.OutputSource = res.ContentChunks, result.SourceChunks
	case OSLAuto, OSLTokenizer:
		// A cut answer (past the bytes kept) keeps the count it had: the
		// server's usage, or its chunks.
		if res.Answer == nil || res.AnswerCut || r.CountTokens == nil || (r.OSL == OSLAuto && res.OutputSource == result.SourceUsage) {
			return
		}
		if n, err := r.CountTokens(openai.AnswerText(openai.API(res.API), res.Answer)); err == nil && n > 0 {
			res.OutputTokens, res.OutputSource = n, result.SourceTokenizer
		}
	}
}
