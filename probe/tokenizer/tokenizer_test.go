package tokenizer

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/tiny-bpe.json is a small BPE tokenizer.json written for these
// tests (made by hand, as the Hugging Face hub is out of reach here):
// letters are tokens and merges make twenty common words single tokens,
// so "because" is six tokens (be-c-a-u-s-e) where the one-word-one-token
// approximation says one.
func load(t *testing.T) *HF {
	t.Helper()
	h, err := Load("testdata/tiny-bpe.json")
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestCount(t *testing.T) {
	h := load(t)
	for text, want := range map[string]int{"the": 1, "the of and": 3, "because": 6, "The because": 7, "": 0} {
		if got, err := h.Count(text); err != nil || got != want {
			t.Errorf("Count(%q) = %d, %v; want %d", text, got, err, want)
		}
	}
}

func TestSizerHitsTheCountExactly(t *testing.T) {
	h := load(t)
	vocab := strings.Fields("the of and to because people through should between another world little")
	s, err := NewSizer(h, vocab)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(n int) int { return rng.IntN(n) }
	words, tokens := 0, 0
	for _, n := range []int{1, 2, 7, 50, 333, 1000} {
		text, got, err := s.Text(pick, n)
		if err != nil {
			t.Fatal(err)
		}
		counted, _ := h.Count(text)
		if got != n || counted != n {
			t.Errorf("Text(%d): reported %d, counted %d tokens", n, got, counted)
		}
		words += len(strings.Fields(text))
		tokens += n
	}
	// The point of a tokenizer: with multi-token words in the vocabulary,
	// words and tokens differ, so the approximation would be wrong.
	if words >= tokens {
		t.Errorf("%d words for %d tokens: the test vocabulary should need fewer words than tokens", words, tokens)
	}
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"garbage.json": "{not json", "empty.json": "{}"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("Load(%s) = %v, want an error naming the file", name, err)
		}
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("a missing file: %v", err)
	}
}
