// Package check judges an answer, not only its timing: the model that
// served it, how it ended, its length and its text. A request whose answer
// fails a check is a wrong answer (result.WrongAnswer): failed, never
// good, its timing kept. Checks run after the request is measured, never
// between reading a chunk and stamping it.
package check

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/served"
)

// ModelMode is how the answer's model must match.
type ModelMode uint8

const (
	// ModelLearn (the default): the model the endpoint served before
	// (served.Model): the first name an endpoint's answers give is learned, an
	// answer naming the model asked for always passes, and an answer from
	// another model afterwards is wrong. It never fails a healthy answer of
	// a server that names its model its own way, and still catches a
	// substitution.
	ModelLearn ModelMode = iota
	// ModelExact: the name asked for.
	ModelExact
	// ModelPrefix: the answer's model starts with the one asked for, for
	// servers that answer with a fuller name.
	ModelPrefix
	// ModelOff checks nothing.
	ModelOff
)

// ModelModes names the modes as the configuration writes them.
var ModelModes = map[string]ModelMode{"": ModelLearn, "learn": ModelLearn, "exact": ModelExact, "prefix": ModelPrefix, "off": ModelOff}

// Set is a profile's answer checks. The zero Set checks the model alone.
type Set struct {
	Model ModelMode
	// ModelMatches, when set, is what the answer's model must match
	// (RE2), in place of Model's comparison.
	ModelMatches *regexp.Regexp
	// Served is what the endpoint served before, for ModelLearn; nil
	// learns nothing and passes every answer (probe.Run binds it to its
	// endpoint's).
	Served *served.Model
	// FinishReasons are the finish reasons allowed; any when empty.
	FinishReasons []string
	// MinOutputTokens and MaxOutputTokens bound the answer's length; 0
	// checks nothing.
	MinOutputTokens, MaxOutputTokens int
	// Contains are texts the answer must hold; Matches and NotMatches RE2
	// expressions it must and must not match.
	Contains            []string
	Matches, NotMatches []*regexp.Regexp
	// JSON: the answer parses as JSON.
	JSON bool
	// Schema, when set, is what the answer must be valid against (JSON
	// Schema, draft 2020-12 unless it says otherwise).
	Schema *jsonschema.Schema
	// Tools are the functions the requests offer, each with its
	// parameters' schema (nil: any JSON). When set, every tool call an
	// answer makes must name one of them with arguments valid against
	// its schema, and ToolCallRequired makes an answer without one wrong.
	Tools            map[string]*jsonschema.Schema
	ToolCallRequired bool
	// Expect: the workload's prompts carry what their answers must match
	// (a known-answer dataset); each request's expression is Run's.
	Expect bool
	// Embeddings: the answers are vectors, one per input, each of the
	// same non-zero length.
	Embeddings bool
	// MaxAnswerBytes bounds the answer the text checks read (what the
	// client keeps: client.Prompt.KeepLimit): a longer one fails each of
	// them as too large to check. 0 is DefaultMaxAnswerBytes (AnswerLimit).
	MaxAnswerBytes int
}

// AnswerLimit is the most of an answer the checks read: MaxAnswerBytes,
// or its default.
func (s *Set) AnswerLimit() int {
	if s.MaxAnswerBytes > 0 {
		return s.MaxAnswerBytes
	}
	return DefaultMaxAnswerBytes
}

// DefaultMaxAnswerBytes is checks.max_answer_bytes' default: JSON Schema
// and tool-call checks hold an answer as Go values at 40 to 70 times its
// size, and a regular expression costs up to regexcost.MaxInsts x about
// 6 ms a MB (docs/RELIABILITY.md).
const DefaultMaxAnswerBytes = 1 << 20

// The names of the checks, as outputs show them.
const (
	Model           = "model"
	FinishReason    = "finish_reason"
	MinOutputTokens = "min_output_tokens"
	MaxOutputTokens = "max_output_tokens"
	Contains        = "contains"
	Matches         = "matches"
	NotMatches      = "not_matches"
	JSON            = "json"
	JSONSchema      = "json_schema"
	ToolCall        = "tool_call"
	Expect          = "expect"
	Embeddings      = "embeddings"
)

// Names lists the checks the set runs, in the order it runs them.
func (s *Set) Names() []string {
	var out []string
	add := func(on bool, name string) {
		if on {
			out = append(out, name)
		}
	}
	add(s.Model != ModelOff, Model)
	add(len(s.FinishReasons) > 0, FinishReason)
	add(s.MinOutputTokens > 0, MinOutputTokens)
	add(s.MaxOutputTokens > 0, MaxOutputTokens)
	add(len(s.Contains) > 0, Contains)
	add(len(s.Matches) > 0, Matches)
	add(len(s.NotMatches) > 0, NotMatches)
	add(s.JSON, JSON)
	add(s.Schema != nil, JSONSchema)
	add(len(s.Tools) > 0, ToolCall)
	add(s.Expect, Expect)
	add(s.Embeddings, Embeddings)
	return out
}

// NeedsText reports whether a check reads the answer, which the client
// then keeps (result.Request.Answer).
func (s *Set) NeedsText() bool {
	return len(s.Contains) > 0 || len(s.Matches) > 0 || len(s.NotMatches) > 0 || s.JSON || s.Schema != nil || len(s.Tools) > 0
}

// excerpt is how much of a failing answer its message quotes.
const excerpt = 200

// Run judges r, a request answered in full (a success), with read its
// answer (called only when a check reads it): each check's verdict goes
// into r.Checks, each failing one with its own message (what it wanted,
// quoting the answer), and the first failure makes r a wrong answer whose
// Err is that check's. The text checks read the
// answer's output text, not its reasoning.
//
// expect, when set, is what this request's answer must match (its
// prompt's, from a known-answer dataset).
func (s *Set) Run(ctx context.Context, r *result.Request, read func() openai.Answer, expect *regexp.Regexp) {
	if r.Outcome != result.Success {
		return
	}
	// Judging stops where the run is ending (an interrupt, the daemon's
	// shutdown): between expressions, each bounded in cost, so that a
	// signal ends the judging as it ends the requests. The answer, judged
	// in part, is then cancelled, neither right nor wrong.
	defer func() {
		if ctx.Err() != nil {
			r.Outcome, r.Checks = result.Cancelled, nil
		}
	}()
	var answer *openai.Answer
	parsed := func() *openai.Answer {
		if answer == nil {
			a := read()
			answer = &a
		}
		return answer
	}
	get := func() string { return parsed().Text }
	var why string
	judge := func(name string, pass bool, reason func() string) {
		c := result.Check{Name: name, Pass: pass}
		if !pass {
			c.Message = reason()
			if why == "" {
				why = name + ": " + c.Message
			}
		}
		r.Checks = append(r.Checks, c)
	}
	if s.Model != ModelOff {
		s.judgeModel(r, judge)
	}
	if len(s.FinishReasons) > 0 {
		judge(FinishReason, slices.Contains(s.FinishReasons, r.FinishReason), func() string {
			return fmt.Sprintf("finish_reason %q, want one of %s", r.FinishReason, strings.Join(s.FinishReasons, ", "))
		})
	}
	if s.MinOutputTokens > 0 {
		judge(MinOutputTokens, r.OutputTokens >= s.MinOutputTokens, func() string {
			return fmt.Sprintf("%d output tokens, want at least %d", r.OutputTokens, s.MinOutputTokens)
		})
	}
	if s.MaxOutputTokens > 0 {
		judge(MaxOutputTokens, r.OutputTokens <= s.MaxOutputTokens, func() string {
			return fmt.Sprintf("%d output tokens, want at most %d", r.OutputTokens, s.MaxOutputTokens)
		})
	}
	if r.AnswerCut {
		msg := fmt.Sprintf("too large to check (%d bytes, limit %d: checks.max_answer_bytes)", r.AnswerBytes, s.AnswerLimit())
		for _, name := range s.textChecks(expect != nil) {
			judge(name, false, func() string { return msg })
		}
	} else {
		s.readText(ctx, get, parsed, expect, judge)
	}
	if s.Embeddings {
		judge(Embeddings, r.Vectors == r.Inputs && r.Dimensions > 0, func() string {
			switch {
			case r.Vectors != r.Inputs:
				return fmt.Sprintf("%d vectors for %d inputs", r.Vectors, r.Inputs)
			case r.Dimensions == 0:
				return "an empty vector"
			case r.Dimensions == openai.NotNumbers:
				return "a vector holds values that are not numbers"
			}
			return "vectors of different lengths"
		})
	}
	if why != "" {
		r.Outcome, r.Err = result.WrongAnswer, why
	}
}

// textChecks are the names of the checks that read the answer's text.
func (s *Set) textChecks(expect bool) []string {
	var out []string
	for _, c := range []struct {
		on   bool
		name string
	}{{len(s.Contains) > 0, Contains}, {len(s.Matches) > 0, Matches}, {len(s.NotMatches) > 0, NotMatches}, {s.JSON, JSON},
		{s.Schema != nil, JSONSchema}, {expect, Expect}, {len(s.Tools) > 0, ToolCall}} {
		if c.on {
			out = append(out, c.name)
		}
	}
	return out
}

// readText runs the checks that read the answer: get is its text, parsed
// the whole answer read back.
func (s *Set) readText(ctx context.Context, get func() string, parsed func() *openai.Answer, expect *regexp.Regexp, judge func(string, bool, func() string)) {
	quoted := func() string { return quote(get()) }
	if len(s.Contains) > 0 {
		missing := ""
		for _, c := range s.Contains {
			if !strings.Contains(get(), c) {
				missing = c
				break
			}
		}
		judge(Contains, missing == "", func() string { return fmt.Sprintf("the answer lacks %q: %s", missing, quoted()) })
	}
	if len(s.Matches) > 0 {
		var miss *regexp.Regexp
		for _, re := range s.Matches {
			if ctx.Err() != nil {
				return
			}
			if !re.MatchString(get()) {
				miss = re
				break
			}
		}
		judge(Matches, miss == nil, func() string { return fmt.Sprintf("the answer does not match /%s/: %s", miss, quoted()) })
	}
	if len(s.NotMatches) > 0 {
		var hit *regexp.Regexp
		for _, re := range s.NotMatches {
			if ctx.Err() != nil {
				return
			}
			if re.MatchString(get()) {
				hit = re
				break
			}
		}
		judge(NotMatches, hit == nil, func() string { return fmt.Sprintf("the answer matches /%s/: %s", hit, quoted()) })
	}
	if s.JSON {
		judge(JSON, json.Valid([]byte(get())), func() string { return "the answer is not JSON: " + quoted() })
	}
	if ctx.Err() != nil {
		return
	}
	if s.Schema != nil {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(get()))
		if err == nil {
			err = s.Schema.Validate(inst)
		}
		judge(JSONSchema, err == nil, func() string {
			return fmt.Sprintf("the answer does not meet the schema (%s): %s", SchemaError(err), quoted())
		})
	}
	if expect != nil {
		judge(Expect, expect.MatchString(get()), func() string { return fmt.Sprintf("the answer does not match /%s/: %s", expect, quoted()) })
	}
	if len(s.Tools) > 0 && ctx.Err() == nil {
		bad := s.toolCalls(parsed().ToolCalls)
		judge(ToolCall, bad == "", func() string { return bad })
	}
}

// judgeModel is the model check: r's answer names the model it came from
// (an answer that names none passes).
func (s *Set) judgeModel(r *result.Request, judge func(string, bool, func() string)) {
	name := r.ServedModel
	switch {
	case name == "":
		judge(Model, true, nil)
	case s.ModelMatches != nil:
		judge(Model, s.ModelMatches.MatchString(name), func() string {
			return fmt.Sprintf("answered by %q, which does not match /%s/", name, s.ModelMatches)
		})
	case s.Model == ModelLearn:
		ok, earlier := true, ""
		if s.Served != nil {
			ok, earlier = s.Served.Judge(r.Model, name)
		}
		judge(Model, ok, func() string { return served.Substituted(name, earlier) })
	case r.Model == "":
		judge(Model, true, nil)
	default:
		pass := name == r.Model || s.Model == ModelPrefix && strings.HasPrefix(name, r.Model)
		judge(Model, pass, func() string { return fmt.Sprintf("asked for model %q, answered by %q", r.Model, name) })
	}
}

// toolCalls is what is wrong with an answer's tool calls, or "".
func (s *Set) toolCalls(calls []openai.ToolCall) string {
	if len(calls) == 0 {
		if s.ToolCallRequired {
			return "the answer holds no tool call"
		}
		return ""
	}
	for _, c := range calls {
		schema, ok := s.Tools[c.Name]
		if !ok {
			names := make([]string, 0, len(s.Tools))
			for n := range s.Tools {
				names = append(names, n)
			}
			slices.Sort(names)
			return fmt.Sprintf("called %s, not one of the tools (%s)", quote(c.Name), strings.Join(names, ", "))
		}
		args, err := jsonschema.UnmarshalJSON(strings.NewReader(c.Arguments))
		if err != nil {
			return fmt.Sprintf("%s's arguments are not JSON: %s", c.Name, quote(c.Arguments))
		}
		if schema == nil {
			continue
		}
		if err := schema.Validate(args); err != nil {
			return fmt.Sprintf("%s's arguments do not meet its parameters (%s): %s", c.Name, SchemaError(err), quote(c.Arguments))
		}
	}
	return ""
}

// SchemaError is a JSON Schema validator's error on one line: its
// findings (where the instance left the schema), one a clause, without
// the header line naming the schema's file.
func SchemaError(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	if len(lines) > 1 {
		lines = lines[1:]
	}
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(strings.TrimSpace(l), "- ")
	}
	return strings.Join(lines, "; ")
}

// quote shows the answer's first characters as a Go string: control
// characters and invalid bytes as escapes, a cut marked.
func quote(s string) string {
	n := 0
	for i := range s {
		if n == excerpt {
			return strconv.Quote(s[:i]) + "…"
		}
		n++
	}
	return strconv.Quote(s)
}
