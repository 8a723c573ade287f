package stats

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// ModelIdentity is a model-identity probe's verdict on a run: how many of
// its fixed prompts were answered, under greedy decoding, as the
// reference learned from the endpoint's first runs answered them, with
// the 95% interval of that share, and whether that says the model behind
// the name is the same one.
type ModelIdentity struct {
	// Prompts is the prompts answered and judged (those the reference
	// has, and holds stable); Agreeing those answered as the reference
	// answered them.
	Prompts  int `json:"prompts"`
	Agreeing int `json:"agreeing"`
	// Agreement is Agreeing over Prompts, Interval its Wilson interval.
	Agreement float64  `json:"agreement"`
	Interval  Interval `json:"agreement_interval"`
	// MinAgreement is the bar: the same model when the whole interval is
	// at or above it, changed when it is all under it.
	MinAgreement float64 `json:"min_agreement"`
	// Verdict is same, changed, not_enough_evidence, or learning (the
	// reference is still being learned: LearnedRuns of LearnRuns).
	Verdict     Outcome `json:"verdict"`
	Why         string  `json:"why,omitempty"`
	LearnedRuns int     `json:"learned_runs"`
	LearnRuns   int     `json:"learn_runs"`
	// Unstable is the prompts the reference leaves out: the endpoint
	// answered them more than MaxIdentityAnswers ways while it learned.
	Unstable int `json:"unstable_prompts,omitempty"`
	// Moved is the disagreeing prompt whose answer shares the least of
	// its start with any answer the reference has, with both answers
	// (each cut to MaxMessage characters, control characters escaped).
	Moved *MovedPrompt `json:"moved,omitempty"`
	// Pinned: the reference was read from a file and is never learned.
	Pinned bool `json:"pinned,omitempty"`
	// Logprobs is the distance between the log-probabilities of the
	// answers alike in their text and the reference's, where both have
	// them; nil where the server sent none or the reference has none.
	Logprobs *LogprobDrift `json:"logprobs,omitempty"`
}

// LogprobDrift is how far the log-probabilities of the answers alike in
// their text moved from the reference's: the mean over those prompts of
// each answer's mean absolute difference per token, in nats, with its
// 95% interval (Student's t over the prompts). A prompt whose distance is
// over Tolerance is not alike: the same text from other arithmetic.
type LogprobDrift struct {
	Prompts  int      `json:"prompts"`
	Distance float64  `json:"distance"`
	Interval Interval `json:"distance_interval"`
	// Moved is the prompts whose distance is over Tolerance: the larger
	// of the profile's max_logprob_distance and 4 times Noise, the
	// largest distance between the learning runs' own answers.
	Moved     int     `json:"moved"`
	Tolerance float64 `json:"tolerance"`
	Noise     float64 `json:"noise"`
}

// MovedPrompt is the prompt whose answer moved most.
type MovedPrompt struct {
	Index     int    `json:"index"`
	Prompt    string `json:"prompt"`
	Answer    string `json:"answer"`
	Reference string `json:"reference"`
	// Shared is the bytes the answer shares with the start of the
	// reference answer closest to it.
	Shared int `json:"shared_bytes"`
	// LogprobDistance, where set, is why an answer alike in its text
	// moved: its log-probabilities' distance from the reference's.
	LogprobDistance float64 `json:"logprob_distance,omitempty"`
}

// The model-identity verdicts beside Undecided.
const (
	SameModel    Outcome = "same"
	ModelChanged Outcome = "changed"
	Learning     Outcome = "learning"
)

// Bounds of what a reference keeps: every answer it holds is one the
// endpoint sent, so each is cut, and a prompt answered more ways than
// this while learning is unstable rather than a growing list.
const (
	MaxIdentityAnswers     = 4
	MaxIdentityAnswerBytes = 1024
	MaxIdentityPrompts     = 64
	MaxIdentityLogprobs    = 256 // the longest answer a profile asks for
)

// IdentityReference is what an endpoint's model answered to each prompt
// under greedy decoding: what later runs are held to. It is written to
// and read from the daemon's storage as JSON.
type IdentityReference struct {
	// Prompts are the prompts' texts, in order: a reference of other
	// prompts (the profile changed them) is learned anew.
	Prompts []string `json:"prompts"`
	// Answers are each prompt's answers seen while learning (at most
	// MaxIdentityAnswers, each at most MaxIdentityAnswerBytes); nil for
	// an unstable prompt.
	Answers  [][]string `json:"answers"`
	Unstable []bool     `json:"unstable"`
	Runs     int        `json:"runs"`
	// Logprobs are, per prompt, the log-probabilities of its first
	// answer's tokens where the server sent them (at most
	// MaxIdentityLogprobs; none: compared by text alone); LogprobNoise
	// the largest distance from them of a later learning run's answer
	// alike in its text.
	Logprobs     [][]float64 `json:"logprobs,omitempty"`
	LogprobNoise float64     `json:"logprob_noise,omitempty"`
}

// IdentityStore keeps references across restarts; Load returns nil, nil
// where it has none.
type IdentityStore interface {
	Load() (*IdentityReference, error)
	Save(*IdentityReference) error
	Forget() error
}

// IdentityTracker holds one endpoint's reference across its runs: it
// learns it from the first LearnRuns complete runs, then judges every run
// against it. Safe for concurrent use.
type IdentityTracker struct {
	Prompts      []string
	LearnRuns    int
	MinAgreement float64
	// MaxLogprobDistance is the least distance (nats a token) between
	// log-probabilities that makes an answer alike in its text not alike.
	MaxLogprobDistance float64
	// Pinned: ref came from a file, and is never learned nor forgotten.
	Pinned bool
	Store  IdentityStore // nil: kept in memory only

	mu     sync.Mutex
	ref    *IdentityReference
	loaded bool
	// loadErr is why the stored reference could not be read: the tracker
	// learns anew, and its verdicts say why.
	loadErr string
}

// NewIdentityTracker starts a tracker of prompts; pinned, when set, is
// its reference for good.
func NewIdentityTracker(prompts []string, learnRuns int, minAgreement, maxLogprobDistance float64, store IdentityStore, pinned *IdentityReference) *IdentityTracker {
	t := &IdentityTracker{Prompts: prompts, LearnRuns: learnRuns, MinAgreement: minAgreement, MaxLogprobDistance: maxLogprobDistance, Store: store}
	if pinned != nil {
		t.ref, t.loaded, t.Pinned = pinned, true, true
	}
	return t
}

// Configure sets the runs the reference is learned from and the bar, as
// a reloaded configuration gives them.
func (t *IdentityTracker) Configure(learnRuns int, minAgreement, maxLogprobDistance float64) {
	t.mu.Lock()
	t.LearnRuns, t.MinAgreement, t.MaxLogprobDistance = learnRuns, minAgreement, maxLogprobDistance
	t.mu.Unlock()
}

// Forget drops the learned reference (and the stored one): the next
// complete runs learn it anew. A pinned reference stays.
func (t *IdentityTracker) Forget() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.Pinned {
		return fmt.Errorf("the reference is pinned from a file: change the file")
	}
	t.ref, t.loaded, t.loadErr = nil, true, ""
	if t.Store != nil {
		return t.Store.Forget()
	}
	return nil
}

// Reference is a copy of the reference (nil while none is learned).
func (t *IdentityTracker) Reference() *IdentityReference {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.load()
	if t.ref == nil {
		return nil
	}
	c := &IdentityReference{Prompts: slices.Clone(t.ref.Prompts), Unstable: slices.Clone(t.ref.Unstable), Runs: t.ref.Runs, LogprobNoise: t.ref.LogprobNoise}
	for _, as := range t.ref.Answers {
		c.Answers = append(c.Answers, slices.Clone(as))
	}
	for _, lp := range t.ref.Logprobs {
		c.Logprobs = append(c.Logprobs, slices.Clone(lp))
	}
	return c
}

// Begin starts collecting one run's answers.
func (t *IdentityTracker) Begin() *IdentityRun {
	return &IdentityRun{t: t, answers: make([]*string, len(t.Prompts)), logprobs: make([][]float64, len(t.Prompts))}
}

// IdentityRun collects one run's answers, one per prompt.
type IdentityRun struct {
	t        *IdentityTracker
	mu       sync.Mutex
	answers  []*string
	logprobs [][]float64
}

// Answer records the answer to prompt i (its text as the API's answer
// reads back), cut to MaxIdentityAnswerBytes, and its tokens'
// log-probabilities where the server sent them (the first
// MaxIdentityLogprobs).
func (r *IdentityRun) Answer(i int, text string, logprobs []float64) {
	if i < 0 || i >= len(r.answers) {
		return
	}
	text = cutBytes(text, MaxIdentityAnswerBytes)
	if len(logprobs) > MaxIdentityLogprobs {
		logprobs = logprobs[:MaxIdentityLogprobs]
	}
	r.mu.Lock()
	r.answers[i] = &text
	r.logprobs[i] = slices.Clone(logprobs)
	r.mu.Unlock()
}

// Finish judges the run against the reference, or learns from it. A run
// that did not answer every prompt (complete false, or an answer
// missing) teaches nothing.
func (r *IdentityRun) Finish(complete bool) *ModelIdentity {
	t := r.t
	t.mu.Lock()
	defer t.mu.Unlock()
	t.load()
	mi := &ModelIdentity{MinAgreement: t.MinAgreement, LearnRuns: t.LearnRuns, Pinned: t.Pinned, Verdict: Undecided}
	r.mu.Lock()
	answers, logprobs := r.answers, r.logprobs
	r.mu.Unlock()
	for _, a := range answers {
		complete = complete && a != nil
	}
	ref := t.ref
	if ref != nil && !slices.Equal(ref.Prompts, t.Prompts) {
		ref, t.ref = nil, nil // the profile's prompts changed: learn anew
	}
	if ref == nil || (!t.Pinned && ref.Runs < t.LearnRuns) {
		mi.Verdict = Learning
		if ref != nil {
			mi.LearnedRuns = ref.Runs
		}
		if !complete {
			mi.Why = "the run did not answer every prompt: it teaches the reference nothing"
			return mi
		}
		if ref == nil {
			ref = &IdentityReference{Prompts: t.Prompts, Answers: make([][]string, len(t.Prompts)), Unstable: make([]bool, len(t.Prompts))}
		}
		if ref.Logprobs == nil {
			ref.Logprobs = make([][]float64, len(t.Prompts))
		}
		for i, a := range answers {
			if ref.Unstable[i] {
				continue
			}
			// The first answer's log-probabilities are the reference's;
			// a later answer alike in its text measures the server's
			// own noise against them.
			if len(ref.Answers[i]) > 0 && ref.Answers[i][0] == *a && len(logprobs[i]) > 0 {
				if d, ok := logprobDistance(ref.Logprobs[i], logprobs[i]); ok {
					ref.LogprobNoise = max(ref.LogprobNoise, d)
				}
			}
			if slices.Contains(ref.Answers[i], *a) {
				continue
			}
			if len(ref.Answers[i]) == 0 {
				ref.Logprobs[i] = logprobs[i]
			}
			if len(ref.Answers[i]) == MaxIdentityAnswers {
				ref.Answers[i], ref.Unstable[i], ref.Logprobs[i] = nil, true, nil
				continue
			}
			ref.Answers[i] = append(ref.Answers[i], *a)
		}
		ref.Runs++
		t.ref = ref
		mi.LearnedRuns = ref.Runs
		if t.loadErr != "" {
			mi.Why = t.loadErr
		}
		if t.Store != nil {
			if err := t.Store.Save(ref); err != nil {
				mi.Why = "the reference could not be kept: " + err.Error()
			}
		}
		return mi
	}
	mi.LearnedRuns = ref.Runs
	best := -1
	tolerance := max(t.MaxLogprobDistance, 4*ref.LogprobNoise)
	var distances []float64
	var lpMoved *MovedPrompt
	lpMovedN := 0
	for i, a := range answers {
		if ref.Unstable[i] {
			mi.Unstable++
			continue
		}
		if a == nil || len(ref.Answers[i]) == 0 {
			continue
		}
		mi.Prompts++
		if ref.Answers[i][0] == *a && i < len(ref.Logprobs) {
			if d, ok := logprobDistance(ref.Logprobs[i], logprobs[i]); ok {
				distances = append(distances, d)
				if tolerance > 0 && d > tolerance {
					// The same text from other arithmetic: not alike.
					lpMovedN++
					if lpMoved == nil || d > lpMoved.LogprobDistance {
						lpMoved = &MovedPrompt{Index: i, Prompt: cut(t.Prompts[i], MaxMessage), Answer: cut(*a, MaxMessage),
							Reference: cut(ref.Answers[i][0], MaxMessage), Shared: len(*a), LogprobDistance: d}
					}
					continue
				}
			}
		}
		if slices.Contains(ref.Answers[i], *a) {
			mi.Agreeing++
			continue
		}
		closest, shared := "", -1
		for _, want := range ref.Answers[i] {
			if n := sharedPrefix(*a, want); n > shared {
				closest, shared = want, n
			}
		}
		if best < 0 || shared < mi.Moved.Shared {
			best = i
			mi.Moved = &MovedPrompt{Index: i, Prompt: cut(t.Prompts[i], MaxMessage), Answer: cut(*a, MaxMessage),
				Reference: cut(closest, MaxMessage), Shared: shared}
		}
	}
	if len(distances) > 0 {
		mean, half := meanInterval(distances)
		mi.Logprobs = &LogprobDrift{Prompts: len(distances), Distance: mean, Interval: Interval{Low: max(mean-half, 0), High: mean + half},
			Moved: lpMovedN, Tolerance: tolerance, Noise: ref.LogprobNoise}
	}
	if mi.Moved == nil {
		mi.Moved = lpMoved
	}
	if mi.Prompts == 0 {
		mi.Why = "no prompt was answered that the reference holds"
		return mi
	}
	mi.Agreement = float64(mi.Agreeing) / float64(mi.Prompts)
	mi.Interval = Wilson(mi.Agreeing, mi.Prompts)
	switch {
	case mi.Interval.Low >= mi.MinAgreement:
		mi.Verdict = SameModel
	case mi.Interval.High < mi.MinAgreement:
		mi.Verdict = ModelChanged
	default:
		mi.Why = fmt.Sprintf("the interval holds the bar of %.0f%%", 100*mi.MinAgreement)
	}
	return mi
}

// load reads the stored reference once.
func (t *IdentityTracker) load() {
	if t.loaded || t.Store == nil {
		t.loaded = true
		return
	}
	t.loaded = true
	ref, err := t.Store.Load()
	switch {
	case err != nil:
		t.loadErr = "the stored reference could not be read, so it is learned anew: " + err.Error()
	case ref != nil && ref.Check(len(t.Prompts)) == nil:
		t.ref = ref
	case ref != nil:
		t.loadErr = "the stored reference is not of these prompts, so it is learned anew: " + ref.Check(len(t.Prompts)).Error()
	}
}

// Check holds a reference read back to the bounds it is written within
// (of prompts prompts; -1: any number up to MaxIdentityPrompts): a file
// edited by hand is refused, not trusted.
func (ref *IdentityReference) Check(prompts int) error {
	n := len(ref.Prompts)
	switch {
	case prompts >= 0 && n != prompts:
		return fmt.Errorf("a reference of %d prompts, the profile sends %d", n, prompts)
	case n == 0 || n > MaxIdentityPrompts:
		return fmt.Errorf("%d prompts: a reference has 1 to %d", n, MaxIdentityPrompts)
	case len(ref.Answers) != n || len(ref.Unstable) != n:
		return fmt.Errorf("%d prompts, %d answers and %d unstable marks: one each", n, len(ref.Answers), len(ref.Unstable))
	case ref.Runs < 1:
		return errors.New("learned from no run")
	}
	if len(ref.Logprobs) != 0 && len(ref.Logprobs) != n {
		return fmt.Errorf("%d prompts and log-probabilities of %d: one each, or none", n, len(ref.Logprobs))
	}
	if math.IsNaN(ref.LogprobNoise) || math.IsInf(ref.LogprobNoise, 0) || ref.LogprobNoise < 0 {
		return fmt.Errorf("a log-probability noise of %v: a finite distance, 0 or more", ref.LogprobNoise)
	}
	for i, lp := range ref.Logprobs {
		if len(lp) > MaxIdentityLogprobs {
			return fmt.Errorf("prompt %d: %d log-probabilities, over %d", i+1, len(lp), MaxIdentityLogprobs)
		}
		for _, v := range lp {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("prompt %d: a log-probability of %v", i+1, v)
			}
		}
	}
	for i, as := range ref.Answers {
		if len(as) > MaxIdentityAnswers || ref.Unstable[i] && len(as) > 0 || !ref.Unstable[i] && len(as) == 0 {
			return fmt.Errorf("prompt %d: %d answers (unstable %v): a stable prompt has 1 to %d, an unstable none", i+1, len(as), ref.Unstable[i], MaxIdentityAnswers)
		}
		for _, a := range as {
			if len(a) > MaxIdentityAnswerBytes {
				return fmt.Errorf("prompt %d: an answer of %d bytes, over %d", i+1, len(a), MaxIdentityAnswerBytes)
			}
		}
	}
	return nil
}

// logprobDistance is the mean absolute difference between two answers'
// log-probabilities over the tokens both have; false where either has
// none.
func logprobDistance(ref, got []float64) (float64, bool) {
	n := min(len(ref), len(got))
	if n == 0 {
		return 0, false
	}
	var sum float64
	for i := range n {
		sum += math.Abs(ref[i] - got[i])
	}
	return sum / float64(n), true
}

// sharedPrefix is the bytes a and b share from their start, whole runes.
func sharedPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) {
		ra, sa := utf8.DecodeRuneInString(a[n:])
		rb, sb := utf8.DecodeRuneInString(b[n:])
		if ra != rb || sa != sb {
			break
		}
		n += sa
	}
	return n
}

// cutBytes cuts s to at most n bytes, whole runes.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return strings.Clone(s)
}
