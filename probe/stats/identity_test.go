package stats

import (
	"errors"
	"fmt"
	"math"
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
			r.Answer(i, a, nil)
		}
	}
	return r.Finish(complete)
}

// The reference is learned from the first complete runs, then every run
// is judged against it: the same answers are the same model, other
// answers a changed one, half of each not enough evidence.
func TestIdentityLearnsThenJudges(t *testing.T) {
	store := &memStore{}
	tr := NewIdentityTracker(testPrompts, 2, 0.5, 0.0005, store, nil)
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
	tr := NewIdentityTracker(testPrompts, MaxIdentityAnswers+2, 0.5, 0.0005, nil, nil)
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
	lt := NewIdentityTracker(testPrompts, 1, 0.5, 0.0005, nil, nil)
	identityRunOf(lt, func(int) string { return strings.Repeat("é", 2000) }, true)
	if a := lt.Reference().Answers[0][0]; len(a) > MaxIdentityAnswerBytes || len(a) < MaxIdentityAnswerBytes-1 || !utf8.ValidString(a) {
		t.Fatalf("a 4,000-byte answer kept as %d bytes (valid UTF-8: %v)", len(a), utf8.ValidString(a))
	}

	broken := &memStore{loadErr: errors.New("disk on fire")}
	tr = NewIdentityTracker(testPrompts, 1, 0.5, 0.0005, broken, nil)
	if mi := identityRunOf(tr, func(int) string { return "a" }, true); mi.Verdict != Learning || !strings.Contains(mi.Why, "disk on fire") {
		t.Fatalf("a store that cannot be read: %+v", mi)
	}
	bad := &memStore{ref: &IdentityReference{Prompts: []string{"x"}, Answers: [][]string{{"a"}}, Unstable: []bool{false}, Runs: 1}}
	tr = NewIdentityTracker(testPrompts, 1, 0.5, 0.0005, bad, nil)
	if mi := identityRunOf(tr, func(int) string { return "a" }, true); mi.Verdict != Learning || !strings.Contains(mi.Why, "not of these prompts") {
		t.Fatalf("a stored reference of other prompts: %+v", mi)
	}

	pinnedRef := tr.Reference()
	pinned := NewIdentityTracker(testPrompts, 3, 0.5, 0.0005, nil, pinnedRef)
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

// identityRunWith answers every prompt alike in its text, with
// log-probabilities lp(i).
func identityRunWith(t *IdentityTracker, lp func(i int) []float64) *ModelIdentity {
	r := t.Begin()
	for i := range t.Prompts {
		r.Answer(i, fmt.Sprintf("answer %d", i), lp(i))
	}
	return r.Finish(true)
}

// Answers alike in their text whose log-probabilities moved past the
// tolerance are not alike: the same weights in another precision (the
// distances measured on llama-server: F16 to Q8_0 about 0.0015 nats a
// token, F16 to F32 0.00007, a request again 0.0000003). The learning
// runs' own noise widens the tolerance; an answer without
// log-probabilities is judged by its text.
func TestIdentityLogprobsTellTheSameTextApart(t *testing.T) {
	lps := func(shift float64) func(i int) []float64 {
		return func(int) []float64 {
			out := make([]float64, 16)
			for k := range out {
				out[k] = -9.7 - float64(k%3)*0.01 + shift
			}
			return out
		}
	}
	tr := NewIdentityTracker(testPrompts, 3, 0.5, 0.0005, nil, nil)
	for k := range 3 {
		identityRunWith(tr, lps(float64(k)*3e-7))
	}
	if ref := tr.Reference(); ref.LogprobNoise < 5e-7 || ref.LogprobNoise > 7e-7 || len(ref.Logprobs[0]) != 16 {
		t.Fatalf("learned noise %v, %d log-probabilities for the first prompt", ref.LogprobNoise, len(ref.Logprobs[0]))
	}
	mi := identityRunWith(tr, lps(7e-5)) // F32 served, F16 learned
	if mi.Verdict != SameModel || mi.Logprobs == nil || mi.Logprobs.Prompts != 16 || mi.Logprobs.Moved != 0 || mi.Logprobs.Distance < 6e-5 {
		t.Fatalf("log-probabilities 0.00007 apart: %+v %+v", mi, mi.Logprobs)
	}
	mi = identityRunWith(tr, lps(0.0015)) // Q8_0 served
	if mi.Verdict != ModelChanged || mi.Agreeing != 0 || mi.Logprobs.Moved != 16 || mi.Moved == nil || mi.Moved.LogprobDistance < 0.0014 {
		t.Fatalf("log-probabilities 0.0015 apart: %+v %+v", mi, mi.Logprobs)
	}
	if d, iv := mi.Logprobs.Distance, mi.Logprobs.Interval; math.Abs(d-0.0015) > 1e-9 || iv.Low > d || iv.High < d {
		t.Errorf("distance %v, interval %+v", d, iv)
	}
	mi = identityRunWith(tr, func(int) []float64 { return nil }) // the server stopped sending them
	if mi.Verdict != SameModel || mi.Logprobs != nil {
		t.Fatalf("no log-probabilities: %+v", mi)
	}

	// A noisy server's own spread widens the tolerance: 0.002 between its
	// learning runs puts it at 0.008.
	noisy := NewIdentityTracker(testPrompts, 2, 0.5, 0.0005, nil, nil)
	identityRunWith(noisy, lps(0))
	identityRunWith(noisy, lps(0.002))
	if mi := identityRunWith(noisy, lps(0.0015)); mi.Verdict != SameModel || mi.Logprobs.Tolerance < 0.0079 {
		t.Fatalf("within a noisy server's own spread: %+v %+v", mi, mi.Logprobs)
	}
}

// A reference's log-probabilities are held to their bounds when read.
func TestIdentityReferenceLogprobBounds(t *testing.T) {
	ok := func() *IdentityReference {
		ref := &IdentityReference{Prompts: []string{"a", "b", "c", "d"}, Answers: [][]string{{"x"}, {"x"}, {"x"}, {"x"}}, Unstable: make([]bool, 4), Runs: 1,
			Logprobs: [][]float64{{-1}, nil, nil, nil}}
		return ref
	}
	if err := ok().Check(4); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*IdentityReference){
		"count":    func(r *IdentityReference) { r.Logprobs = r.Logprobs[:2] },
		"long":     func(r *IdentityReference) { r.Logprobs[1] = make([]float64, MaxIdentityLogprobs+1) },
		"nan":      func(r *IdentityReference) { r.Logprobs[2] = []float64{math.NaN()} },
		"noise":    func(r *IdentityReference) { r.LogprobNoise = -1 },
		"infnoise": func(r *IdentityReference) { r.LogprobNoise = math.Inf(1) },
	} {
		ref := ok()
		edit(ref)
		if err := ref.Check(4); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
