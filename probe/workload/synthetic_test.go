package workload

import (
	"math"

	"github.com/tokenprobe/tokenprobe/probe/client"
	"strings"
	"testing"
)

func TestSyntheticLengths(t *testing.T) {
	s := NewSynthetic(Lengths{Mean: 200, Stddev: 20}, Lengths{Mean: 50}, true, 1)
	const n = 2000
	var sum, sumSq float64
	seen := map[string]bool{}
	for range n {
		p := s.Next()
		if got := len(strings.Fields(p.Text)); got != p.InputTokens {
			t.Fatalf("prompt has %d words, says %d tokens", got, p.InputTokens)
		}
		if p.MaxTokens != 50 || !p.Stream {
			t.Fatalf("max_tokens %d stream %v", p.MaxTokens, p.Stream)
		}
		x := float64(p.InputTokens)
		sum += x
		sumSq += x * x
		seen[p.Text[:40]] = true
	}
	mean := sum / n
	std := math.Sqrt(sumSq/n - mean*mean)
	if math.Abs(mean-200) > 2 || math.Abs(std-20) > 2 {
		t.Errorf("input lengths mean %.1f std %.1f, want 200 and 20", mean, std)
	}
	if len(seen) < n*99/100 {
		t.Errorf("only %d distinct prompt openings in %d: prompts share prefixes", len(seen), n)
	}
}

func TestSyntheticIsSeeded(t *testing.T) {
	a := NewSynthetic(Lengths{Mean: 30, Stddev: 5}, Lengths{Mean: 10, Stddev: 3}, true, 42)
	b := NewSynthetic(Lengths{Mean: 30, Stddev: 5}, Lengths{Mean: 10, Stddev: 3}, true, 42)
	c := NewSynthetic(Lengths{Mean: 30, Stddev: 5}, Lengths{Mean: 10, Stddev: 3}, true, 43)
	same, differs := true, false
	for range 50 {
		pa, pb, pc := a.Next(), b.Next(), c.Next()
		eq := func(x, y client.Prompt) bool {
			return x.Text == y.Text && x.InputTokens == y.InputTokens && x.MaxTokens == y.MaxTokens
		}
		same = same && eq(pa, pb)
		differs = differs || !eq(pa, pc)
	}
	if !same || !differs {
		t.Fatalf("same seed same prompts: %v; other seed differs: %v", same, differs)
	}
}

func TestLengthsNeverBelowOne(t *testing.T) {
	s := NewSynthetic(Lengths{Mean: 1, Stddev: 50}, Lengths{Mean: 1, Stddev: 50}, false, 3)
	for range 500 {
		if p := s.Next(); p.InputTokens < 1 || p.MaxTokens < 1 {
			t.Fatalf("length below 1: %+v", p)
		}
	}
}
