// Package tokenizer sizes prompts in a model's own tokens. It loads a
// Hugging Face tokenizer.json with a pure-Go implementation
// (github.com/sugarme/tokenizer), so that a synthetic prompt of N tokens is
// N tokens to the model, not N words.
package tokenizer

import (
	"fmt"
	"os"
	"strings"
	"sync"

	hf "github.com/sugarme/tokenizer"
	"github.com/sugarme/tokenizer/pretrained"
)

// Counter counts the tokens of a text as a model's tokenizer does.
type Counter interface {
	Count(text string) (int, error)
}

// HF is a Hugging Face tokenizer.json.
type HF struct {
	mu sync.Mutex // the library keeps caches that are not safe to share
	tk *hf.Tokenizer
}

// Load reads a tokenizer.json.
func Load(path string) (_ *HF, err error) {
	defer func() {
		// The library panics on some malformed files instead of failing.
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: not a tokenizer.json this library can load: %v", path, r)
		}
	}()
	tk, err := pretrained.FromFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	h := &HF{tk: tk}
	switch n, err := h.Count("the"); {
	case err != nil:
		return nil, fmt.Errorf("%s: the tokenizer does not encode plain text: %w", path, err)
	case n < 1:
		return nil, fmt.Errorf("%s: the tokenizer does not encode plain text (%d tokens)", path, n)
	}
	return h, nil
}

// Count returns the number of tokens of text without special tokens: what
// the text adds to a prompt (the chat template's tokens are the server's).
func (h *HF) Count(text string) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	enc, err := h.tk.EncodeSingle(text, false)
	if err != nil {
		return 0, err
	}
	return len(enc.Ids), nil
}

// Sizer builds texts of an exact token count from a vocabulary of words.
type Sizer struct {
	c     Counter
	words []string
	cost  []int // tokens of " "+word, as it appears after the first word
	ones  []int // indexes of one-token words, for the last tokens
}

// NewSizer measures every word of vocabulary with c.
func NewSizer(c Counter, vocabulary []string) (*Sizer, error) {
	s := &Sizer{c: c, words: vocabulary}
	// A word's cost is what it adds after another word, leading space
	// included, as it will appear in a prompt.
	base, err := c.Count("the")
	if err != nil {
		return nil, err
	}
	for i, w := range vocabulary {
		n, err := c.Count("the " + w)
		if err != nil {
			return nil, err
		}
		s.cost = append(s.cost, max(n-base, 1))
		if n-base == 1 {
			s.ones = append(s.ones, i)
		}
	}
	if len(s.ones) == 0 {
		return nil, fmt.Errorf("no word of the vocabulary is one token for this tokenizer")
	}
	return s, nil
}

// Text returns a text of n tokens of words chosen by pick (given a count,
// it returns an index below it), and its token count as the tokenizer
// counts the whole text.
// The words' costs make a first draft; counting the whole text and adding
// or removing one-token words corrects what joining them changed.
func (s *Sizer) Text(pick func(int) int, n int) (string, int, error) {
	var words []string
	total := 0
	for total < n {
		i := pick(len(s.words))
		if s.cost[i] > n-total {
			i = s.ones[pick(len(s.ones))]
		}
		words = append(words, s.words[i])
		total += s.cost[i]
	}
	for range 8 {
		text := strings.Join(words, " ")
		got, err := s.c.Count(text)
		if err != nil {
			return "", 0, err
		}
		switch {
		case got == n || len(words) == 0:
			return text, got, nil
		case got > n:
			words = words[:len(words)-1]
		default:
			for range n - got {
				words = append(words, s.words[s.ones[pick(len(s.ones))]])
			}
		}
	}
	text := strings.Join(words, " ")
	got, err := s.c.Count(text)
	return text, got, err
}

var (
	sharedMu sync.Mutex
	shared   = map[string]sharedEntry{}
)

type sharedEntry struct {
	stamp string
	h     *HF
}

// Shared loads path once and hands the same tokenizer to every caller
// until the file changes: a daemon's runs and reloads do not parse a
// multi-megabyte tokenizer.json each time.
func Shared(path string) (*HF, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	stamp := fmt.Sprintf("%d/%d", fi.Size(), fi.ModTime().UnixNano())
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if e, ok := shared[path]; ok && e.stamp == stamp {
		return e.h, nil
	}
	h, err := Load(path)
	if err != nil {
		return nil, err
	}
	shared[path] = sharedEntry{stamp: stamp, h: h}
	return h, nil
}
