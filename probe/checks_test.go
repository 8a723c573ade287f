package probe

import (
	"context"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tokenprobe/tokenprobe/internal/sim"
	"github.com/tokenprobe/tokenprobe/probe/check"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/stats"
	"github.com/tokenprobe/tokenprobe/probe/workload"
)

// Every answer check against the simulator's wrong answers, through both
// HTTP clients: with no fault every answer passes; with the fault its
// check fails, the request is a wrong answer with its timing kept, never
// good, and counted in attainment's denominator.
func TestAnswerChecksAgainstTheSimulatorsWrongAnswers(t *testing.T) {
	json := map[string]any{"response_format": map[string]any{"type": "json_object"}}
	doc := map[string]any{"type": "object", "required": []any{"answer"}, "properties": map[string]any{"answer": map[string]any{"type": "string", "minLength": 1}}}
	compiler := jsonschema.NewCompiler()
	if err := compiler.AddResource("answer.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := compiler.Compile("answer.json")
	if err != nil {
		t.Fatal(err)
	}
	// The profile's field, as setup makes it from checks.json_schema.
	jsonSchema := map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "t", "schema": doc}}}
	// A tool with a schema, sent as setup sends checks.tools.
	weather := map[string]any{"type": "object", "required": []any{"city", "days"}, "additionalProperties": false,
		"properties": map[string]any{"city": map[string]any{"type": "string", "minLength": 2}, "days": map[string]any{"type": "integer", "minimum": 1}}}
	if err := compiler.AddResource("weather.json", weather); err != nil {
		t.Fatal(err)
	}
	weatherSchema, err := compiler.Compile("weather.json")
	if err != nil {
		t.Fatal(err)
	}
	toolChecks := check.Set{Tools: map[string]*jsonschema.Schema{"get_weather": weatherSchema}, ToolCallRequired: true}
	tools := map[string]any{"tool_choice": "required", "tools": []any{map[string]any{"type": "function",
		"function": map[string]any{"name": "get_weather", "parameters": weather}}}}
	cases := []struct {
		name   string
		faults sim.Faults
		checks check.Set
		extra  map[string]any
		check  string
		// some: the fault hits a share of the requests, not all.
		some bool
		// whole asks for answers not streamed.
		whole bool
	}{
		{"a gateway's fallback model", sim.Faults{WrongModel: "tiny-model", WrongModelRate: 0.5}, check.Set{}, nil, check.Model, true, false},
		{"truncated", sim.Faults{Truncate: 1}, check.Set{MinOutputTokens: 10}, nil, check.MinOutputTokens, false, false},
		{"garbage", sim.Faults{Garbage: 1}, check.Set{Matches: []*regexp.Regexp{regexp.MustCompile(`\bthe\b`)}}, nil, check.Matches, false, false},
		{"garbage, contains", sim.Faults{Garbage: 1}, check.Set{Contains: []string{" of"}}, nil, check.Contains, false, false},
		{"not matches", sim.Faults{Garbage: 1}, check.Set{NotMatches: []*regexp.Regexp{regexp.MustCompile(`zq[0-9a-f]+v`)}}, nil, check.NotMatches, false, false},
		{"broken JSON", sim.Faults{BadJSON: 1}, check.Set{JSON: true}, json, check.JSON, false, false},
		{"JSON off its schema", sim.Faults{BadJSON: 1}, check.Set{Schema: schema}, jsonSchema, check.JSONSchema, false, false},
		{"finish reason", sim.Faults{}, check.Set{FinishReasons: []string{"stop"}}, nil, check.FinishReason, false, false},
		{"a tool call's broken arguments", sim.Faults{BadJSON: 1}, toolChecks, tools, check.ToolCall, false, false},
		{"a tool call's broken arguments, whole", sim.Faults{BadJSON: 1}, toolChecks, tools, check.ToolCall, false, true},
		{"a function never offered", sim.Faults{Garbage: 1}, toolChecks, tools, check.ToolCall, false, false},
	}
	for _, netHTTP := range []bool{false, true} {
		for _, c := range cases {
			for _, faulty := range []bool{false, true} {
				if c.check == check.FinishReason && !faulty {
					continue // the simulator answers to max_tokens: "length"
				}
				f := sim.Faults{}
				if faulty {
					f = c.faults
				}
				s, err := sim.Start("127.0.0.1:0", sim.Config{Model: "m", PrefillBase: time.Millisecond, DecodeBase: time.Millisecond, Seed: 3, Faults: f})
				if err != nil {
					t.Fatal(err)
				}
				var mu sync.Mutex
				var got []*result.Request
				run := &Run{Profile: "p", Plan: Plan{Stages: []Stage{{Concurrency: 2, Requests: 20}}},
					Workload: workload.NewSynthetic(workload.Lengths{Mean: 8}, workload.Lengths{Mean: 20}, !c.whole, 1),
					Endpoint: &client.Endpoint{Name: "e", BaseURL: s.URL(), API: openai.Chat, Model: "m", Timeout: 5 * time.Second, IncludeUsage: true},
					Client:   client.New(client.Options{NetHTTP: netHTTP}), Checks: c.checks, Extra: c.extra,
					SLO:   slo.Set{Objective: 0.9},
					Sinks: []Sink{sinkFunc(func(r *result.Request) { mu.Lock(); got = append(got, r); mu.Unlock() })}}
				sum, err := run.Execute(context.Background())
				s.Close()
				name := c.name
				if netHTTP {
					name += ", net/http"
				}
				if !faulty {
					name += ", no fault"
				}
				if err != nil || len(got) != 20 {
					t.Fatalf("%s: %v, %d results", name, err, len(got))
				}
				wrong := 0
				for _, r := range got {
					failed := false
					for _, ch := range r.Checks {
						failed = failed || ch.Name == c.check && !ch.Pass
					}
					switch {
					case r.Outcome == result.WrongAnswer && failed:
						wrong++
						if !r.HasTTFT() && !c.whole || r.E2E <= 0 || r.Err == "" {
							t.Errorf("%s: a wrong answer lost its timing or its message: %+v", name, r)
						}
					case r.Outcome != result.Success || failed:
						t.Errorf("%s: outcome %v, checks %+v, %s", name, r.Outcome, r.Checks, r.Err)
					}
				}
				switch {
				case !faulty && wrong > 0, faulty && !c.some && wrong != 20, faulty && c.some && (wrong < 3 || wrong > 17):
					t.Errorf("%s: %d wrong answers of 20", name, wrong)
				}
				if sum.WrongAnswers != wrong || sum.Success != 20-wrong || sum.Good > 20-wrong {
					t.Errorf("%s: summary: %d wrong, %d success, %d good; counted %d wrong", name, sum.WrongAnswers, sum.Success, sum.Good, wrong)
				}
				if faulty && !c.some && (sum.Attainment != 0 || !c.whole && sum.TTFT.Count != 20 || sum.E2E.Count != 20) {
					t.Errorf("%s: attainment %v, %d TTFTs: wrong answers count as failed and keep their timing", name, sum.Attainment, sum.TTFT.Count)
				}
				if faulty {
					t.Logf("%s: %d of 20 wrong; first: %s", name, wrong, firstFailure(sum.Checks, c.check))
				}
			}
		}
	}
}

func firstFailure(checks []stats.CheckStat, name string) string {
	for _, c := range checks {
		if c.Name == name {
			return c.FirstFailure
		}
	}
	return ""
}
