package check

import (
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tokenprobe/tokenprobe/probe/result"
)

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
		s.Run(r, func() string { t.Fatal("the model check read the text"); return "" })
		if got := r.Outcome == result.Success; got != c.pass {
			t.Errorf("%v %q served by %q: pass %v, want %v (%s)", c.mode, c.asked, c.served, got, c.pass, r.Err)
		}
	}
	long := "a\x00b\n" + strings.Repeat("x", 400)
	r := &result.Request{Outcome: result.Success}
	s := Set{Model: ModelOff, Matches: []*regexp.Regexp{regexp.MustCompile(`^Paris$`)}}
	s.Run(r, func() string { return long })
	if r.Outcome != result.WrongAnswer || !strings.Contains(r.Err, `"a\x00b\n`) || !strings.HasSuffix(r.Err, `"…`) || len(r.Err) > 300 {
		t.Fatalf("%v: %q", r.Outcome, r.Err)
	}
	// Only a success is judged: an error keeps its outcome and gets no check.
	e := &result.Request{Outcome: result.Error, Model: "a", ServedModel: "b"}
	(&Set{}).Run(e, nil)
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
		s.Run(r, func() string { return answer })
		if got := r.Outcome == result.Success; got != pass || len(r.Checks) != 1 || r.Checks[0].Name != JSONSchema {
			t.Errorf("%s: pass %v, want %v: %s %+v", answer, got, pass, r.Err, r.Checks)
		}
		if !pass {
			t.Logf("%s: %s", answer, r.Err)
		}
	}
}
