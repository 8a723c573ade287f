package probe

import (
	"context"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tokenprobe/tokenprobe/internal/sim"
	"github.com/tokenprobe/tokenprobe/internal/timingtest"
	"github.com/tokenprobe/tokenprobe/probe/check"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/workload"
)

// Every API against the simulator over real HTTP, streamed and whole,
// through both clients: every request succeeds with its tokens from the
// server's usage, a streamed one with its TTFT; a tool offered in chat's
// shape (as checks.tools sends it) is called validly in each API's own
// shape, and the simulator's broken arguments fail the tool_call check.
func TestEveryAPIAgainstTheSimulator(t *testing.T) {
	weather := map[string]any{"type": "object", "required": []any{"city"}, "properties": map[string]any{"city": map[string]any{"type": "string"}}}
	compiler := jsonschema.NewCompiler()
	if err := compiler.AddResource("weather.json", weather); err != nil {
		t.Fatal(err)
	}
	schema, err := compiler.Compile("weather.json")
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]any{"tool_choice": "required", "tools": []any{map[string]any{"type": "function",
		"function": map[string]any{"name": "get_weather", "parameters": weather}}}}
	toolChecks := check.Set{Tools: map[string]*jsonschema.Schema{"get_weather": schema}, ToolCallRequired: true}
	// As setup sends checks.json_schema: chat's shape, which the body
	// puts in each API's.
	// (The simulator answers JSON as {"answer": text}.)
	answer := map[string]any{"type": "object", "required": []any{"answer"}, "properties": map[string]any{"answer": map[string]any{"type": "string"}}}
	if err := compiler.AddResource("answer.json", answer); err != nil {
		t.Fatal(err)
	}
	answerSchema, err := compiler.Compile("answer.json")
	if err != nil {
		t.Fatal(err)
	}
	jsonSchema := map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "t", "schema": answer}}}
	for _, api := range openai.APIs {
		if api == openai.Embeddings {
			continue // TestEmbeddingsAgainstTheSimulator
		}
		for _, stream := range []bool{true, false} {
			for _, netHTTP := range []bool{false, true} {
				for _, c := range []struct {
					name   string
					faults sim.Faults
					checks check.Set
					extra  map[string]any
					wrong  bool
				}{
					{"text", sim.Faults{}, check.Set{}, nil, false},
					{"tool call", sim.Faults{}, toolChecks, tools, false},
					{"broken tool call", sim.Faults{BadJSON: 1}, toolChecks, tools, true},
					{"JSON of a schema", sim.Faults{}, check.Set{Schema: answerSchema}, jsonSchema, false},
					{"JSON off its schema", sim.Faults{BadJSON: 1}, check.Set{Schema: answerSchema}, jsonSchema, true},
				} {
					kserve := api == openai.KServeGenerate
					if (api == openai.Completions || kserve) && c.extra != nil {
						continue // completions and KServe's generate have no tools, nor a response format
					}
					extra := c.extra
					if kserve {
						// The vLLM backend's output that counts each response's
						// tokens; no count of the prompt's comes back.
						extra = map[string]any{"return_num_output_tokens": true}
					}
					name := string(api) + ", " + c.name
					if !stream {
						name += ", whole"
					}
					if netHTTP {
						name += ", net/http"
					}
					s, err := sim.Start("127.0.0.1:0", sim.Config{Model: "m", PrefillBase: time.Millisecond, DecodeBase: time.Millisecond, Seed: 5, Faults: c.faults})
					if err != nil {
						t.Fatal(err)
					}
					var mu sync.Mutex
					var got []*result.Request
					run := &Run{Profile: "p", Plan: Plan{Stages: []Stage{{Concurrency: 2, Requests: 8}}},
						Workload: workload.NewSynthetic(workload.Lengths{Mean: 8}, workload.Lengths{Mean: 12}, stream, 1),
						Endpoint: &client.Endpoint{Name: "e", BaseURL: s.URL(), API: api, Model: "m", Timeout: 5 * time.Second, IncludeUsage: true},
						Client:   client.New(client.Options{NetHTTP: netHTTP}), Checks: c.checks, Extra: extra,
						Sinks: []Sink{sinkFunc(func(r *result.Request) { mu.Lock(); got = append(got, r); mu.Unlock() })}}
					_, err = run.Execute(context.Background())
					s.Close()
					if err != nil || len(got) != 8 {
						t.Fatalf("%s: %v, %d results", name, err, len(got))
					}
					for _, r := range got {
						want := result.Success
						if c.wrong {
							want = result.WrongAnswer
						}
						switch {
						case r.Outcome != want:
							t.Errorf("%s: outcome %v, want %v: %s %+v", name, r.Outcome, want, r.Err, r.Checks)
						case kserve && (r.OutputSource != result.SourceUsage || r.InputSource != result.SourceIntended || r.OutputTokens != 12):
							t.Errorf("%s: OSL %d from %v, ISL %d from %v; want 12 from the answers' counts added up, the intended ISL", name, r.OutputTokens, r.OutputSource, r.InputTokens, r.InputSource)
						case !kserve && (r.OutputSource != result.SourceUsage || r.InputSource != result.SourceUsage || r.OutputTokens <= 0):
							t.Errorf("%s: OSL %d from %v, ISL %d from %v; want both from usage", name, r.OutputTokens, r.OutputSource, r.InputTokens, r.InputSource)
						case stream && (!r.HasTTFT() || r.E2E < r.TTFT):
							t.Errorf("%s: TTFT %v E2E %v", name, r.TTFT, r.E2E)
						case r.ServedModel != "m":
							t.Errorf("%s: served model %q, want the answer's model read", name, r.ServedModel)
						}
					}
				}
			}
		}
	}
}

// Embeddings are measured as what they are: request latency and input
// tokens from the server's usage, no TTFT; a batch of inputs comes back
// as that many vectors of one length, and the simulator's faults (one
// vector fewer, an empty one, one shorter) fail the embeddings check.
func TestEmbeddingsAgainstTheSimulator(t *testing.T) {
	for _, netHTTP := range []bool{false, true} {
		for _, c := range []struct {
			name   string
			faults sim.Faults
			why    string
		}{
			{"right", sim.Faults{}, ""},
			{"one vector fewer", sim.Faults{Truncate: 1}, "embeddings: 3 vectors for 4 inputs"},
			{"an empty vector", sim.Faults{Empty: 1}, "embeddings: an empty vector"},
			{"a shorter vector", sim.Faults{Garbage: 1}, "embeddings: vectors of different lengths"},
		} {
			s, err := sim.Start("127.0.0.1:0", sim.Config{Model: "m", PrefillBase: time.Millisecond, Seed: 5, EmbeddingDimensions: 64, Faults: c.faults})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var got []*result.Request
			run := &Run{Profile: "p", Plan: Plan{Stages: []Stage{{Concurrency: 2, Requests: 6}}},
				Workload: workload.Batched{Source: workload.NewSynthetic(workload.Lengths{Mean: 10}, workload.Lengths{Mean: 1}, true, 1), N: 4},
				Endpoint: &client.Endpoint{Name: "e", BaseURL: s.URL(), API: openai.Embeddings, Model: "m", Timeout: 5 * time.Second},
				Client:   client.New(client.Options{NetHTTP: netHTTP}), Checks: check.Set{Embeddings: true},
				Sinks: []Sink{sinkFunc(func(r *result.Request) { mu.Lock(); got = append(got, r); mu.Unlock() })}}
			sum, err := run.Execute(context.Background())
			s.Close()
			if err != nil || len(got) != 6 {
				t.Fatalf("%s: %v, %d results", c.name, err, len(got))
			}
			for _, r := range got {
				switch {
				case c.why == "" && (r.Outcome != result.Success || r.Vectors != 4 || r.Dimensions != 64):
					t.Errorf("%s: %v %s, %d vectors of %d", c.name, r.Outcome, r.Err, r.Vectors, r.Dimensions)
				case c.why != "" && (r.Outcome != result.WrongAnswer || r.Err != c.why):
					t.Errorf("%s: %v %q, want a wrong answer %q", c.name, r.Outcome, r.Err, c.why)
				case r.HasTTFT() || r.Streaming || r.E2E <= 0 || r.InputTokens != 40 || r.InputSource != result.SourceUsage || r.OutputTokens != 0:
					t.Errorf("%s: TTFT %v streamed %v E2E %v, ISL %d from %v, OSL %d; want latency alone, 40 input tokens from usage, no output", c.name, r.TTFT, r.Streaming, r.E2E, r.InputTokens, r.InputSource, r.OutputTokens)
				}
			}
			if c.why == "" && (sum.TTFT.Count != 0 || sum.E2E.Count != 6) {
				t.Errorf("%s: summary TTFT count %d, latency count %d", c.name, sum.TTFT.Count, sum.E2E.Count)
			}
		}
	}
}

// A reasoning model's thinking is timed apart in every API as in chat:
// TTFT at the first reasoning token, the time to first output token at
// the first answer token, the reasoning counted in the output tokens and
// kept out of the answer's text. The simulator sleeps a decode step
// before each token after the first: floors, but a client thread that a
// busy machine schedules late stamps the first token late, so the
// timing holds if one of three runs holds it (timingtest.Retry).
func TestReasoningIsTimedApartInEveryAPI(t *testing.T) {
	const thinking, step = 3, 5 * time.Millisecond
	for _, api := range []openai.API{openai.Chat, openai.Responses, openai.Messages} {
		timingtest.Retry(t, 3, func(a *timingtest.Attempt) {
			s, err := sim.Start("127.0.0.1:0", sim.Config{Model: "m", PrefillBase: time.Millisecond, DecodeBase: step, Seed: 5, ReasoningTokens: thinking})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var mu sync.Mutex
			var got []*result.Request
			run := &Run{Profile: "p", Plan: Plan{Stages: []Stage{{Concurrency: 1, Requests: 3}}},
				Workload: workload.NewSynthetic(workload.Lengths{Mean: 8}, workload.Lengths{Mean: 5}, true, 1),
				Endpoint: &client.Endpoint{Name: "e", BaseURL: s.URL(), API: api, Model: "m", Timeout: 5 * time.Second, IncludeUsage: true},
				Client:   client.New(client.Options{}), Checks: check.Set{NotMatches: []*regexp.Regexp{regexp.MustCompile(`hmm`)}},
				Sinks: []Sink{sinkFunc(func(r *result.Request) { mu.Lock(); got = append(got, r); mu.Unlock() })}}
			if _, err := run.Execute(context.Background()); err != nil || len(got) != 3 {
				t.Fatalf("%s: %v, %d results", api, err, len(got))
			}
			for _, r := range got {
				if r.Outcome != result.Success || !r.HasTTFO || r.OutputTokens != 5+thinking {
					t.Fatalf("%s: %v %s, TTFO %v, OSL %d (want %d)", api, r.Outcome, r.Err, r.HasTTFO, r.OutputTokens, 5+thinking)
				}
				if r.TTFO-r.TTFT < thinking*step {
					a.Errorf("%s: TTFT %v TTFO %v, want at least %v apart", api, r.TTFT, r.TTFO, thinking*step)
				}
			}
		})
	}
}

// The simulator joins the probe's traces as vLLM does: each request's
// server span is a child of the span its traceparent named, in the same
// trace, its queue time the one the simulator's queue histogram
// observed, summed over the run to within a millisecond.
func TestServerSpansAreChildrenOfTheProbes(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	s, err := sim.Start("127.0.0.1:0", sim.Config{Model: "m", Slots: 1, PrefillBase: 5 * time.Millisecond, DecodeBase: time.Millisecond, Seed: 5,
		Tracer: tp.Tracer("sim")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	var got []*result.Request
	run := &Run{Profile: "p", Plan: Plan{Stages: []Stage{{Concurrency: 3, Requests: 9}}}, // three at a time on one slot: a queue
		Workload: workload.NewSynthetic(workload.Lengths{Mean: 8}, workload.Lengths{Mean: 4}, true, 1),
		Endpoint: &client.Endpoint{Name: "e", BaseURL: s.URL(), API: openai.Chat, Model: "m", Timeout: 5 * time.Second},
		Client:   client.New(client.Options{TraceSample: 1}),
		Sinks:    []Sink{sinkFunc(func(r *result.Request) { mu.Lock(); got = append(got, r); mu.Unlock() })}}
	if _, err := run.Execute(context.Background()); err != nil || len(got) != 9 {
		t.Fatalf("%v, %d results", err, len(got))
	}
	byParent := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range spans.GetSpans().Snapshots() {
		byParent[sp.Parent().SpanID().String()] = sp
	}
	var queued time.Duration
	for _, r := range got {
		sp := byParent[r.Trace.SpanIDString()]
		if sp == nil || sp.Name() != "llm_request" || sp.SpanContext().TraceID().String() != r.Trace.TraceIDString() || !sp.Parent().IsRemote() {
			t.Fatalf("request %s/%s: server span %v", r.Trace.TraceIDString(), r.Trace.SpanIDString(), sp)
		}
		for _, a := range sp.Attributes() {
			if a.Key == "gen_ai.latency.time_in_queue" {
				queued += time.Duration(a.Value.AsFloat64() * float64(time.Second))
			}
		}
	}
	total, n := s.Handler.QueueTime()
	if d := queued - total; n != 9 || d < -time.Millisecond || d > time.Millisecond || total <= 0 {
		t.Fatalf("spans' queue time %v, the simulator's %v over %d requests", queued, total, n)
	}
}
