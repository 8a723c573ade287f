package workload

import (
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/result"
)

// PrefixCache makes a prefix-cache probe's requests, three at a time: a
// long prefix never sent before (cold), the same prefix again at once
// (warm), then another new prefix of the same length (fresh). The warm
// request's TTFT against its two neighbours' is what a server's prefix
// cache saves; the fresh one, sent after it, cancels a drift in the
// server's speed between the three.
//
// Each prompt is its prefix and a short question; the warm one's question
// differs from the cold one's, so that only the prefix repeats and a
// cache of whole answers (a gateway's) cannot answer it. Prefixes are new
// in every run and every process, whatever the workload's seed: one sent
// in an earlier run would be warm where the probe means it cold.
type PrefixCache struct {
	// PrefixTokens is the prefix's length in vocabulary words, each one
	// token in common BPE vocabularies (Synthetic's approximation).
	PrefixTokens int
	Output       Lengths
	Stream       bool
	// MinSpeedup is the verdict's bar (stats.PrefixCache): warm at least
	// this many times faster than uncached for the cache to work.
	MinSpeedup float64

	mu  sync.Mutex
	rng *rand.Rand
}

// NewPrefixCache returns a source of triples whose prefixes are drawn
// from a generator seeded from the system's randomness.
func NewPrefixCache(prefixTokens int, out Lengths, stream bool, minSpeedup float64) *PrefixCache {
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails on Linux (crypto/rand)
	seed := rand.NewPCG(binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:]))
	return &PrefixCache{PrefixTokens: prefixTokens, Output: out, Stream: stream, MinSpeedup: minSpeedup, rng: rand.New(seed)}
}

// questionWords is the length of the question after the prefix.
const questionWords = 12

// NextTriple is the next triple's prompts: cold, warm and fresh, in the
// order they are sent. Their CacheTriple is the same random number, so
// that the triples of shards merged later stay apart.
func (c *PrefixCache) NextTriple() [3]client.Prompt {
	c.mu.Lock()
	shared, other := c.rng.Uint64(), c.rng.Uint64()
	q := [3]uint64{c.rng.Uint64(), c.rng.Uint64(), c.rng.Uint64()}
	out := [3]int{c.Output.sample(c.rng), c.Output.sample(c.rng), c.Output.sample(c.rng)}
	id := int(c.rng.Int64N(1 << 53)) // exact in JSON's numbers
	c.mu.Unlock()
	prefix, fresh := Words(shared, c.PrefixTokens), Words(other, c.PrefixTokens)
	prompt := func(i int, prefix string, phase result.CachePhase) client.Prompt {
		text := fmt.Sprintf("%s\n\nQuestion: %s?", prefix, Words(q[i], questionWords))
		return client.Prompt{Text: text, InputTokens: c.PrefixTokens + questionWords + 1, MaxTokens: out[i], Stream: c.Stream,
			CachePhase: phase, CacheTriple: id}
	}
	return [3]client.Prompt{prompt(0, prefix, result.CacheCold), prompt(1, prefix, result.CacheWarm), prompt(2, fresh, result.CacheFresh)}
}
