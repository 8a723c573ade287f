package workload

import (
	"strings"
	"testing"

	"github.com/tokenprobe/tokenprobe/probe/result"
)

// A triple's cold and warm prompts share their prefix and end in different
// questions; the fresh one's prefix is another of the same length; every
// triple's prefixes are new, in one source and across two made alike.
func TestPrefixCacheTriples(t *testing.T) {
	const words = 256
	prefixOf := func(text string) string {
		p, _, ok := strings.Cut(text, "\n\nQuestion: ")
		if !ok {
			t.Fatalf("no question after the prefix: %.80q", text)
		}
		return p
	}
	seen := map[string]bool{}
	for _, src := range []*PrefixCache{NewPrefixCache(words, Lengths{Mean: 8}, true, 1.25), NewPrefixCache(words, Lengths{Mean: 8}, true, 1.25)} {
		for range 5 {
			tr := src.NextTriple()
			cold, warm, fresh := tr[0], tr[1], tr[2]
			if cold.CachePhase != result.CacheCold || warm.CachePhase != result.CacheWarm || fresh.CachePhase != result.CacheFresh {
				t.Fatalf("phases %v %v %v", cold.CachePhase, warm.CachePhase, fresh.CachePhase)
			}
			if cold.CacheTriple != warm.CacheTriple || warm.CacheTriple != fresh.CacheTriple || cold.CacheTriple < 0 {
				t.Fatalf("triple ids %d %d %d", cold.CacheTriple, warm.CacheTriple, fresh.CacheTriple)
			}
			p := prefixOf(cold.Text)
			if n := len(strings.Fields(p)); n != words {
				t.Fatalf("a prefix of %d words, want %d", n, words)
			}
			if prefixOf(warm.Text) != p || warm.Text == cold.Text {
				t.Fatal("the warm prompt does not repeat the cold one's prefix with another question")
			}
			f := prefixOf(fresh.Text)
			if len(strings.Fields(f)) != words || f == p {
				t.Fatal("the fresh prompt's prefix is not a new one of the same length")
			}
			for _, x := range []string{p, f} {
				if seen[x] {
					t.Fatal("a prefix came twice: a cold request would be warm")
				}
				seen[x] = true
			}
			if cold.MaxTokens != 8 || !cold.Stream || cold.InputTokens != words+questionWords+1 {
				t.Errorf("prompt %+v", cold)
			}
		}
	}
}
