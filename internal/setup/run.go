package setup

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tokenprobe/tokenprobe/internal/config"
	"github.com/tokenprobe/tokenprobe/probe"
	"github.com/tokenprobe/tokenprobe/probe/check"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/tokenizer"
	"github.com/tokenprobe/tokenprobe/probe/workload"
)

// NewRun builds the run of profile p against one endpoint. It fails only
// when a trace the profile replays cannot be read.
func NewRun(p *config.Profile, ep *client.Endpoint, c *client.Client, sinks ...probe.Sink) (*probe.Run, error) {
	w := p.Workload
	var api openai.API
	if ep != nil {
		api = ep.API
	}
	checks, extra, err := ChecksOf(p, api)
	if err != nil {
		return nil, err
	}
	run := &probe.Run{
		Profile: p.Name,
		Plan:    PlanOf(&p.Load),
		Workload: workload.NewSynthetic(
			workload.Lengths{Mean: w.InputTokens.Mean, Stddev: w.InputTokens.Stddev},
			workload.Lengths{Mean: w.OutputTokens.Mean, Stddev: w.OutputTokens.Stddev},
			w.Streaming(), w.Seed),
		SLO:      SLOSet(&p.SLO),
		Checks:   checks,
		Extra:    extra,
		Failure:  FailureOf(&p.Failure, p.Checks.Abort),
		Endpoint: ep,
		Client:   c,
		Sinks:    sinks,
	}
	run.Plan.CancelFraction, run.Plan.CancelAfter = w.Cancel.Fraction, w.Cancel.After.D()
	run.MaxWrongRatio = MaxWrongRatio(&p.Checks)
	run.OSL = probe.OSLModes[w.OSL] // "" is auto
	if w.TokenizerPath != "" {
		tk, err := tokenizer.Shared(w.TokenizerPath)
		if err != nil {
			return nil, err
		}
		run.CountTokens = tk.Count
		if err := run.Workload.(*workload.Synthetic).UseTokenizer(tk); err != nil {
			return nil, fmt.Errorf("%s: %w", w.Tokenizer, err)
		}
	}
	if d := w.Dataset; d != nil && d.Format == "multi_turn" {
		sessions, err := multiTurn.get(d.Path)
		if err != nil {
			return nil, err
		}
		run.Sessions = workload.NewSessions(sessions, d.Sampling == "random",
			workload.Lengths{Mean: w.OutputTokens.Mean, Stddev: w.OutputTokens.Stddev}, w.Streaming(), w.Seed)
	} else if d != nil {
		entries, err := singleTurn.get(d.Path)
		if err != nil {
			return nil, err
		}
		run.Workload = workload.NewDataset(entries, d.Sampling == "random",
			workload.Lengths{Mean: w.OutputTokens.Mean, Stddev: w.OutputTokens.Stddev}, w.Streaming(), w.Seed)
	}
	if t := w.Trace; t != nil {
		rows, err := mooncake.get(t.Path)
		if err != nil {
			return nil, err
		}
		rows, offsets := workload.Window(rows, t.From.D(), t.To.D(), t.Speedup)
		if len(rows) == 0 {
			return nil, fmt.Errorf("%s: no requests between %s and %s", t.File, t.From.D(), t.To.D())
		}
		st := probe.Stage{Offsets: offsets, MaxConcurrency: p.Load.MaxConcurrency, Requests: len(rows)}
		if span := offsets[len(offsets)-1]; span > 0 {
			st.Rate = float64(len(rows)-1) / span.Seconds() // the mean rate, for the load_level label
		}
		run.Plan.Stages = []probe.Stage{st}
		run.Workload = workload.NewReplay(rows, w.Streaming(), t.Salt)
	}
	if w.Batch > 1 {
		run.Workload = workload.Batched{Source: run.Workload, N: w.Batch}
	}
	if mi := p.ModelIdentity; mi != nil {
		run.Workload = &workload.Identity{Prompts: IdentityPromptsOf(mi), MaxTokens: mi.MaxTokens, Stream: w.Streaming()}
		// Greedy over the profile's own fields, which the endpoint's
		// extra_body cannot override.
		greedy := maps.Clone(extra)
		if greedy == nil {
			greedy = map[string]any{}
		}
		maps.Copy(greedy, openai.Of(api).Greedy)
		if mi.WantsLogprobs() {
			maps.Copy(greedy, openai.Of(api).Logprobs)
		}
		run.Extra = greedy
	}
	if pc := p.PrefixCache; pc != nil {
		run.PrefixCache = workload.NewPrefixCache(pc.PrefixTokens,
			workload.Lengths{Mean: w.OutputTokens.Mean, Stddev: w.OutputTokens.Stddev}, w.Streaming(), pc.MinSpeedup)
	}
	return run, nil
}

// FailureOf is a profile's failure policy: probe.DefaultFailure with the
// fields the profile sets; wrongFails is its checks' abort.
func FailureOf(f *config.Failure, wrongFails bool) probe.Failure {
	p := probe.DefaultFailure()
	p.WrongAnswersFail = wrongFails
	setDuration(&p.BackoffBase, f.Backoff.Base)
	setDuration(&p.BackoffMax, f.Backoff.Max)
	setDuration(&p.RetryAfterMax, f.RetryAfterMax)
	setDuration(&p.AbortUnreachable, f.Abort.UnreachableFor)
	if f.Abort.MinRequests != nil {
		p.AbortMinRequests = *f.Abort.MinRequests
	}
	if f.Abort.ErrorRatio != nil {
		p.AbortErrorRatio = *f.Abort.ErrorRatio
	}
	if f.MaxErrorRatio != nil {
		p.MaxErrorRatio = *f.MaxErrorRatio
	}
	if p.BackoffBase > p.BackoffMax && p.BackoffMax > 0 {
		p.BackoffMax = p.BackoffBase // a base set above the default cap
	}
	return p
}

// DefaultScheduleBackoffMax caps a job's schedule backoff when its
// profile sets no failure.schedule_backoff_max.
const DefaultScheduleBackoffMax = time.Hour

// ScheduleBackoffMax is how far the daemon may stretch a job's schedule
// after aborted runs in a row.
func ScheduleBackoffMax(f *config.Failure) time.Duration {
	d := DefaultScheduleBackoffMax
	setDuration(&d, f.ScheduleBackoffMax)
	return d
}

func setDuration(dst *time.Duration, d *config.Duration) {
	if d != nil {
		*dst = d.D()
	}
}

// PlanOf converts a profile's load block.
func PlanOf(l *config.Load) probe.Plan {
	plan := probe.Plan{Warmup: l.WarmupRequests, Seed: l.Seed}
	if g := l.GracePeriod; g != nil {
		// 0 cancels at once; the plan's 0 is no limit.
		plan.Grace = max(g.D(), time.Nanosecond)
	}
	if sr := l.Search; sr != nil {
		st := l.Stage
		search := &probe.Search{Precision: sr.Precision, Steps: sr.Steps, Step: probe.Stage{
			Arrival: st.Arrival, Smoothness: st.Smoothness, MaxConcurrency: st.MaxConcurrency, Duration: st.Duration.D(), Requests: st.Requests,
		}}
		if len(sr.Rate) == 2 {
			search.Rate, search.Min, search.Max = true, sr.Rate[0], sr.Rate[1]
		} else if len(sr.Concurrency) == 2 {
			search.Min, search.Max = float64(sr.Concurrency[0]), float64(sr.Concurrency[1])
		}
		plan.Search = search
		plan.PrepareSearch()
		return plan
	}
	if len(l.Stages) == 0 && l.Stage == (config.Stage{}) {
		return plan // a trace's schedule, filled in by NewRun
	}
	for _, st := range l.Plan() {
		plan.Stages = append(plan.Stages, probe.Stage{
			Concurrency: st.Concurrency, Rate: st.Rate, Arrival: st.Arrival, Smoothness: st.Smoothness, MaxConcurrency: st.MaxConcurrency,
			Duration: st.Duration.D(), Requests: st.Requests, RampTo: st.RampTo,
		})
	}
	return plan
}

// SLOSet converts a profile's SLO block to thresholds.
func SLOSet(s *config.SLO) slo.Set {
	var set slo.Set
	add := func(k slo.Kind, d config.Duration) {
		if d > 0 {
			set.Thresholds = append(set.Thresholds, slo.Threshold{Kind: k, Max: d.D()})
		}
	}
	add(slo.TTFT, s.TTFT)
	add(slo.TTST, s.TTST)
	add(slo.ITL, s.ITL)
	add(slo.RequestLatency, s.RequestLatency)
	if s.OutputTokensPerSecond > 0 {
		set.Thresholds = append(set.Thresholds, slo.Threshold{Kind: slo.OutputTokensPerSecond, Floor: s.OutputTokensPerSecond})
	}
	set.Objective = s.Objective
	return set
}

// ChecksOf converts a profile's checks block (config has checked its
// expressions), with the fields its checks add to every request: the
// response_format that asks for JSON of the json_schema's schema, the
// tools and tool_choice. A dataset whose prompts carry expect adds that
// check, an endpoint of api embeddings the check of its vectors.
func ChecksOf(p *config.Profile, api openai.API) (check.Set, map[string]any, error) {
	c := &p.Checks
	s := check.Set{Expect: expects(&p.Workload), Embeddings: openai.Of(api).Vectors,
		Model: check.ModelModes[c.Model], FinishReasons: c.FinishReason,
		MinOutputTokens: c.MinOutputTokens, MaxOutputTokens: c.MaxOutputTokens,
		Contains: c.Contains, JSON: c.JSON, MaxAnswerBytes: c.MaxAnswerBytes,
	}
	if c.ModelMatches != "" {
		s.ModelMatches = regexp.MustCompile(c.ModelMatches)
	}
	for _, e := range c.Matches {
		s.Matches = append(s.Matches, regexp.MustCompile(e))
	}
	for _, e := range c.NotMatches {
		s.NotMatches = append(s.NotMatches, regexp.MustCompile(e))
	}
	extra := map[string]any{}
	if c.SchemaPath != "" {
		schema, doc, err := LoadSchema(c.SchemaPath)
		if err != nil {
			return s, nil, err
		}
		s.Schema = schema
		extra["response_format"] = map[string]any{
			"type": "json_schema", "json_schema": map[string]any{"name": "tokenprobe_check", "schema": doc},
		}
	}
	if c.ToolsPath != "" {
		tools, fields, err := ToolsOf(c)
		if err != nil {
			return s, nil, err
		}
		s.Tools, s.ToolCallRequired = tools, c.ToolCall == "required"
		maps.Copy(extra, fields)
	}
	if len(extra) == 0 {
		extra = nil
	}
	return s, extra, nil
}

// expects reports whether a workload's prompts carry expectations.
func expects(w *config.Workload) bool {
	d := w.Dataset
	if d == nil || w.Trace != nil {
		return false
	}
	if d.Format == "multi_turn" {
		sessions, err := multiTurn.get(d.Path)
		for _, s := range sessions {
			for _, t := range s.Turns {
				if t.Expect != nil {
					return err == nil
				}
			}
		}
		return false
	}
	entries, err := singleTurn.get(d.Path)
	return err == nil && workload.Expects(entries)
}

// ToolsOf is a checks block's tools, each with its parameters' schema,
// and the fields that send them: tools and tool_choice.
func ToolsOf(c *config.Checks) (map[string]*jsonschema.Schema, map[string]any, error) {
	tools, defs, err := LoadTools(c.ToolsPath)
	if err != nil {
		return nil, nil, err
	}
	fields := map[string]any{"tools": defs}
	switch c.ToolChoice {
	case "":
	case "auto", "required", "none":
		fields["tool_choice"] = c.ToolChoice
	default:
		if _, ok := tools[c.ToolChoice]; !ok {
			return nil, nil, fmt.Errorf("tool_choice %q is not one of the tools in %s", c.ToolChoice, c.Tools)
		}
		fields["tool_choice"] = map[string]any{"type": "function", "function": map[string]any{"name": c.ToolChoice}}
	}
	return tools, fields, nil
}

// LoadTools reads a file of OpenAI tool definitions (a JSON array of
// {"type": "function", "function": {"name", "description",
// "parameters"}}): each function's parameters compiled as a JSON Schema,
// and the definitions to send.
func LoadTools(path string) (map[string]*jsonschema.Schema, any, error) {
	doc, err := readSchemaJSON(path)
	if err != nil {
		return nil, nil, err
	}
	defs, ok := doc.([]any)
	if !ok || len(defs) == 0 {
		return nil, nil, fmt.Errorf("%s: not a JSON array of tool definitions", path)
	}
	tools := map[string]*jsonschema.Schema{}
	c := schemaCompiler()
	for i, d := range defs {
		def, _ := d.(map[string]any)
		fn, _ := def["function"].(map[string]any)
		name, _ := fn["name"].(string)
		switch {
		case def == nil || def["type"] != "function":
			return nil, nil, fmt.Errorf("%s: tool %d: not {\"type\": \"function\", ...}", path, i)
		case name == "":
			return nil, nil, fmt.Errorf("%s: tool %d: no function.name", path, i)
		}
		if _, dup := tools[name]; dup {
			return nil, nil, fmt.Errorf("%s: tool %d: a second function named %q", path, i, name)
		}
		tools[name] = nil
		params, ok := fn["parameters"]
		if !ok {
			continue
		}
		url := fmt.Sprintf("%s/tools/%d", path, i)
		if err := c.AddResource(url, params); err != nil {
			return nil, nil, fmt.Errorf("%s: tool %s: %w", path, name, err)
		}
		schema, err := c.Compile(url)
		if err == nil {
			err = refCycle(schema)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: tool %s: parameters: not a valid JSON Schema: %s", path, name, check.SchemaError(err))
		}
		tools[name] = schema
	}
	return tools, defs, nil
}

// LoadSchema reads and compiles a JSON Schema file (draft 2020-12 unless
// it names its own), and returns its document to send to the server.
func LoadSchema(path string) (*jsonschema.Schema, any, error) {
	doc, err := readSchemaJSON(path)
	if err != nil {
		return nil, nil, err
	}
	c := schemaCompiler()
	if err := c.AddResource(path, doc); err != nil {
		return nil, nil, err
	}
	schema, err := c.Compile(path)
	if err == nil {
		err = refCycle(schema)
	}
	if err != nil {
		// One line, as every configuration error is.
		return nil, nil, errors.New("not a valid JSON Schema: " + check.SchemaError(err))
	}
	return schema, doc, nil
}

// DefaultMaxWrongRatio is the share of wrong answers a run tolerates when
// its checks block says nothing: one in a hundred, so that a gate over
// `tokenprobe run` fails on an endpoint that answers garbage, SLO or not.
const DefaultMaxWrongRatio = 0.01

// MaxWrongRatio is a checks block's tolerance for wrong answers.
func MaxWrongRatio(c *config.Checks) float64 {
	if c.MaxWrongRatio != nil {
		return *c.MaxWrongRatio
	}
	return DefaultMaxWrongRatio
}

// maxSchemaBytes bounds a JSON Schema or tools file.
const maxSchemaBytes = 1 << 20

// readSchemaJSON reads a schema or tools file of at most maxSchemaBytes:
// a longer one is refused as such, not cut and then misread.
func readSchemaJSON(path string) (any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSchemaBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxSchemaBytes {
		return nil, fmt.Errorf("%s: over %d bytes, the most a schema or tools file may be", path, maxSchemaBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return doc, nil
}

// schemaCompiler compiles schemas of draft 2020-12 unless they name their
// own, reading nothing outside the file: a $ref to another file or a URL
// is refused (it read any local file, and quoted its first bytes in the
// error).
func schemaCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refusedLoader{})
	return c
}

type refusedLoader struct{}

func (refusedLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref to %s: a schema may refer only to itself (#...), not to other files or URLs", url)
}

// refCycle refuses a schema whose $refs loop: it compiles, and then
// fails every answer that reaches the loop as a "reference cycle". The
// compiled schema is walked whole, so a loop that only an answer's deeper
// parts reach (a property's $ref to a $def that refers to itself) is
// refused too: a loop is a path from a schema back to itself through
// keywords that apply to the same value ($ref, allOf, anyOf, oneOf, not,
// if/then/else, dependentSchemas), where the validator meets the same
// schema at the same place again. A path through properties or items
// moves to a part of the value: a recursive schema of a tree is fine.
// The walk visits each schema once: linear in the schema's size (at most
// 1 MiB of file).
func refCycle(root *jsonschema.Schema) error {
	const (
		unseen = iota
		onPath
		done
	)
	state := map[*jsonschema.Schema]int{}
	var loop []string
	// same is the schemas that apply to the value s applies to.
	same := func(s *jsonschema.Schema) []*jsonschema.Schema {
		out := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else}
		if s.DynamicRef != nil {
			out = append(out, s.DynamicRef.Ref)
		}
		out = append(append(append(out, s.AllOf...), s.AnyOf...), s.OneOf...)
		for _, d := range s.DependentSchemas {
			out = append(out, d)
		}
		for _, d := range s.Dependencies {
			if d, ok := d.(*jsonschema.Schema); ok {
				out = append(out, d)
			}
		}
		return out
	}
	// parts is the schemas that apply to a part of the value.
	parts := func(s *jsonschema.Schema) []*jsonschema.Schema {
		out := []*jsonschema.Schema{s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema}
		out = append(out, s.PrefixItems...)
		for _, p := range s.Properties {
			out = append(out, p)
		}
		for _, p := range s.PatternProperties {
			out = append(out, p)
		}
		for _, a := range []any{s.AdditionalProperties, s.Items, s.AdditionalItems} {
			switch a := a.(type) {
			case *jsonschema.Schema:
				out = append(out, a)
			case []*jsonschema.Schema:
				out = append(out, a...)
			}
		}
		return out
	}
	var path []*jsonschema.Schema
	var walk func(s *jsonschema.Schema) bool
	walk = func(s *jsonschema.Schema) bool {
		if s == nil || state[s] == done {
			return false
		}
		if state[s] == onPath {
			for i, p := range path {
				if p == s {
					for _, q := range path[i:] {
						loop = append(loop, q.Location)
					}
					loop = append(loop, s.Location)
					break
				}
			}
			return true
		}
		state[s] = onPath
		path = append(path, s)
		for _, n := range same(s) {
			if walk(n) {
				return true
			}
		}
		path = path[:len(path)-1]
		state[s] = done
		return false
	}
	// Every schema, reached by any keyword, is a start: the loop can be
	// anywhere an answer may lead.
	seen := map[*jsonschema.Schema]bool{}
	queue := []*jsonschema.Schema{root}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if s == nil || seen[s] {
			continue
		}
		seen[s] = true
		if walk(s) {
			return fmt.Errorf("its $refs loop: %s", strings.Join(loop, " -> "))
		}
		queue = append(append(queue, same(s)...), parts(s)...)
	}
	return nil
}
