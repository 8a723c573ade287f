// Package workload produces the requests a run sends: their prompts, their
// intended lengths and their answer caps.
package workload

import (
	"math"
	"math/rand/v2"
	"strings"
	"sync"

	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/tokenizer"
)

// Source hands out the next request's prompt. Implementations are safe for
// concurrent use and deterministic for a given seed and call order.
type Source interface {
	Next() client.Prompt
}

// Lengths is a normal distribution of token counts, clipped at 1.
type Lengths struct {
	Mean, Stddev int
}

func (l Lengths) sample(rng *rand.Rand) int {
	if l.Stddev == 0 {
		return max(l.Mean, 1)
	}
	return max(int(math.Round(float64(l.Mean)+float64(l.Stddev)*rng.NormFloat64())), 1)
}

// Synthetic makes prompts of sampled lengths from a fixed vocabulary.
//
// Without a tokenizer, length is approximate: each word of the vocabulary
// is a common English word that BPE tokenizers (Llama, GPT, Qwen, Mistral)
// encode as one token with its leading space, so N words are close to N
// tokens. When the server reports usage.prompt_tokens, the result records
// both figures, which shows the real error for the model in use.
type Synthetic struct {
	Input, Output Lengths
	Stream        bool

	mu  sync.Mutex
	rng *rand.Rand
	// sizer, when set, makes prompts exactly Input tokens long for a
	// model's tokenizer.
	sizer *tokenizer.Sizer
}

// UseTokenizer sizes prompts in c's tokens from now on, exactly.
func (s *Synthetic) UseTokenizer(c tokenizer.Counter) error {
	sz, err := tokenizer.NewSizer(c, vocabulary)
	if err != nil {
		return err
	}
	s.sizer = sz
	return nil
}

// NewSynthetic returns a seeded synthetic source.
func NewSynthetic(in, out Lengths, stream bool, seed uint64) *Synthetic {
	return &Synthetic{Input: in, Output: out, Stream: stream, rng: rand.New(rand.NewPCG(seed, 0x70b3))}
}

func (s *Synthetic) Next() client.Prompt {
	s.mu.Lock()
	in, out := s.Input.sample(s.rng), s.Output.sample(s.rng)
	// Each prompt starts at a random word so prompts differ from the first
	// token on and a server's prefix cache does not flatter TTFT.
	seed := s.rng.Uint64()
	s.mu.Unlock()
	if s.sizer != nil {
		rng := rand.New(rand.NewPCG(seed, 0x9e37))
		if text, n, err := s.sizer.Text(rng.IntN, in); err == nil {
			return client.Prompt{Text: text, InputTokens: n, MaxTokens: out, Stream: s.Stream}
		}
		// A text the tokenizer cannot encode cannot happen with this
		// vocabulary; should it, the approximation below still sends one.
	}
	return client.Prompt{Text: Words(seed, in), InputTokens: in, MaxTokens: out, Stream: s.Stream}
}

// Words returns n vocabulary words drawn from a generator seeded by seed.
func Words(seed uint64, n int) string {
	rng := rand.New(rand.NewPCG(seed, 0x9e37))
	var b strings.Builder
	b.Grow(n * 5)
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(vocabulary[rng.IntN(len(vocabulary))])
	}
	return b.String()
}

// vocabulary holds frequent English words that are single tokens in
// common BPE vocabularies.
var vocabulary = strings.Fields(`the of and to in is that for it as with was on be by at this from or an
are not have but were which one all their there been has more when will would who so if out up about
into than them can only other new some time could these two may then first any like now over such our
what most even made after also did many before must through back years where much your way well down
should because each just those people how too little state good very make world still own see men work
long get here between both life being under never day same another know while last might us great old
year off come since against go came right used take three`)
