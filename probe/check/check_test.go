package check

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/served"
)

func text(s string) func() openai.Answer {
	return func() openai.Answer { return openai.Answer{Text: s} }
}

// The model check by mode, an answer with no model field, and a message
// that quotes the answer with its control characters escaped and cut.
func TestModelModesAndTheMessage(t *testing.T) {
	for _, c := range []struct {
		mode          ModelMode
		asked, served string
		pass          bool
	}{
		{ModelExact, "llama", "llama", true},
		{ModelExact, "llama", "llama-8b", false},
		{ModelPrefix, "llama", "llama-8b", true},
		{ModelPrefix, "llama", "tiny", false},
		{ModelOff, "llama", "tiny", true},
		{ModelExact, "llama", "", true}, // no model field: nothing differs
	} {
		r := &result.Request{Outcome: result.Success, Model: c.asked, ServedModel: c.served}
		s := Set{Model: c.mode}
		s.Run(context.Background(), r, func() openai.Answer { t.Fatal("the model check read the text"); return openai.Answer{} }, nil)
		if got := r.Outcome == result.Success; got != c.pass {
			t.Errorf("%v %q served by %q: pass %v, want %v (%s)", c.mode, c.asked, c.served, got, c.pass, r.Err)
		}
	}
	long := "a\x00b\n" + strings.Repeat("x", 400)
	r := &result.Request{Outcome: result.Success}
	s := Set{Model: ModelOff, Matches: []*regexp.Regexp{regexp.MustCompile(`^Paris$`)}}
	s.Run(context.Background(), r, text(long), nil)
	if r.Outcome != result.WrongAnswer || !strings.Contains(r.Err, `"a\x00b\n`) || !strings.HasSuffix(r.Err, `"…`) || len(r.Err) > 300 {
		t.Fatalf("%v: %q", r.Outcome, r.Err)
	}
	// Only a success is judged: an error keeps its outcome and gets no check.
	e := &result.Request{Outcome: result.Error, Model: "a", ServedModel: "b"}
	(&Set{}).Run(context.Background(), e, nil, nil)
	if e.Outcome != result.Error || e.Checks != nil {
		t.Fatalf("an error judged: %+v", e)
	}
}

func TestNames(t *testing.T) {
	s := Set{FinishReasons: []string{"stop"}, MaxOutputTokens: 9, JSON: true}
	if got := strings.Join(s.Names(), ","); got != "model,finish_reason,max_output_tokens,json" {
		t.Fatal(got)
	}
	if !s.NeedsText() || (&Set{FinishReasons: []string{"stop"}}).NeedsText() {
		t.Fatal("NeedsText")
	}
}

// JSON that parses but is not of the schema fails json_schema, and the
// message says which part of the schema.
func TestJSONSchema(t *testing.T) {
	c := jsonschema.NewCompiler()
	if err := c.AddResource("s.json", map[string]any{"type": "object", "required": []any{"answer"}}); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("s.json")
	if err != nil {
		t.Fatal(err)
	}
	s := Set{Model: ModelOff, Schema: schema}
	for answer, pass := range map[string]bool{`{"answer": "Paris"}`: true, `{"city": "Paris"}`: false, `["Paris"]`: false, `{"answer":`: false} {
		r := &result.Request{Outcome: result.Success}
		s.Run(context.Background(), r, text(answer), nil)
		if got := r.Outcome == result.Success; got != pass || len(r.Checks) != 1 || r.Checks[0].Name != JSONSchema {
			t.Errorf("%s: pass %v, want %v: %s %+v", answer, got, pass, r.Err, r.Checks)
		}
		if !pass {
			t.Logf("%s: %s", answer, r.Err)
		}
	}
}

// A reasoning model's thinking is not its answer: the text checks read
// the output alone.
func TestReasoningIsNotTheAnswer(t *testing.T) {
	r := &result.Request{Outcome: result.Success}
	s := Set{Model: ModelOff, JSON: true}
	s.Run(context.Background(), r, func() openai.Answer { return openai.Answer{Reasoning: "the user wants JSON, so", Text: `{"a":1}`} }, nil)
	if r.Outcome != result.Success {
		t.Fatalf("%v: %s", r.Outcome, r.Err)
	}
}

// Every tool call names a tool and carries arguments of its parameters'
// schema; required wants one; a tool without a schema takes any JSON.
func TestToolCalls(t *testing.T) {
	c := jsonschema.NewCompiler()
	if err := c.AddResource("weather.json", map[string]any{"type": "object", "required": []any{"city"},
		"properties": map[string]any{"city": map[string]any{"type": "string"}}}); err != nil {
		t.Fatal(err)
	}
	weather, err := c.Compile("weather.json")
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*jsonschema.Schema{"get_weather": weather, "get_time": nil}
	call := func(name, args string) openai.ToolCall { return openai.ToolCall{Name: name, Arguments: args} }
	for _, tc := range []struct {
		name     string
		required bool
		calls    []openai.ToolCall
		fail     string
	}{
		{"a valid call", true, []openai.ToolCall{call("get_weather", `{"city":"Paris"}`)}, ""},
		{"two, one schemaless", true, []openai.ToolCall{call("get_time", `{"tz":1}`), call("get_weather", `{"city":"Oslo"}`)}, ""},
		{"none, not required", false, nil, ""},
		{"none, required", true, nil, "no tool call"},
		{"an unknown function", false, []openai.ToolCall{call("rm_rf", `{}`)}, `called "rm_rf", not one of the tools (get_time, get_weather)`},
		{"broken arguments", false, []openai.ToolCall{call("get_weather", `{"city":`)}, "arguments are not JSON"},
		{"broken, schemaless", false, []openai.ToolCall{call("get_time", `{`)}, "arguments are not JSON"},
		{"off the schema", false, []openai.ToolCall{call("get_weather", `{"town":"Paris"}`)}, "do not meet its parameters"},
	} {
		r := &result.Request{Outcome: result.Success}
		s := Set{Model: ModelOff, Tools: tools, ToolCallRequired: tc.required}
		s.Run(context.Background(), r, func() openai.Answer { return openai.Answer{ToolCalls: tc.calls} }, nil)
		if len(r.Checks) != 1 || r.Checks[0].Name != ToolCall {
			t.Fatalf("%s: checks %+v", tc.name, r.Checks)
		}
		switch {
		case tc.fail == "" && r.Outcome != result.Success:
			t.Errorf("%s: %v %s", tc.name, r.Outcome, r.Err)
		case tc.fail != "" && (r.Outcome != result.WrongAnswer || !strings.Contains(r.Err, tc.fail)):
			t.Errorf("%s: %v %q, want a wrong answer saying %q", tc.name, r.Outcome, r.Err, tc.fail)
		}
	}
}

// A known-answer prompt's expression judges its answer's text; a
// request without one gets no expect verdict.
func TestExpect(t *testing.T) {
	s := Set{Model: ModelOff, Expect: true}
	for _, c := range []struct {
		answer string
		expect *regexp.Regexp
		want   []result.Check
	}{
		{" Paris.", regexp.MustCompile(`(?i)\bparis\b`), []result.Check{{Name: Expect, Pass: true}}},
		{" Lyon.", regexp.MustCompile(`(?i)\bparis\b`), []result.Check{{Name: Expect, Pass: false, Message: `the answer does not match /(?i)\bparis\b/: " Lyon."`}}},
		{" Lyon.", nil, nil},
	} {
		r := &result.Request{Outcome: result.Success}
		s.Run(context.Background(), r, text(c.answer), c.expect)
		if !slices.Equal(r.Checks, c.want) || (r.Outcome == result.WrongAnswer) != (len(c.want) == 1 && !c.want[0].Pass) {
			t.Errorf("%q against %v: %v %+v %s", c.answer, c.expect, r.Outcome, r.Checks, r.Err)
		}
	}
	if !slices.Contains(s.Names(), Expect) {
		t.Errorf("names %v lack expect", s.Names())
	}
}

// A request failing two checks carries each one's own message, and its
// error is the first's (the known-answer finding: the expect line's
// first failure quoted the finish_reason check's message).
func TestEveryFailingCheckReportsItself(t *testing.T) {
	s := Set{Model: ModelOff, Expect: true, FinishReasons: []string{"stop"}}
	r := &result.Request{Outcome: result.Success, FinishReason: "length"}
	s.Run(context.Background(), r, text(" Lyon, then more"), regexp.MustCompile(`(?i)\bparis\b`))
	want := []result.Check{
		{Name: FinishReason, Message: `finish_reason "length", want one of stop`},
		{Name: Expect, Message: `the answer does not match /(?i)\bparis\b/: " Lyon, then more"`},
	}
	if !slices.Equal(r.Checks, want) || r.Err != FinishReason+": "+want[0].Message {
		t.Errorf("checks %+v, error %q", r.Checks, r.Err)
	}
}

// The default model check learns what the endpoint serves: llama.cpp's
// alias, OpenAI's dated snapshot, an echo; a later answer from another
// model is wrong, naming both; an answer naming the model asked for always
// passes and makes the endpoint known to echo, so a fallback that happened
// to answer first is not taken for the model served.
func TestTheServedModelIsLearned(t *testing.T) {
	judge := func(s *Set, asked, served string) (bool, string) {
		r := &result.Request{Outcome: result.Success, Model: asked, ServedModel: served}
		s.Run(context.Background(), r, nil, nil)
		return r.Outcome == result.Success, r.Err
	}
	for what, c := range map[string]struct {
		asked  string
		served []string
		wrong  int // the index of the first wrong answer, -1 for none
		why    string
	}{
		"llama.cpp's alias":      {"default", []string{"tiny-llama", "tiny-llama", "tiny-llama"}, -1, ""},
		"OpenAI's snapshot":      {"gpt-4o", []string{"gpt-4o-2024-08-06", "gpt-4o-2024-08-06"}, -1, ""},
		"an echo":                {"llama", []string{"llama", "llama"}, -1, ""},
		"a switch":               {"default", []string{"tiny-llama", "other", "other"}, 1, `model: served "other", earlier "tiny-llama"`},
		"a fallback after echo":  {"llama", []string{"llama", "tiny", "llama", "tiny"}, 1, `model: served "tiny", earlier "llama"`},
		"a fallback that echoes": {"llama", []string{"tiny", "llama", "tiny"}, 2, `model: served "tiny", earlier "llama"`},
		"no model in the answer": {"llama", []string{"", "x", ""}, -1, ""},
	} {
		s := &Set{Served: &served.Model{}}
		for i, name := range c.served {
			ok, why := judge(s, c.asked, name)
			switch {
			case i < c.wrong || c.wrong < 0:
				if !ok {
					t.Errorf("%s: answer %d (%q) judged wrong: %s", what, i, name, why)
				}
			case i == c.wrong:
				if ok || why != c.why {
					t.Errorf("%s: answer %d (%q): ok %v, %q; want %q", what, i, name, ok, why, c.why)
				}
			}
		}
	}
	// Those who know the name say so.
	s := &Set{Model: ModelExact}
	if ok, _ := judge(s, "gpt-4o", "gpt-4o-2024-08-06"); ok {
		t.Error("exact passed a snapshot name")
	}
	s = &Set{ModelMatches: regexp.MustCompile(`^gpt-4o-\d{4}-\d{2}-\d{2}$`)}
	if ok, _ := judge(s, "gpt-4o", "gpt-4o-2024-08-06"); !ok {
		t.Error("model_matches failed its name")
	}
	if ok, why := judge(s, "gpt-4o", "gpt-4o-mini-2024-07-18"); ok || !strings.Contains(why, "does not match") {
		t.Errorf("model_matches passed another model: %q", why)
	}
}

// An embeddings answer whose vector holds values that are not numbers
// (["NaN", null, true, {}]) is wrong, and says so; it was a vector of 4.
func TestEmbeddingsOfNoNumbers(t *testing.T) {
	s := Set{Model: ModelOff, Embeddings: true}
	r := &result.Request{Outcome: result.Success, Inputs: 1, Vectors: 1, Dimensions: openai.NotNumbers}
	s.Run(context.Background(), r, text(""), nil)
	if r.Outcome != result.WrongAnswer || r.Err != Embeddings+": a vector holds values that are not numbers" {
		t.Errorf("%v %q", r.Outcome, r.Err)
	}
}

// Judging stops where the run ends: an interrupt's first signal left a
// judge running for minutes over costly expressions. Once the context is
// done no further expression runs, and the answer, judged in part, is
// cancelled: neither right nor wrong.
func TestJudgingStopsAtCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	reads := 0
	s := &Set{NotMatches: []*regexp.Regexp{regexp.MustCompile(`x`), regexp.MustCompile(`y`), regexp.MustCompile(`z`)}}
	r := &result.Request{Outcome: result.Success, Model: "m", ServedModel: "m"}
	s.Run(ctx, r, func() openai.Answer {
		reads++
		cancel() // the signal comes while the first expression runs
		return openai.Answer{Text: "an answer"}
	}, nil)
	if reads != 1 || r.Outcome != result.Cancelled || r.Checks != nil {
		t.Fatalf("outcome %s, checks %v, the text read %d times: want the judging stopped and the answer cancelled", r.Outcome, r.Checks, reads)
	}
	// The expressions after the signal are not run: not_matches is never
	// decided, nor the schema reached.
	ctx, cancel = context.WithCancel(context.Background())
	var judged []string
	s.readText(ctx, func() string { cancel(); return "an answer" }, nil, nil, func(name string, _ bool, _ func() string) { judged = append(judged, name) })
	if len(judged) != 0 {
		t.Errorf("judged %v after the signal", judged)
	}
	r2 := &result.Request{Outcome: result.Success, Model: "m", ServedModel: "m"}
	s.Run(context.Background(), r2, func() openai.Answer { return openai.Answer{Text: "an answer"} }, nil)
	if r2.Outcome != result.Success || len(r2.Checks) != 2 {
		t.Errorf("without a cancellation: outcome %s, checks %v", r2.Outcome, r2.Checks)
	}
}
