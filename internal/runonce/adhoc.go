package runonce

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/tokenprobe/tokenprobe/internal/config"
	"github.com/tokenprobe/tokenprobe/probe/openai"
)

// AdHoc is one profile against one endpoint given by flags alone, as
// `aiperf profile` takes them. It becomes a configuration file's text, so
// it is validated by the same code, and --print-config prints it for a
// scheduled profile to start from.
type AdHoc struct {
	URL, Model, API string
	Concurrency     int
	Rate            float64
	// ConcurrencySet and RateSet say the flag was given, so that 0 is
	// refused as the configuration refuses it instead of meaning unset.
	ConcurrencySet, RateSet bool
	Arrival                 string
	Smoothness              float64
	Requests                int
	Duration                time.Duration
	Warmup                  int
	InputTokens             string // MEAN[,STDDEV]
	OutputTokens            string
	Goodput                 string // "ttft:500ms itl:50ms"
	Objective               float64
	Sweep                   string // concurrency=1,2,4 or rate=1,2
	Search                  string // concurrency=1:64 or rate=0.5:20
	Dataset, Trace          string
	Batch                   int // inputs per embeddings request
	// aiperf's names: the lengths' mean and stddev apart, the duration
	// in seconds, extra body fields as key:value.
	ISLMean, ISLStddev, OSLMean, OSLStddev int
	DurationSeconds                        float64
	ExtraInputs                            []string
	Speedup                                float64
	// Seed, TimeoutSeconds and Stream are aiperf's --random-seed,
	// --request-timeout-seconds and --streaming.
	Seed           uint64
	TimeoutSeconds float64
	// GracePeriod is aiperf's --benchmark-grace-period: seconds, or inf
	// (no limit); "" is aiperf's default with a duration, 30 s.
	GracePeriod       string
	Stream, StreamSet bool
	Tokenizer         string
	Headers           []string // K=V
	APIKeyEnv         string
	ExtraBody         string // JSON object
	// ServerMetrics and ServerKind name the server's own metrics page.
	ServerMetrics, ServerKind string
	// Expect are RE2 expressions every answer must match; CheckModel is
	// the model check's mode (answer checks).
	Expect     []string
	CheckModel string
	// JSONSchema and Tools are checks.json_schema and checks.tools; Tools
	// also makes a tool call required (tool_choice and tool_call).
	JSONSchema, Tools   string
	ProfileName, Target string
}

// Set reports whether the flags describe a whole run (--url, --model).
func (a *AdHoc) Set() bool { return a.URL != "" || a.Model != "" }

// Any reports whether any flag that describes a profile was given.
func (a *AdHoc) Any() bool {
	ep, load, workload, slo, err := a.parts()
	return err != nil || len(ep)+len(load)+len(workload)+len(slo)+len(a.checks()) > 0
}

// checks is the profile's checks block the flags describe.
func (a *AdHoc) checks() map[string]any {
	c := map[string]any{}
	if len(a.Expect) > 0 {
		c["matches"] = a.Expect
	}
	if a.CheckModel != "" {
		c["model"] = a.CheckModel
	}
	if a.JSONSchema != "" {
		c["json_schema"] = a.JSONSchema
	}
	if a.Tools != "" {
		c["tools"], c["tool_choice"], c["tool_call"] = a.Tools, "required", "required"
	}
	return c
}

// flagOf maps a field path of the generated configuration to the flag
// that set it, so that an error names the flag instead of a line.
var flagOf = []struct{ field, flag string }{
	{"endpoints[0].base_url", "--url"}, {"endpoints[0].model", "--model"}, {"endpoints[0].api_key_env", "--api-key-env"},
	{"endpoints[0].api", "--api"}, {"endpoints[0].headers", "--header"}, {"endpoints[0].extra_body", "--extra-body"},
	{"endpoints[0].server_metrics.kind", "--server-kind"}, {"endpoints[0].server_metrics", "--server-metrics"},
	{"endpoints[0]", "--url"},
	{"profiles[0].load.sweep", "--sweep"}, {"profiles[0].load.search", "--search"}, {"profiles[0].load.concurrency", "--concurrency"}, {"profiles[0].load.max_concurrency", "--concurrency"}, {"profiles[0].load.rate", "--request-rate"},
	{"profiles[0].load.arrival", "--arrival"}, {"profiles[0].load.smoothness", "--smoothness"},
	{"profiles[0].load.requests", "--requests"}, {"profiles[0].load.duration", "--duration"},
	{"profiles[0].load.warmup_requests", "--warmup-requests"}, {"profiles[0].load.grace_period", "--benchmark-grace-period"}, {"profiles[0].load", "--concurrency or --request-rate"},
	{"profiles[0].workload.input_tokens", "--input-tokens"}, {"profiles[0].workload.output_tokens", "--output-tokens"},
	{"profiles[0].workload.dataset", "--dataset"}, {"profiles[0].workload.batch", "--batch"}, {"profiles[0].workload.trace.speedup", "--speedup"},
	{"profiles[0].workload.trace", "--trace"}, {"profiles[0].workload.tokenizer", "--tokenizer"},
	{"profiles[0].workload.seed", "--random-seed"}, {"profiles[0].workload.stream", "--no-streaming"}, {"endpoints[0].timeout", "--request-timeout-seconds"},
	{"profiles[0].slo.objective", "--objective"}, {"profiles[0].slo", "--goodput"},
	{"profiles[0].checks.matches", "--expect"}, {"profiles[0].checks.model", "--check-model"},
	{"profiles[0].checks.json_schema", "--json-schema"}, {"profiles[0].checks.tools", "--tools"},
}

var index = regexp.MustCompile(`\[\d+\]`)

// FlagErrors rewrites the located errors of an ad-hoc configuration with
// the flags that set the fields.
func FlagErrors(err error) error {
	var es config.Errors
	if !errors.As(err, &es) {
		return err
	}
	lines := make([]string, 0, len(es))
	for _, e := range es {
		name := e.Field
		field := index.ReplaceAllString(e.Field, "[0]") // an overridden file's profile or endpoint
		for _, f := range flagOf {
			if field == f.field || strings.HasPrefix(field, f.field+".") || strings.HasPrefix(field, f.field+"[") {
				name = f.flag
				break
			}
		}
		lines = append(lines, name+": "+e.Msg)
	}
	return errors.New(strings.Join(lines, "\n"))
}

// parts are the fields the flags set, by the block of the configuration
// they belong to; a flag not given sets nothing.
func (a *AdHoc) parts() (ep, load, workload, slo map[string]any, err error) {
	ep = map[string]any{}
	if a.URL != "" {
		// aiperf's --url: the server's root (http://host:8000) is the
		// API's base below it (/v1), a URL with a path is the base as
		// written, and one without a scheme is http://. The write-ups'
		// command lines name the root; read as the base, every request
		// went to /chat/completions and got a 404.
		ep["base_url"] = openai.Of(openai.API(a.API)).BaseOfRoot(a.URL)
	}
	if a.Model != "" {
		if strings.Contains(a.Model, ",") {
			return nil, nil, nil, nil, fmt.Errorf("--model %q: one model (aiperf's list of models is a profile per model in a configuration file)", a.Model)
		}
		ep["model"] = a.Model
	}
	if a.TimeoutSeconds < 0 {
		return nil, nil, nil, nil, fmt.Errorf("--request-timeout-seconds: must be positive")
	}
	if a.TimeoutSeconds > 0 {
		ep["timeout"] = time.Duration(a.TimeoutSeconds * float64(time.Second)).String()
	}
	if a.API != "" {
		ep["api"] = a.API
	}
	if a.APIKeyEnv != "" {
		ep["api_key_env"] = a.APIKeyEnv
	}
	if len(a.Headers) > 0 {
		h := map[string]string{}
		for _, kv := range a.Headers {
			// NAME=VALUE, or aiperf's and curl's "Name: value".
			k, v, ok := strings.Cut(kv, "=")
			if c, cv, cok := strings.Cut(kv, ":"); cok && (!ok || len(c) < len(k)) {
				k, v, ok = c, strings.TrimSpace(cv), true
			}
			if !ok || strings.TrimSpace(k) == "" {
				return nil, nil, nil, nil, fmt.Errorf("--header %q: give NAME=VALUE or 'Name: value'", kv)
			}
			h[strings.TrimSpace(k)] = v
		}
		ep["headers"] = h
	}
	var body map[string]any
	if a.ExtraBody != "" {
		if err = json.Unmarshal([]byte(a.ExtraBody), &body); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("--extra-body: not a JSON object: %w", err)
		}
	}
	for _, kv := range a.ExtraInputs {
		k, v, ok := strings.Cut(kv, ":")
		if !ok || k == "" {
			return nil, nil, nil, nil, fmt.Errorf("--extra-inputs %q: give KEY:VALUE (a JSON value, or text)", kv)
		}
		if body == nil {
			body = map[string]any{}
		}
		var val any
		if json.Unmarshal([]byte(v), &val) != nil {
			val = v
		}
		body[k] = val
	}
	if body != nil {
		ep["extra_body"] = body
	}
	if a.ServerMetrics != "" || a.ServerKind != "" {
		sm := map[string]any{}
		if a.ServerMetrics != "" {
			sm["url"] = a.ServerMetrics
		}
		if a.ServerKind != "" {
			sm["kind"] = a.ServerKind
		}
		ep["server_metrics"] = sm
	}

	// A configuration's 0 leaves the load to its default; a flag's 0 is
	// a mistake, refused as the README says (the configuration refuses
	// the negative ones, with the other flags' errors).
	switch {
	case a.ConcurrencySet && a.Concurrency == 0:
		return nil, nil, nil, nil, fmt.Errorf("--concurrency: must be positive")
	case a.RateSet && a.Rate == 0:
		return nil, nil, nil, nil, fmt.Errorf("--request-rate: must be positive")
	}
	load = map[string]any{}
	set := func(k string, v any, ok bool) {
		if ok {
			load[k] = v
		}
	}
	if a.Duration == 0 && a.DurationSeconds > 0 {
		a.Duration = time.Duration(a.DurationSeconds * float64(time.Second))
	}
	if a.Concurrency != 0 && a.Rate != 0 {
		// aiperf's meaning of both: an open loop capped at that many in
		// flight.
		set("max_concurrency", a.Concurrency, true)
	} else {
		set("concurrency", a.Concurrency, a.Concurrency != 0)
	}
	set("rate", a.Rate, a.Rate != 0)
	set("arrival", a.Arrival, a.Arrival != "")
	set("smoothness", a.Smoothness, a.Smoothness != 0)
	set("requests", a.Requests, a.Requests != 0)
	set("duration", a.Duration.String(), a.Duration != 0)
	set("warmup_requests", a.Warmup, a.Warmup != 0)
	switch g := strings.TrimSpace(a.GracePeriod); {
	case g == "":
	case a.Duration == 0:
		return nil, nil, nil, nil, errors.New("--benchmark-grace-period: applies to a run with --benchmark-duration (as in aiperf): requests in flight at the end of a run of --request-count all finish")
	case strings.EqualFold(g, "inf"):
		load["grace_period"] = nil // no limit: every request in flight finishes or times out
	default:
		v, err := strconv.ParseFloat(g, 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, nil, nil, nil, fmt.Errorf("--benchmark-grace-period %q: give seconds (0 or more) or inf", a.GracePeriod)
		}
		load["grace_period"] = time.Duration(v * float64(time.Second)).String()
	}
	if a.Sweep != "" {
		kind, list, ok := strings.Cut(a.Sweep, "=")
		if !ok || (kind != "concurrency" && kind != "rate") {
			return nil, nil, nil, nil, fmt.Errorf("--sweep %q: give concurrency=1,2,4 or rate=0.5,1,2", a.Sweep)
		}
		var levels []float64
		for _, f := range strings.Split(list, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				return nil, nil, nil, nil, fmt.Errorf("--sweep %q: %q is not a number", a.Sweep, f)
			}
			levels = append(levels, v)
		}
		sweep := map[string]any{kind: levels}
		// The per-level length comes from --requests or --duration.
		for _, k := range []string{"requests", "duration"} {
			if v, ok := load[k]; ok {
				sweep[k] = v
				delete(load, k)
			}
		}
		load["sweep"] = sweep
	}

	if a.Search != "" {
		kind, span, ok := strings.Cut(a.Search, "=")
		lo, hi, ok2 := strings.Cut(span, ":")
		if !ok || !ok2 || (kind != "concurrency" && kind != "rate") {
			return nil, nil, nil, nil, fmt.Errorf("--search %q: give concurrency=MIN:MAX or rate=MIN:MAX", a.Search)
		}
		var bounds []float64
		for _, f := range []string{lo, hi} {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				return nil, nil, nil, nil, fmt.Errorf("--search %q: %q is not a number", a.Search, f)
			}
			bounds = append(bounds, v)
		}
		load["search"] = map[string]any{kind: bounds}
	}

	workload = map[string]any{}
	lengths := func(val string, mean, sd int) string {
		if val != "" || mean == 0 {
			return val
		}
		if sd != 0 {
			return fmt.Sprintf("%d,%d", mean, sd)
		}
		return strconv.Itoa(mean)
	}
	in, out := lengths(a.InputTokens, a.ISLMean, a.ISLStddev), lengths(a.OutputTokens, a.OSLMean, a.OSLStddev)
	for _, t := range []struct{ key, flag, val string }{{"input_tokens", "--input-tokens", in}, {"output_tokens", "--output-tokens", out}} {
		if t.val == "" {
			continue
		}
		mean, sd, _ := strings.Cut(t.val, ",")
		m, err := strconv.Atoi(strings.TrimSpace(mean))
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("%s %q: give MEAN or MEAN,STDDEV in tokens", t.flag, t.val)
		}
		tok := map[string]any{"mean": m}
		if sd != "" {
			s, err := strconv.Atoi(strings.TrimSpace(sd))
			if err != nil {
				return nil, nil, nil, nil, fmt.Errorf("%s %q: give MEAN or MEAN,STDDEV in tokens", t.flag, t.val)
			}
			tok["stddev"] = s
		}
		workload[t.key] = tok
	}
	if a.Dataset != "" {
		workload["dataset"] = map[string]any{"file": a.Dataset}
	}
	if a.Batch != 0 {
		workload["batch"] = a.Batch
	}
	if a.Trace != "" {
		tr := map[string]any{"file": a.Trace}
		if a.Speedup != 0 {
			tr["speedup"] = a.Speedup
		}
		workload["trace"] = tr
	} else if a.Speedup != 0 {
		return nil, nil, nil, nil, errors.New("--speedup applies to --trace")
	}
	if a.Tokenizer != "" {
		workload["tokenizer"] = a.Tokenizer
	}
	if a.Seed != 0 {
		workload["seed"] = a.Seed
	}
	if a.StreamSet && !a.Stream {
		workload["stream"] = false
	}

	slo = map[string]any{}
	for _, part := range strings.Fields(strings.ReplaceAll(a.Goodput, ",", " ")) {
		k, v, ok := strings.Cut(part, ":")
		key := map[string]string{"ttft": "ttft", "ttst": "ttst", "itl": "itl", "request_latency": "request_latency", "e2e": "request_latency",
			"output_tokens_per_second": "output_tokens_per_second",
			// aiperf's names, whose times are milliseconds without a unit
			"time_to_first_token": "ttft", "time_to_second_token": "ttst", "inter_token_latency": "itl",
			"output_token_throughput_per_user": "output_tokens_per_second"}[k]
		if _, err := strconv.ParseFloat(v, 64); err == nil && key != "output_tokens_per_second" {
			v += "ms"
		}
		if !ok || key == "" {
			return nil, nil, nil, nil, fmt.Errorf("--goodput %q: give thresholds such as 'ttft:500ms itl:50ms' (ttft, ttst, itl, request_latency, output_tokens_per_second)", a.Goodput)
		}
		if key == "output_tokens_per_second" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, nil, nil, nil, fmt.Errorf("--goodput %q: %s is tokens per second, a number", a.Goodput, k)
			}
			slo[key] = f
		} else {
			slo[key] = v
		}
	}
	if a.Objective != 0 {
		slo["objective"] = a.Objective
	}
	return ep, load, workload, slo, nil
}

// aiperf's defaults, which a run from flags keeps: its request timeout
// (--request-timeout-seconds) and the grace period after
// --benchmark-duration (--benchmark-grace-period).
const (
	AIPerfTimeout = 600 * time.Second
	AIPerfGrace   = 30 * time.Second
)

// YAML is the configuration the flags describe. Errors name the flag.
func (a *AdHoc) YAML() ([]byte, error) {
	if a.URL == "" || a.Model == "" {
		return nil, errors.New("--url and --model are required for a run from flags (or give -c FILE)")
	}
	ep, load, workload, slo, err := a.parts()
	if err != nil {
		return nil, err
	}
	ep["name"] = or(a.Target, "target")
	if len(load) == 0 {
		load["concurrency"] = 1
	}
	// aiperf's run semantics, which its command lines were written for:
	// its request timeout, its grace period after a duration, and no
	// abort on timeouts or a share of failures (in an overload study a
	// timeout is a measurement). The daemon's profiles keep the failure
	// policy: docs/AIPERF.md says where the two differ.
	if _, ok := ep["timeout"]; !ok {
		ep["timeout"] = AIPerfTimeout.String()
	}
	if g, ok := load["grace_period"]; !ok && a.Duration != 0 {
		load["grace_period"] = AIPerfGrace.String()
	} else if ok && g == nil {
		delete(load, "grace_period") // inf
	}
	profile := map[string]any{"name": or(a.ProfileName, "adhoc"), "endpoints": []string{ep["name"].(string)}, "load": load}
	if len(workload) > 0 {
		profile["workload"] = workload
	}
	if len(slo) > 0 {
		profile["slo"] = slo
	}
	if checks := a.checks(); len(checks) > 0 {
		profile["checks"] = checks
	}
	profile["failure"] = map[string]any{"abort": map[string]any{"error_ratio": 0}, "max_error_ratio": 0}
	doc := yaml.Node{}
	if err := doc.Encode(map[string]any{"endpoints": []any{ep}, "profiles": []any{profile}}); err != nil {
		return nil, err
	}
	sortKeys(&doc, "name", "endpoints", "profiles")
	var b strings.Builder
	b.WriteString("# tokenprobe run from flags; save it as a configuration file to schedule the same profile.\n")
	b.WriteString("# aiperf's run semantics: a 600 s timeout, a 30 s grace period after a duration, and no\n")
	b.WriteString("# abort on timeouts or failures (failure:); a scheduled profile may leave them to the defaults.\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	return []byte(b.String()), enc.Close()
}

// Override applies the flags to the profile named (the only one when
// profile is "") of the configuration data and returns the result: the
// flags' load, workload and slo fields replace the profile's, and the
// endpoint flags those of its one endpoint. data must already be valid on
// its own, so that its errors keep their lines.
func (a *AdHoc) Override(data []byte, profile string) ([]byte, error) {
	ep, load, workload, slo, err := a.parts()
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("reading the configuration: %w", err)
	}
	if len(doc.Content) == 0 {
		return nil, errors.New("the configuration is empty")
	}
	root := doc.Content[0]
	profiles := child(root, "profiles")
	if profiles == nil {
		return nil, errors.New("the configuration has no profiles for the flags to change")
	}
	var p *yaml.Node
	var names []string
	for _, n := range profiles.Content {
		name := child(n, "name").Value
		names = append(names, name)
		if name == profile || profile == "" && len(profiles.Content) == 1 {
			p = n
		}
	}
	if p == nil {
		return nil, fmt.Errorf("with flags and -c, name the one profile they change with -p (profiles: %s)", strings.Join(names, ", "))
	}
	for key, fields := range map[string]map[string]any{"load": load, "workload": workload, "slo": slo, "checks": a.checks()} {
		if len(fields) == 0 {
			continue
		}
		block := child(p, key)
		if block == nil {
			block = &yaml.Node{Kind: yaml.MappingNode}
			p.Content = append(p.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, block)
		}
		// A kind of load replaces the other kind, not joins it.
		if key == "load" {
			for given, drop := range map[string][]string{
				"rate": {"concurrency"}, "concurrency": {"rate", "arrival", "smoothness"},
				"sweep": {"concurrency", "rate", "requests", "duration", "stages"},
			} {
				if _, ok := fields[given]; ok {
					for _, k := range drop {
						remove(block, k)
					}
				}
			}
		}
		for k, v := range fields {
			if err := set(block, k, v); err != nil {
				return nil, err
			}
		}
	}
	if len(ep) > 0 {
		eps := child(p, "endpoints")
		if eps == nil || len(eps.Content) != 1 {
			return nil, errors.New("--url, --model and the other endpoint flags change the profile's endpoint: give them for a profile with one endpoint")
		}
		for _, e := range child(root, "endpoints").Content {
			if child(e, "name").Value == eps.Content[0].Value {
				for k, v := range ep {
					if err := set(e, k, v); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	return yaml.Marshal(&doc)
}

// child is the value of key in mapping n, or nil.
func child(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// remove takes key out of mapping n.
func remove(n *yaml.Node, key string) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			n.Content = append(n.Content[:i], n.Content[i+2:]...)
			return
		}
	}
}

// set puts v under key in mapping n, replacing what was there.
func set(n *yaml.Node, key string, v any) error {
	var val yaml.Node
	if err := val.Encode(v); err != nil {
		return err
	}
	if old := child(n, key); old != nil {
		*old = val
		return nil
	}
	n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, &val)
	return nil
}

// sortKeys puts the keys of every mapping in n in the order given, the
// rest after them in their order: a configuration reads endpoints, then
// profiles, and each item's name first.
func sortKeys(n *yaml.Node, order ...string) {
	for _, c := range n.Content {
		sortKeys(c, order...)
	}
	if n.Kind != yaml.MappingNode {
		return
	}
	rank := map[string]int{}
	for i, k := range order {
		rank[k] = i - len(order) // before every key not named
	}
	type pair struct{ k, v *yaml.Node }
	var pairs []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		pairs = append(pairs, pair{n.Content[i], n.Content[i+1]})
	}
	sort.SliceStable(pairs, func(i, j int) bool { return rank[pairs[i].k.Value] < rank[pairs[j].k.Value] })
	n.Content = n.Content[:0]
	for _, p := range pairs {
		n.Content = append(n.Content, p.k, p.v)
	}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
