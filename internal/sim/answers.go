package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Answer is a known answer: a prompt that matches Match is answered with
// Text, so that a known-answer dataset's checks pass against the
// simulator and its faults make them fail.
type Answer struct {
	Match *regexp.Regexp
	Text  string
}

// LoadAnswers reads a JSONL file of {"match": RE2, "answer": text}, one
// known answer a line; errors name the file and line.
func LoadAnswers(path string) ([]Answer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Answer
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var a struct {
			Match  *string `json:"match"`
			Answer *string `json:"answer"`
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if a.Match == nil || a.Answer == nil || strings.TrimSpace(*a.Answer) == "" {
			return nil, fmt.Errorf("%s:%d: want {\"match\": RE2, \"answer\": text}", path, n)
		}
		re, err := regexp.Compile(*a.Match)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: match: %w", path, n, err)
		}
		out = append(out, Answer{Match: re, Text: *a.Answer})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no answers", path)
	}
	return out, nil
}

// known is the answer's words (each a token with its leading space) to
// the request's last prompt, or nil.
func (r *request) known(answers []Answer) []string {
	if len(answers) == 0 {
		return nil
	}
	var raw json.RawMessage
	switch {
	case len(r.Messages) > 0:
		raw = r.Messages[len(r.Messages)-1].Content
	default:
		raw = r.Prompt
	}
	var text string
	if json.Unmarshal(raw, &text) != nil {
		return nil
	}
	for _, a := range answers {
		if a.Match.MatchString(text) {
			return strings.Fields(a.Text)
		}
	}
	return nil
}
