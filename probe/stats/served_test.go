package stats

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
)

// The models the answers name are counted, the most frequent first; a
// server naming a new model in every answer keeps eight names and counts
// the rest; a name is cut and its control characters escaped; errors name
// no model.
func TestServedModelsAreCountedWithinABound(t *testing.T) {
	a := NewAggregator("p", "e", "asked", 1, 0)
	add := func(outcome result.Outcome, name string) {
		a.Add(&result.Request{Outcome: outcome, Model: "asked", ServedModel: name}, slo.Verdict{})
	}
	for range 3 {
		add(result.Success, "asked")
	}
	add(result.WrongAnswer, "fallback\x1b[2J")
	add(result.Error, "from-an-error")
	add(result.Success, strings.Repeat("x", 300))
	for i := range 100 {
		add(result.Success, fmt.Sprintf("per-request-%d", i))
	}
	s := a.Summary()
	if len(s.ServedModels) != maxServedNames || s.ServedOther != 100-(maxServedNames-3) {
		t.Fatalf("%d names and %d others, want %d and %d", len(s.ServedModels), s.ServedOther, maxServedNames, 100-(maxServedNames-3))
	}
	if got := s.ServedModels[0]; got != (ServedModel{Name: "asked", Requests: 3}) {
		t.Fatalf("first %+v, want the most frequent", got)
	}
	for _, m := range s.ServedModels {
		switch {
		case m.Name == "from-an-error":
			t.Fatalf("an error's model counted: %+v", s.ServedModels)
		case strings.ContainsRune(m.Name, 0x1b):
			t.Fatalf("a control character kept: %q", m.Name)
		case len([]rune(m.Name)) > maxServedName+1: // and the mark of the cut
			t.Fatalf("a name of %d characters kept", len([]rune(m.Name)))
		}
	}
}
