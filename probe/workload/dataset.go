package workload

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"

	"github.com/tokenprobe/tokenprobe/internal/regexcost"
	"github.com/tokenprobe/tokenprobe/probe/client"
)

// Entry is one prompt of a dataset.
type Entry struct {
	Text string
	// OutputTokens caps the answer; 0 leaves it to the workload's lengths.
	OutputTokens int
	// Expect, when set, is what the answer must match: a known-answer
	// prompt (the check "expect").
	Expect *regexp.Regexp
}

type singleTurn struct {
	Text         *string  `json:"text"`
	Texts        []string `json:"texts"`
	OutputLength *int     `json:"output_length"`
	// Expect is tokenprobe's own field: an RE2 expression the answer
	// must match.
	Expect *string `json:"expect"`
}

// entry reads the prompt fields single_turn and multi_turn share: text
// or texts (joined by newlines), and an optional output_length. what names
// the text in the error when it is empty.
func (st singleTurn) entry(what string) (Entry, error) {
	var e Entry
	switch {
	case st.Text != nil && st.Texts != nil:
		return e, fmt.Errorf("give text or texts, not both")
	case st.Text != nil:
		e.Text = *st.Text
	default:
		e.Text = strings.Join(st.Texts, "\n")
	}
	if strings.TrimSpace(e.Text) == "" {
		return e, fmt.Errorf("%s is empty", what)
	}
	if st.OutputLength != nil {
		if *st.OutputLength < 1 {
			return e, fmt.Errorf("output_length must be at least 1")
		}
		e.OutputTokens = *st.OutputLength
	}
	if st.Expect != nil {
		re, err := regexp.Compile(*st.Expect)
		if err != nil {
			return e, fmt.Errorf("expect: not an RE2 expression: %w", err)
		}
		if why := regexcost.Why(*st.Expect); why != "" {
			// A dataset's expectation runs on every answer, as a check does.
			return e, fmt.Errorf("expect: %s", why)
		}
		e.Expect = re
	}
	return e, nil
}

// Expects reports whether any entry carries an expectation.
func Expects(entries []Entry) bool {
	for _, e := range entries {
		if e.Expect != nil {
			return true
		}
	}
	return false
}

// ReadSingleTurn reads a JSONL prompt file in AIPerf's single_turn shape:
// "text" or "texts" (joined by newlines), an optional "output_length",
// and tokenprobe's optional "expect" (an RE2 expression).
// Errors name the file and line.
func ReadSingleTurn(path string) ([]Entry, error) {
	var out []Entry
	err := eachLine(path, func(text string) error {
		var st singleTurn
		if err := decodeStrict(text, &st); err != nil {
			return err
		}
		e, err := st.entry("the prompt")
		if err != nil {
			return err
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no prompts", path)
	}
	return out, nil
}

// Dataset hands out a file's prompts in order or at random.
type Dataset struct {
	entries []Entry
	random  bool
	output  Lengths
	stream  bool
	mu      sync.Mutex
	next    int
	rng     *rand.Rand
}

// NewDataset samples entries sequentially (wrapping around) or at random;
// entries without an output_length draw one from output.
func NewDataset(entries []Entry, random bool, output Lengths, stream bool, seed uint64) *Dataset {
	return &Dataset{entries: entries, random: random, output: output, stream: stream, rng: rand.New(rand.NewPCG(seed, 0xda7a))}
}

func (d *Dataset) Next() client.Prompt {
	d.mu.Lock()
	var e Entry
	if d.random {
		e = d.entries[d.rng.IntN(len(d.entries))]
	} else {
		e = d.entries[d.next%len(d.entries)]
		d.next++
	}
	out := e.OutputTokens
	if out == 0 {
		out = d.output.sample(d.rng)
	}
	d.mu.Unlock()
	// Without a tokenizer the intended length is the word count, the same
	// approximation synthetic prompts use; the server's usage says better.
	return client.Prompt{Text: e.Text, InputTokens: len(strings.Fields(e.Text)), MaxTokens: out, Stream: d.stream, Expect: e.Expect}
}
