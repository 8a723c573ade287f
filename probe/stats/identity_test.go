package stats

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// memStore is an IdentityStore in memory, failing as told.
type memStore struct {
	ref              *IdentityReference
	loadErr, saveErr error
	saves            int
}

func (m *memStore) Load() (*IdentityReference, error) { return m.ref, m.loadErr }
func (m *memStore) Save(r *IdentityReference) error {
	m.saves++
	if m.saveErr != nil {
		return m.saveErr
	}
	m.ref = r
	return nil
}
func (m *memStore) Forget() error { m.ref = nil; return nil }

var testPrompts = []string{"p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9", "p10", "p11", "p12", "p13", "p14", "p15", "p16"}

// run answers every prompt with answer(i) and finishes.
func identityRunOf(t *IdentityTracker, answer func(i int) string, complete bool) *ModelIdentity {
	r := t.Begin()
	for i := range t.Prompts {
		if a := answer(i); a != "\x00" {
			r.Answer(i, a)
		}
	}
	return r.Finish(complete)
}

// The reference is learned from the first complete runs, then every run
// is judged against it: the same answers are the same model, other
// answers a changed one, half of each not enough evidence.
func TestIdentityLearnsThenJudges(t *testing.T) {
	store := &memStore{}
	tr := NewIdentityTracker(testPrompts, 2, 0.5, store, nil)
	same := func(i int) string { return fmt.Sprintf("answer %d", i) }
	if mi := identityRunOf(tr, same, false); mi.Verdict != Learning || mi.LearnedRuns != 0 || !strings.Contains(mi.Why, "every prompt") {
		t.Fatalf("an incomplete run: %+v, want it to teach nothing", mi)
	}
	for k := 1; k <= 2; k++ {
		if mi := identityRunOf(tr, same, true); mi.Verdict != Learning || mi.LearnedRuns != k {
			t.Fatalf("learning run %d: %+v", k, mi)
		}
	}
	if store.saves != 2 || store.ref == nil || store.ref.Runs != 2 {
		t.Fatalf("saved %d times, %+v", store.saves, store.ref)
	}
	if mi := identityRunOf(tr, same, true); mi.Verdict != SameModel || mi.Agreeing != 16 || mi.Interval.Low < 0.8 || mi.Moved != nil {
		t.Fatalf("the same answers: %+v", mi)
	}
	other := func(i int) string { return fmt.Sprintf("answer %d", i) + strings.Repeat("!", i%3) }
	mi := identityRunOf(tr, func(i int) string { return "something else " + other(i) }, true)
	if mi.Verdict != ModelChanged || mi.Agreeing != 0 || mi.Interval.High >= 0.5 || mi.Moved == nil || mi.Moved.Shared != 0 {
		t.Fatalf("other answers: %+v", mi)
	}
	half := identityRunOf(tr, func(i int) string {
		if i%2 == 0 {
			return same(i)
		}
		return "x"
	}, true)
	if half.Verdict != Undecided || half.Agreeing != 8 {
		t.Fatalf("half the answers: %+v", half)
	}
	// The moved prompt is the one sharing least with its reference.
	moved := identityRunOf(tr, func(i int) string {
		switch i {
		case 3:
			return "answer 3 and more" // shares "answer 3"
		case 5:
			return "zz" // shares nothing
		}
		return same(i)
	}, true)
	if moved.Moved == nil || moved.Moved.Index != 5 || moved.Moved.Prompt != "p6" || moved.Verdict != SameModel {
		t.Fatalf("moved: %+v (%s)", moved.Moved, moved.Verdict)
	}
}

// A prompt answered more ways than a reference keeps while learning is
// left out, not grown; a reference of other prompts is learned anew; a
// stored reference that cannot be read or is malformed is learned anew,
// saying so; a pinned one is never learned nor forgotten.
func TestIdentityReferenceBounds(t *testing.T) {
	tr := NewIdentityTracker(testPrompts, MaxIdentityAnswers+2, 0.5, nil, nil)
	for k := range MaxIdentityAnswers + 2 {
		identityRunOf(tr, func(i int) string {
			if i == 0 {
				return fmt.Sprintf("varies %d", k)
			}
			return fmt.Sprintf("answer %d", i)
		}, true)
	}
	mi := identityRunOf(tr, func(i int) string { return fmt.Sprintf("answer %d", i) }, true)
	if mi.Unstable != 1 || mi.Prompts != 15 || mi.Verdict != SameModel {
		t.Fatalf("an unstable prompt: %+v", mi)
	}
	if ref := tr.Reference(); ref.Answers[0] != nil || !ref.Unstable[0] || ref.Check(16) != nil {
		t.Fatalf("reference %+v: %v", ref, ref.Check(16))
	}
	lt := NewIdentityTracker(testPrompts, 1, 0.5, nil, nil)
	identityRunOf(lt, func(int) string { return strings.Repeat("é", 2000) }, true)
	if a := lt.Reference().Answers[0][0]; len(a) > MaxIdentityAnswerBytes || len(a) < MaxIdentityAnswerBytes-1 || !utf8.ValidString(a) {
		t.Fatalf("a 4,000-byte answer kept as %d bytes (valid UTF-8: %v)", len(a), utf8.ValidString(a))
	}

	broken := &memStore{loadErr: errors.New("disk on fire")}
	tr = NewIdentityTracker(testPrompts, 1, 0.5, broken, nil)
	if mi := identityRunOf(tr, func(int) string { return "a" }, true); mi.Verdict != Learning || !strings.Contains(mi.Why, "disk on fire") {
		t.Fatalf("a store that cannot be read: %+v", mi)
	}
	bad := &memStore{ref: &IdentityReference{Prompts: []string{"x"}, Answers: [][]string{{"a"}}, Unstable: []bool{false}, Runs: 1}}
	tr = NewIdentityTracker(testPrompts, 1, 0.5, bad, nil)
	if mi := identityRunOf(tr, func(int) string { return "a" }, true); mi.Verdict != Learning || !strings.Contains(mi.Why, "not of these prompts") {
		t.Fatalf("a stored reference of other prompts: %+v", mi)
	}

	pinnedRef := tr.Reference()
	pinned := NewIdentityTracker(testPrompts, 3, 0.5, nil, pinnedRef)
	if mi := identityRunOf(pinned, func(int) string { return "b" }, true); mi.Verdict != ModelChanged || !mi.Pinned {
		t.Fatalf("a pinned reference judges from the first run: %+v", mi)
	}
	if err := pinned.Forget(); err == nil {
		t.Fatal("a pinned reference was forgotten")
	}
	if err := tr.Forget(); err != nil || tr.Reference() != nil {
		t.Fatalf("forget: %v", err)
	}
}

// Check refuses references outside the bounds they are written within.
func TestIdentityReferenceCheck(t *testing.T) {
	ok := func() *IdentityReference {
		return &IdentityReference{Prompts: []string{"a", "b"}, Answers: [][]string{{"x"}, nil}, Unstable: []bool{false, true}, Runs: 3}
	}
	if err := ok().Check(2); err != nil {
		t.Fatal(err)
	}
	for name, spoil := range map[string]func(*IdentityReference){
		"other count":       func(r *IdentityReference) { r.Prompts = append(r.Prompts, "c") },
		"no runs":           func(r *IdentityReference) { r.Runs = 0 },
		"too many answers":  func(r *IdentityReference) { r.Answers[0] = []string{"1", "2", "3", "4", "5"} },
		"answer too long":   func(r *IdentityReference) { r.Answers[0] = []string{strings.Repeat("a", MaxIdentityAnswerBytes+1)} },
		"unstable answered": func(r *IdentityReference) { r.Answers[1] = []string{"y"} },
		"stable unanswered": func(r *IdentityReference) { r.Answers[0] = nil },
		"answers missing":   func(r *IdentityReference) { r.Answers = r.Answers[:1] },
		"too many prompts":  func(r *IdentityReference) { r.Prompts = make([]string, MaxIdentityPrompts+1) },
	} {
		r := ok()
		spoil(r)
		if err := r.Check(-1); err == nil && name != "other count" {
			t.Errorf("%s: accepted", name)
		}
		if err := r.Check(2); err == nil {
			t.Errorf("%s: accepted for 2 prompts", name)
		}
	}
}
