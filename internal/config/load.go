// Package config reads tokenprobe's YAML configuration: endpoints to probe
// and the profiles replayed against them. Decoding is strict, defaults are
// filled in one place, and every error names the file, line, column and the
// field path as the user wrote it.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"gopkg.in/yaml.v3"

	"github.com/tokenprobe/tokenprobe/internal/regexcost"
)

// LoadFile reads and validates the file at path.

// currencyCode is an ISO 4217 code's shape: what a label may carry.
var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

func LoadFile(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse validates data as read from file (used for messages and for
// resolving relative api_key_file paths).
func Parse(file string, data []byte) (*Config, error) {
	cfg, _, err := parse(file, data, false)
	return cfg, err
}

// CheckFile validates the file at path as LoadFile does, except that a
// secret it cannot read (an unset variable, a missing key file) is a
// warning, not an error: a CI job can check a configuration without the
// production secrets. serve and run still refuse such a file.
func CheckFile(path string) (*Config, Errors, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return parse(path, data, true)
}

func parse(file string, data []byte, lenient bool) (*Config, Errors, error) {
	l := &locator{file: file, pos: map[string]position{}, lenient: lenient}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, Errors{{File: file, Msg: "the file is empty: it needs at least one endpoint and one profile"}}
		}
		l.decodeError(err)
		for _, e := range l.errs {
			misindented(data, e)
		}
		return nil, nil, l.errs
	}
	var extra yaml.Node
	if dec.Decode(&extra) == nil {
		return nil, nil, Errors{{File: file, Line: extra.Line, Msg: "a second YAML document; tokenprobe reads one per file"}}
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	l.walk(doc, reflect.TypeFor[Config](), "")
	cfg := &Config{}
	if err := doc.Decode(cfg); err != nil {
		l.decodeError(err)
	}
	if len(l.errs) > 0 {
		return nil, nil, l.errs
	}
	cfg.defaults()
	cfg.validate(l, filepath.Dir(file))
	if len(l.errs) > 0 {
		l.errs.Sort()
		return nil, nil, l.errs
	}
	l.warns.Sort()
	cfg.loc = l
	return cfg, l.warns, nil
}

// Errorf returns an error at a field path as the file writes it
// ("profiles[0].workload.tokenizer"), located at its line and column: for
// the checks made beyond this package (files a configuration names, the
// GPU fields tokenprobe knows).
func (c *Config) Errorf(path, format string, args ...any) *Error {
	if c.loc == nil {
		return &Error{Field: path, Msg: fmt.Sprintf(format, args...)}
	}
	field, pos := c.loc.at(path)
	return &Error{File: c.loc.file, Line: pos.line, Column: pos.col, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Sort puts errors in file order (validation visits maps in random order).
func (es Errors) Sort() {
	sort.SliceStable(es, func(i, j int) bool {
		a, b := es[i], es[j]
		return a.Line < b.Line || a.Line == b.Line && a.Column < b.Column
	})
}

// The values of an endpoint's http_client.
const (
	HTTPClientTokenprobe = "tokenprobe"
	HTTPClientNetHTTP    = "net/http"
)

func (c *Config) defaults() {
	for _, e := range c.Endpoints {
		if e == nil {
			continue
		}
		if e.API == "" {
			e.API = "chat"
		}
		if e.HTTPClient == "" {
			e.HTTPClient = HTTPClientTokenprobe
		}
		if e.Timeout == 0 {
			e.Timeout = Duration(120 * time.Second)
		}
		if e.ConnectTimeout == 0 {
			e.ConnectTimeout = Duration(10 * time.Second)
		}
		if e.Simulator != nil && e.Model == "" {
			e.Model = "tokenprobe-sim"
		}
		if m := e.ServerMetrics; m != nil {
			if m.Kind == "" {
				m.Kind = "auto"
			}
			if m.Interval == 0 {
				m.Interval = Duration(time.Second)
			}
		}
	}
	for _, p := range c.Profiles {
		if p == nil {
			continue
		}
		if sw := p.Load.Sweep; sw != nil && len(p.Load.Stages) == 0 {
			for _, c := range sw.Concurrency {
				p.Load.Stages = append(p.Load.Stages, Stage{Concurrency: c, Requests: sw.Requests, Duration: sw.Duration})
			}
			for _, r := range sw.Rate {
				p.Load.Stages = append(p.Load.Stages, Stage{Rate: r, Requests: sw.Requests, Duration: sw.Duration})
			}
		}
		switch sr := p.Load.Search; {
		case sr != nil:
			// The search sets the level; each step's length and arrival
			// process default as a stage's do.
			if sr.Precision == 0 {
				sr.Precision = 0.1
			}
			if sr.Steps == 0 {
				sr.Steps = 10
			}
			st := &p.Load.Stage
			if st.Duration == 0 && st.Requests == 0 {
				st.Duration = Duration(60 * time.Second)
			}
			if len(sr.Rate) > 0 && st.Arrival == "" {
				st.Arrival = "poisson"
				if st.Smoothness > 0 {
					st.Arrival = "gamma"
				}
			}
		case p.PrefixCache != nil:
			pc := p.PrefixCache
			if pc.PrefixTokens == 0 {
				pc.PrefixTokens = DefaultPrefixTokens
			}
			if pc.Triples == 0 {
				pc.Triples = DefaultCacheTriples
			}
			if pc.MinSpeedup == 0 {
				pc.MinSpeedup = DefaultMinSpeedup
			}
			// One triple at a time, the plan's requests being triples.
			pc.loadGiven = !reflect.ValueOf(p.Load).IsZero()
			pc.inputGiven = p.Workload.InputTokens != (Tokens{})
			if !pc.loadGiven {
				p.Load.Stage = Stage{Concurrency: 1, Requests: pc.Triples}
			}
			if p.Workload.OutputTokens.Mean == 0 {
				p.Workload.OutputTokens.Mean = DefaultCacheOutTokens
			}
		case p.ModelIdentity != nil:
			mi := p.ModelIdentity
			if mi.Prompts == 0 {
				mi.Prompts = DefaultIdentityPrompts
			}
			if mi.MaxTokens == 0 {
				mi.MaxTokens = DefaultIdentityMaxTokens
			}
			if mi.LearnRuns == 0 {
				mi.LearnRuns = DefaultLearnRuns
			}
			if mi.MinAgreement == 0 {
				mi.MinAgreement = DefaultMinAgreement
			}
			if mi.MaxLogprobDistance == 0 {
				mi.MaxLogprobDistance = DefaultMaxLogprobDistance
			}
			// Every prompt once, one at a time: a server batching
			// requests together may answer them otherwise.
			mi.loadGiven = !reflect.ValueOf(p.Load).IsZero()
			mi.lengthsGiven = p.Workload.InputTokens != (Tokens{}) || p.Workload.OutputTokens != (Tokens{})
			if !mi.loadGiven {
				p.Load.Stage = Stage{Concurrency: 1, Requests: mi.Prompts}
			}
		case len(p.Load.Stages) == 0 && p.Workload.Trace == nil:
			p.Load.Stage.defaults()
		}
		if p.Schedule.Every == 0 && !p.Schedule.Continuous && !p.Schedule.Manual {
			p.Schedule.Every = Duration(5 * time.Minute)
		}
		for i := range p.Load.Stages {
			p.Load.Stages[i].defaults()
		}
		w := &p.Workload
		if w.InputTokens.Mean == 0 {
			w.InputTokens.Mean = 128
		}
		if w.OutputTokens.Mean == 0 {
			w.OutputTokens.Mean = 128
		}
		if len(p.Endpoints) == 0 && len(c.Endpoints) == 1 && c.Endpoints[0] != nil {
			p.Endpoints = []string{c.Endpoints[0].Name}
		}
	}
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

func (c *Config) validate(l *locator, dir string) {
	if len(c.Endpoints) == 0 {
		l.errf("endpoints", "at least one endpoint is required")
	}
	if len(c.Profiles) == 0 {
		l.errf("profiles", "at least one profile is required")
	}
	seen := map[string]bool{}
	for i, e := range c.Endpoints {
		path := fmt.Sprintf("endpoints[%d]", i)
		if e == nil {
			l.errf(path, "empty endpoint")
			continue
		}
		checkName(l, path, e.Name, seen, "endpoint")
		given := 0
		for _, set := range []bool{e.BaseURL != "", len(e.BaseURLs) > 0, e.Simulator != nil} {
			if set {
				given++
			}
		}
		switch {
		case given == 0:
			l.errf(path, "base_url is required (or base_urls for replicas, or simulator for the built-in simulated server)")
		case given > 1:
			l.errf(path+".base_url", "give one of base_url, base_urls and simulator")
		}
		checkURL(l, path+".base_url", e.BaseURL)
		for j, u := range e.BaseURLs {
			checkURL(l, fmt.Sprintf("%s.base_urls[%d]", path, j), u)
		}
		if e.Simulator != nil {
			e.Simulator.validate(l, path+".simulator")
			if e.Simulator.Answers != "" {
				e.Simulator.AnswersPath = resolve(dir, e.Simulator.Answers)
			}
		}
		if !slices.Contains(APIs, e.API) {
			l.errf(path+".api", "%q is not one of %s", e.API, strings.Join(APIs, ", "))
		}
		if e.HTTPClient != HTTPClientTokenprobe && e.HTTPClient != HTTPClientNetHTTP {
			l.errf(path+".http_client", "%q is not %s or %s", e.HTTPClient, HTTPClientTokenprobe, HTTPClientNetHTTP)
		}
		for i, a := range e.SourceAddresses {
			if net.ParseIP(a) == nil {
				l.errf(fmt.Sprintf("%s.source_addresses[%d]", path, i), "%q is not an IP address (one of this host's: 10.0.0.5, or for a loopback endpoint any of 127.0.0.0/8)", a)
			}
		}
		if e.Model == "" {
			l.errf(path, "model is required")
		}
		if a := e.Auth; a != nil {
			switch {
			case (a.AWSSigV4 == nil) == (a.Google == nil):
				l.errf(path+".auth", "give one of aws_sigv4 and google")
			case e.APIKeyFile != "" || e.APIKeyEnv != "":
				l.errf(path+".auth", "auth signs every request: leave out api_key_file and api_key_env")
			case a.AWSSigV4 != nil && a.AWSSigV4.Region == "":
				l.errf(path+".auth.aws_sigv4.region", "required: the region requests are signed for (us-east-1)")
			}
			if s := a.AWSSigV4; s != nil && s.Service == "" {
				s.Service = "bedrock"
			}
		}
		if p := e.Price; p != nil {
			fields := []struct {
				name string
				v    *float64
			}{{"input_per_million", &p.InputPerMillion}, {"output_per_million", &p.OutputPerMillion}, {"cached_input_per_million", p.CachedInputPerMillion}}
			for _, f := range fields {
				if f.v != nil && !within(*f.v, 0, MaxPricePerMillion) {
					l.errf(path+".price."+f.name, "%v is not a price: give 0 to %g per million tokens", *f.v, float64(MaxPricePerMillion))
				}
			}
			if p.Currency == "" {
				p.Currency = "USD"
			}
			if !currencyCode.MatchString(p.Currency) {
				l.errf(path+".price.currency", "%q is no ISO 4217 code (three capital letters: USD, EUR)", p.Currency)
			}
		}
		if e.Timeout < 0 || e.ConnectTimeout < 0 {
			l.errf(path+".timeout", "timeouts must be positive")
		}
		e.Headers.validate(l, path+".headers", dir, "; a bearer token takes api_key_file or api_key_env")
		e.resolveKey(l, path, dir)
		for k := range e.Headers {
			if strings.EqualFold(k, "authorization") && (e.APIKeyFile != "" || e.APIKeyEnv != "") {
				l.errf(path+".headers."+k, "give api_key_file or api_key_env, or an Authorization header, not both")
			}
		}
		if e.TLS != nil {
			e.TLS.validate(l, path+".tls", dir, e)
		}
		if e.ServerMetrics != nil {
			e.ServerMetrics.validate(l, path+".server_metrics", dir, e.Simulator != nil, len(e.BaseURLs))
		}
	}
	if o := c.OTLP; o != nil {
		if o.Protocol != "" && o.Protocol != "http" && o.Protocol != "grpc" {
			l.errf("otlp.protocol", "%q is not http or grpc", o.Protocol)
		}
		if o.Interval < 0 || o.Timeout < 0 {
			l.errf("otlp.interval", "interval and timeout must be positive")
		}
		o.Headers.validate(l, "otlp.headers", dir, ", or set it in OTEL_EXPORTER_OTLP_HEADERS")
	}
	if t := c.Tracing; t != nil && t.Sample != nil && (*t.Sample < 0 || *t.Sample > 1) {
		l.errf("tracing.sample", "%v is not a share between 0 and 1 (0.1: one request in ten)", *t.Sample)
	}
	if t := c.Tracing; t != nil && t.TraceState != "" {
		if _, err := trace.ParseTraceState(t.TraceState); err != nil {
			l.errf("tracing.tracestate", "%q is not a W3C tracestate: comma-separated vendor=value members, keys lower case, values printable ASCII without spaces, commas or =", t.TraceState)
		}
	}
	if g := c.GPU; g != nil {
		switch g.Source {
		case "dcgm", "auto":
			if g.URL != "" {
				l.errf("gpu.url", "url is for source dcgm-exporter; %s takes an nv-hostengine address, or none for in-process", g.Source)
			}
		case "nvml":
			if g.URL != "" || g.Address != "" {
				l.errf("gpu.source", "nvml reads the local driver: it takes no url nor address")
			}
		case "dcgm-exporter":
			checkURL(l, "gpu.url", g.URL)
			if g.URL == "" {
				l.errf("gpu", "url is required with source dcgm-exporter (http://host:9400/metrics)")
			}
		default:
			l.errf("gpu.source", "%q is not auto, dcgm, nvml or dcgm-exporter", g.Source)
		}
		if g.Interval < 0 {
			l.errf("gpu.interval", "must be positive")
		}
	}
	seen = map[string]bool{}
	for i, p := range c.Profiles {
		path := fmt.Sprintf("profiles[%d]", i)
		if p == nil {
			l.errf(path, "empty profile")
			continue
		}
		checkName(l, path, p.Name, seen, "profile")
		if len(p.Endpoints) == 0 {
			l.errf(path, "endpoints is required: name the endpoints this profile runs against")
		}
		for j, name := range p.Endpoints {
			e := c.Endpoint(name)
			switch {
			case e == nil:
				l.errf(fmt.Sprintf("%s.endpoints[%d]", path, j), "no endpoint is named %q%s", name, c.endpointSuggestion(name))
			case p.Workload.Batch > 1 && e.API != "embeddings":
				l.errf(path+".workload.batch", "a batch of inputs is for api embeddings; endpoint %q speaks %s", name, e.API)
			}
		}
		if p.Workload.Batch < 0 {
			l.errf(path+".workload.batch", "must not be negative")
		}
		p.Load.validate(l, path+".load", p.Workload.Trace != nil)
		if p.Load.Search != nil && p.SLO.Objective <= 0 {
			l.errf(path+".load.search", "a search needs slo.objective: the attainment each step must meet")
		}
		if p.Load.Search != nil && p.Shard.Split {
			l.errf(path+".shard.split", "a search decides each step from the last: it cannot be divided over replicas")
		}
		p.Schedule.validate(l, path+".schedule")
		p.Checks.validate(l, path+".checks", dir)
		p.Workload.validate(l, path+".workload", dir)
		if p.Workload.Trace != nil && (len(p.Load.Stages) > 0 || p.Load.Rate > 0 || p.Load.Concurrency > 0 || p.Load.Requests > 0 || p.Load.Duration > 0) {
			l.errf(path+".load", "a trace sets the schedule: with workload.trace, load takes only max_concurrency and warmup_requests")
		}
		p.SLO.validate(l, path+".slo")
		p.Failure.validate(l, path+".failure")
		if pc := p.PrefixCache; pc != nil {
			pc.validate(l, path, p, c)
		}
		if mi := p.ModelIdentity; mi != nil {
			mi.validate(l, path, p, dir)
		}
	}
}

// validate checks a model-identity probe's bounds, and that nothing else
// in its profile sets what it sets itself.
func (mi *ModelIdentity) validate(l *locator, path string, p *Profile, dir string) {
	miPath := path + ".model_identity"
	if p.PrefixCache != nil {
		l.errf(miPath, "a profile is a prefix_cache probe or a model_identity probe, not both")
		return
	}
	if mi.Prompts < 4 || mi.Prompts > MaxIdentityPrompts {
		l.errf(miPath+".prompts", "%d is not between 4 and %d (the built-in prompts)", mi.Prompts, MaxIdentityPrompts)
	}
	if mi.MaxTokens < 1 || mi.MaxTokens > MaxIdentityMaxTokens {
		l.errf(miPath+".max_tokens", "%d is not between 1 and %d", mi.MaxTokens, MaxIdentityMaxTokens)
	}
	if mi.LearnRuns < 1 || mi.LearnRuns > MaxLearnRuns {
		l.errf(miPath+".learn_runs", "%d is not between 1 and %d", mi.LearnRuns, MaxLearnRuns)
	}
	if !(mi.MinAgreement > 0 && mi.MinAgreement < 1) {
		l.errf(miPath+".min_agreement", "%v is not a share between 0 and 1 (0.5: half the prompts answered as the reference answers them)", mi.MinAgreement)
	}
	if !(mi.MaxLogprobDistance > 0 && mi.MaxLogprobDistance <= MaxMaxLogprobDistance) {
		l.errf(miPath+".max_logprob_distance", "%v is not between 0 and %d nats a token (%v: between the same weights in F32 and in F16, and in F16 and in Q8_0)", mi.MaxLogprobDistance, MaxMaxLogprobDistance, DefaultMaxLogprobDistance)
	}
	if mi.Reference != "" {
		mi.ReferencePath = resolve(dir, mi.Reference)
	}
	w := &p.Workload
	switch {
	case mi.loadGiven:
		l.errf(path+".load", "a model_identity profile sends each prompt once, one at a time: leave load out")
	case mi.lengthsGiven:
		l.errf(path+".workload", "a model_identity profile's prompts are its own and its answers max_tokens long: leave input_tokens and output_tokens out")
	case w.Dataset != nil || w.Trace != nil || w.Batch > 1 || w.Cancel.Fraction > 0 || w.Tokenizer != "":
		l.errf(path+".workload", "a model_identity profile makes its own prompts: no dataset, trace, batch, cancel nor tokenizer")
	case p.Shard.Split:
		l.errf(path+".shard.split", "a model_identity profile's answers are judged together: it cannot be divided over replicas")
	}
}

// validate checks a prefix-cache probe's bounds, and that nothing else in
// its profile sets what it sets itself or cannot be compared by TTFT.
func (pc *PrefixCache) validate(l *locator, path string, p *Profile, c *Config) {
	pcPath := path + ".prefix_cache"
	if pc.PrefixTokens < 16 || pc.PrefixTokens > MaxPrefixTokens {
		l.errf(pcPath+".prefix_tokens", "%d is not between 16 and %d", pc.PrefixTokens, MaxPrefixTokens)
	}
	if pc.Triples < 2 || pc.Triples > MaxCacheTriples {
		l.errf(pcPath+".triples", "%d is not between 2 and %d (a verdict needs two triples for an interval)", pc.Triples, MaxCacheTriples)
	}
	if !(pc.MinSpeedup > 1 && pc.MinSpeedup <= MaxMinSpeedup) {
		l.errf(pcPath+".min_speedup", "%v is not above 1 and at most %d (warm this many times faster than uncached)", pc.MinSpeedup, MaxMinSpeedup)
	}
	w := &p.Workload
	switch {
	case pc.loadGiven:
		l.errf(path+".load", "a prefix_cache profile sends its triples one at a time, prefix_cache.triples of them: leave load out")
	case pc.inputGiven:
		l.errf(path+".workload.input_tokens", "a prefix_cache profile's prompts are its prefix_tokens and a short question: leave input_tokens out")
	case w.Dataset != nil || w.Trace != nil:
		l.errf(path+".workload", "a prefix_cache profile makes its own prompts: no dataset nor trace")
	case w.Batch > 1 || w.Cancel.Fraction > 0:
		l.errf(path+".workload", "a prefix_cache profile compares whole answers' TTFT: no batch nor cancel")
	case w.Tokenizer != "":
		l.errf(path+".workload.tokenizer", "a prefix_cache profile's prefix is vocabulary words, one token each in common vocabularies: no tokenizer")
	}
	for j, name := range p.Endpoints {
		if e := c.Endpoint(name); e != nil && e.API == "embeddings" {
			l.errf(fmt.Sprintf("%s.endpoints[%d]", path, j), "endpoint %q speaks embeddings, which has no first token: a prefix_cache profile needs a generating API", name)
		}
	}
}

func (f *Failure) validate(l *locator, path string) {
	for name, d := range map[string]*Duration{"backoff.base": f.Backoff.Base, "backoff.max": f.Backoff.Max,
		"retry_after_max": f.RetryAfterMax, "abort.unreachable_for": f.Abort.UnreachableFor, "schedule_backoff_max": f.ScheduleBackoffMax} {
		if d != nil && *d < 0 {
			l.errf(path+"."+name, "must not be negative (0 turns it off)")
		}
	}
	if b := f.Backoff; b.Base != nil && b.Max != nil && *b.Max > 0 && *b.Base > *b.Max {
		l.errf(path+".backoff.max", "%s is below backoff.base (%s)", b.Max.D(), b.Base.D())
	}
	for name, r := range map[string]*float64{"abort.error_ratio": f.Abort.ErrorRatio, "max_error_ratio": f.MaxErrorRatio} {
		if r != nil && (*r < 0 || *r > 1) {
			l.errf(path+"."+name, "%v is not a fraction between 0 and 1 (0.5 means 50%%)", *r)
		}
	}
	if n := f.Abort.MinRequests; n != nil && *n < 0 {
		l.errf(path+".abort.min_requests", "must not be negative (0 turns the error-ratio abort off)")
	}
}

func checkURL(l *locator, path, raw string) {
	if raw == "" {
		return
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		l.errf(path, "%q is not an http(s) URL", raw)
	} else if u.User != nil {
		l.errf(path, "credentials in the URL would leak into logs: use api_key_file or api_key_env")
	} else {
		for _, name := range slices.Sorted(maps.Keys(u.Query())) {
			if credentialParam(name) {
				l.errf(path, "the query's %q looks like a credential, and URLs end up in logs everywhere: send it as a header from a file or a variable (headers: {%s: {env: VARIABLE}}), or use api_key_file or api_key_env", name, name)
			}
		}
	}
}

// credentialParam reports whether a query parameter's name looks like a
// credential's (key, token, sig, secret, code, pass..., pwd, hmac, otp).
// A server that echoes its request line in an error body (a 401's) would
// otherwise put the value in every artifact and page.
func credentialParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"key", "token", "secret", "pass", "pwd", "hmac", "credential", "otp", "nonce"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	switch n {
	case "sig", "signature", "code", "auth", "x-amz-signature":
		return true
	}
	return strings.HasSuffix(n, "sig") || strings.HasSuffix(n, "_code")
}

func checkName(l *locator, path, name string, seen map[string]bool, what string) {
	switch {
	case name == "":
		l.errf(path, "name is required")
	case !namePattern.MatchString(name):
		l.errf(path+".name", "%q is not a valid %s name (letters, digits, '_', '.', '-'; at most 63)", name, what)
	case seen[name]:
		l.errf(path+".name", "%s %q is defined twice", what, name)
	}
	seen[name] = true
}

func (e *Endpoint) resolveKey(l *locator, path, dir string) {
	e.APIKey = secretFrom(l, path, dir, "api_key_file", e.APIKeyFile, "api_key_env", e.APIKeyEnv)
}

// secretFrom reads the secret that the fields fileField (a file, relative
// to dir) or envField (a variable) name: one of them, never both.
func secretFrom(l *locator, path, dir, fileField, file, envField, env string) Secret {
	var v Secret
	switch {
	case file != "" && env != "":
		l.errf(path+"."+envField, "give %s or %s, not both", fileField, envField)
	case file != "":
		v, _ = readSecretFile(l, path+"."+fileField, dir, file)
	case env != "":
		v, _ = readSecretEnv(l, path+"."+envField, env)
	}
	return v
}

func (m *ServerMetrics) validate(l *locator, path, dir string, simulated bool, replicas int) {
	switch {
	case m.URL == "" && len(m.URLs) == 0 && !simulated:
		l.errf(path, "url is required (the server's metrics page, such as http://host:8000/metrics)")
	case (m.URL != "" || len(m.URLs) > 0) && simulated:
		l.errf(path+".url", "a simulator endpoint serves its metrics itself: leave url out")
	case m.URL != "" && len(m.URLs) > 0:
		l.errf(path+".urls", "give url (one server) or urls (one page per base_urls entry), not both")
	case m.URL != "" && replicas > 1:
		// One replica's page counts only the requests its server served:
		// every run would read as a restart (96 finished against the
		// probe's 192 answers).
		l.errf(path+".url", "one metrics page for %d replicas (base_urls): its server serves only its share of the requests, so every run would be withheld as a restart. Write urls: with one page per base_urls entry, in the same order (urls: [http://replica-1:8000/metrics, http://replica-2:8000/metrics, ...])", replicas)
	case len(m.URLs) > 0 && len(m.URLs) != max(replicas, 1):
		l.errf(path+".urls", "%d page(s) for %d replicas (base_urls): give one page per base_urls entry, in the same order", len(m.URLs), max(replicas, 1))
	}
	check := func(field, raw string) {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			l.errf(field, "%q is not an http(s) URL", raw)
		} else if u.User != nil {
			l.errf(field, "credentials in the URL would leak into logs: use bearer_token_file or bearer_token_env")
		}
	}
	if m.URL != "" {
		check(path+".url", m.URL)
	}
	for i, u := range m.URLs {
		check(fmt.Sprintf("%s.urls[%d]", path, i), u)
	}
	if !slices.Contains(ServerKinds, m.Kind) {
		l.errf(path+".kind", "%q is not one of %s", m.Kind, strings.Join(ServerKinds, ", "))
	}
	if m.Interval < Duration(100*time.Millisecond) {
		l.errf(path+".interval", "%v is too short: at least 100ms, so that reading the page does not load the server", m.Interval.D())
	}
	m.BearerToken = secretFrom(l, path, dir, "bearer_token_file", m.BearerTokenFile, "bearer_token_env", m.BearerTokenEnv)
}

// readSecretFile reads a secret from file (relative to dir), trimmed of
// surrounding white space. The path is no secret; the content is, and is
// never read into a message.
func readSecretFile(l *locator, path, dir, file string) (Secret, bool) {
	f := resolve(dir, file)
	b, err := os.ReadFile(f)
	if err != nil {
		l.missing(path, "cannot read %s: %v", f, errors.Unwrap(err))
		return "", false
	}
	v := Secret(strings.TrimSpace(string(b)))
	if v == "" {
		l.missing(path, "%s is empty", f)
		return "", false
	}
	return v, true
}

func readSecretEnv(l *locator, path, name string) (Secret, bool) {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		l.missing(path, "environment variable %s is not set", name)
		return "", false
	}
	return Secret(v), true
}

// resolve makes a path relative to the configuration's folder absolute.
func resolve(dir, file string) string {
	if filepath.IsAbs(file) {
		return file
	}
	return filepath.Join(dir, file)
}

// headerName is what RFC 9110 allows in a field name (a token).
var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// validate checks header names, refuses credentials written inline (hint
// ends that error), and reads the values given as files or variables.
func (hs Headers) validate(l *locator, path, dir, hint string) {
	for k, h := range hs {
		p := path + "." + k
		switch {
		case !headerName.MatchString(k):
			l.errf(p, "%q is not a valid header name", k)
		case !h.IsSecret() && IsCredentialHeader(k):
			l.errf(p, "%s carries a credential, which is never written in the file: read it from a file or an environment variable, as {file: /run/secrets/NAME} or {env: VARIABLE}%s", k, hint)
		case !h.IsSecret() && strings.ContainsAny(h.Inline, "\r\n\x00"):
			l.errf(p, "a header value cannot hold a line break or a NUL")
		case h.File != "":
			h.Secret, _ = readSecretFile(l, p+".file", dir, h.File)
		case h.Env != "":
			h.Secret, _ = readSecretEnv(l, p+".env", h.Env)
		}
		hs[k] = h
	}
}

func (t *TLS) validate(l *locator, path, dir string, e *Endpoint) {
	https := strings.HasPrefix(e.BaseURL, "https://")
	for _, u := range e.BaseURLs {
		https = https || strings.HasPrefix(u, "https://")
	}
	if !https {
		l.errf(path, "tls applies to https base URLs; this endpoint has none")
		return
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		l.errf(path, "give cert_file and key_file together (a client certificate and its key)")
		return
	}
	if t.CAFile != "" {
		t.caPath = resolve(dir, t.CAFile)
	}
	if t.CertFile != "" {
		t.certPath, t.keyPath = resolve(dir, t.CertFile), resolve(dir, t.KeyFile)
	}
	if _, err := t.Config(); err != nil {
		field := ".ca_file"
		if ce := (*certError)(nil); errors.As(err, &ce) {
			field = ".cert_file"
		}
		l.errf(path+field, "%v", err)
	}
}

func (s *Simulator) validate(l *locator, path string) {
	if s.Slots < 0 || s.MaxQueue < 0 || s.TokensPerChunk < 0 || s.ReasoningTokens < 0 {
		l.errf(path, "slots, max_queue, tokens_per_chunk and reasoning_tokens must not be negative")
	}
	if s.DecodeSlowdown < 0 || s.Jitter < 0 {
		l.errf(path, "decode_slowdown and jitter must not be negative")
	}
	f := s.Faults
	valid := true
	for name, p := range map[string]float64{"error_500": f.Error500, "error_503": f.Error503, "error_429": f.Error429,
		"auth": f.Auth, "quota": f.Quota, "overloaded": f.Overloaded, "content_filter": f.ContentFilter,
		"context_length": f.ContextLength, "model_not_found": f.ModelNotFound,
		"disconnect": f.Disconnect, "stall": f.Stall, "malformed": f.Malformed,
		"empty": f.Empty, "truncate": f.Truncate, "garbage": f.Garbage, "bad_json": f.BadJSON, "wrong_model_rate": f.WrongModelRate} {
		if p < 0 || p > 1 {
			l.errf(path+".faults."+name, "%v is not a probability between 0 and 1", p)
			valid = false
		}
	}
	if s.RateLimit.Requests < 0 || s.RateLimit.Tokens < 0 || s.RateLimit.Window < 0 {
		l.errf(path+".rate_limit", "requests, tokens and window must not be negative")
	}
	if s.Provider != "" && !slices.Contains([]string{"openai", "azure", "anthropic"}, s.Provider) { // sim.Providers; setup checks the two agree
		l.errf(path+".provider", "%q is none of openai, azure, anthropic", s.Provider)
	}
	if valid && (f.Error500+f.Error503+f.Error429+f.Auth+f.Quota+f.Overloaded+f.ContentFilter+f.ContextLength+f.ModelNotFound > 1 || f.Disconnect+f.Stall+f.Malformed > 1 || f.Empty+f.Truncate+f.Garbage+f.BadJSON > 1) {
		l.errf(path+".faults", "error rates, mid-stream fault rates and wrong-answer rates must each add up to at most 1")
	}
	if f.WrongModelRate > 0 && f.WrongModel == "" {
		l.errf(path+".faults.wrong_model_rate", "needs wrong_model: the model to answer with")
	}
}

func (s *Schedule) validate(l *locator, path string) {
	if s.Manual {
		for _, f := range []struct {
			name string
			set  bool
		}{{"every", s.Every != 0}, {"continuous", s.Continuous}, {"jitter", s.Jitter != 0}, {"window", s.Window != "" || s.Timezone != ""}} {
			if f.set {
				l.errf(path+"."+f.name, "a manual profile runs only when asked: remove %s or manual", f.name)
			}
		}
		return
	}
	switch {
	case s.Continuous && s.Every != 0:
		l.errf(path+".every", "give every or continuous, not both")
	case !s.Continuous && s.Every < Duration(time.Second):
		l.errf(path+".every", "must be at least 1s")
	case s.Jitter < 0 || !s.Continuous && s.Jitter >= s.Every:
		l.errf(path+".jitter", "must be at least 0 and less than every")
	}
	if s.Window != "" || s.Timezone != "" {
		if _, err := ParseWindow(s.Window, s.Timezone); err != nil {
			l.errf(path+".window", "%v", err)
		}
	}
	if s.Budget.RequestsPerHour < 0 || s.Budget.TokensPerHour < 0 {
		l.errf(path+".budget", "must not be negative")
	}
	if !within(s.Budget.MaxCostPerDay, 0, MaxCostPerDay) {
		l.errf(path+".budget.max_cost_per_day", "%v is not a budget: give 0 (none) to %g", s.Budget.MaxCostPerDay, float64(MaxCostPerDay))
	}
}

func (sr *Search) validate(l *locator, path string) {
	switch {
	case len(sr.Concurrency) > 0 == (len(sr.Rate) > 0):
		l.errf(path, "give concurrency: [MIN, MAX] or rate: [MIN, MAX]")
	case len(sr.Concurrency) > 0 && (len(sr.Concurrency) != 2 || sr.Concurrency[0] < 1 || sr.Concurrency[1] <= sr.Concurrency[0]):
		l.errf(path+".concurrency", "%v is not [MIN, MAX] with 1 <= MIN < MAX", sr.Concurrency)
	case len(sr.Rate) > 0 && (len(sr.Rate) != 2 || sr.Rate[0] <= 0 || sr.Rate[1] <= sr.Rate[0]):
		l.errf(path+".rate", "%v is not [MIN, MAX] with 0 < MIN < MAX", sr.Rate)
	}
	if sr.Precision <= 0 || sr.Precision >= 1 {
		l.errf(path+".precision", "%v is not a fraction between 0 and 1 (0.1: within 10%%)", sr.Precision)
	}
	if sr.Steps < 2 {
		l.errf(path+".steps", "%d: a search needs at least 2 steps", sr.Steps)
	}
}

func (st *Stage) defaults() {
	if st.Rate > 0 && st.Arrival == "" {
		st.Arrival = "poisson"
		if st.Smoothness > 0 {
			st.Arrival = "gamma"
		}
	}
	if st.Concurrency == 0 && st.Rate == 0 {
		st.Concurrency = 1
	}
	if st.Duration == 0 && st.Requests == 0 {
		st.Duration = Duration(60 * time.Second)
	}
}

func (ld *Load) validate(l *locator, path string, trace bool) {
	if sr := ld.Search; sr != nil {
		sr.validate(l, path+".search")
		switch {
		case trace:
			l.errf(path+".search", "a trace sets its own schedule: no search")
		case ld.Sweep != nil || len(ld.Stages) > 0:
			l.errf(path+".search", "give a search, a sweep, stages, or one level of load, not several")
		case ld.Concurrency != 0 || ld.Rate != 0 || ld.RampTo != 0:
			l.errf(path+".search", "the search sets the level: leave concurrency, rate and ramp_to out")
		case ld.Duration < 0 || ld.Requests < 0 || ld.MaxConcurrency < 0:
			l.errf(path+".search", "duration, requests and max_concurrency must not be negative")
		}
		if ld.WarmupRequests < 0 {
			l.errf(path+".warmup_requests", "must not be negative")
		}
		if ld.GracePeriod != nil && *ld.GracePeriod < 0 {
			l.errf(path+".grace_period", "must not be negative")
		}
		return
	}
	if sw := ld.Sweep; sw != nil {
		switch {
		case len(sw.Concurrency) > 0 == (len(sw.Rate) > 0):
			l.errf(path+".sweep", "give a list of concurrency levels or of rates")
		case sw.Requests <= 0 && sw.Duration <= 0:
			l.errf(path+".sweep", "give requests or duration for each level")
		case !slices.IsSorted(sw.Concurrency) || !slices.IsSorted(sw.Rate) || slices.Contains(sw.Concurrency, 0) || slices.Contains(sw.Rate, 0):
			l.errf(path+".sweep", "levels must be positive and ascending (capacity is read from the lowest up)")
		}
		if ld.Stage != (Stage{}) {
			l.errf(path+".sweep", "give a sweep, stages, or one level of load, not several")
		}
		return
	}
	if len(ld.Stages) > 0 && ld.Stage != (Stage{}) {
		l.errf(path+".stages", "give stages, or one level of load (concurrency or rate, duration, requests), not both")
	}
	switch {
	case trace && ld.MaxConcurrency < 0:
		l.errf(path+".max_concurrency", "must not be negative")
	case !trace && len(ld.Stages) == 0:
		ld.Stage.validate(l, path)
	}
	for i := range ld.Stages {
		ld.Stages[i].validate(l, fmt.Sprintf("%s.stages[%d]", path, i))
	}
	if ld.WarmupRequests < 0 {
		l.errf(path+".warmup_requests", "must not be negative")
	}
	if ld.GracePeriod != nil && *ld.GracePeriod < 0 {
		l.errf(path+".grace_period", "must not be negative")
	}
}

func (st *Stage) validate(l *locator, path string) {
	switch {
	case st.Concurrency < 0:
		l.errf(path+".concurrency", "must be positive")
	case st.Rate < 0:
		l.errf(path+".rate", "must be positive")
	case st.Concurrency > 0 && st.Rate > 0:
		l.errf(path+".rate", "give concurrency (closed loop) or rate (open loop), not both; cap an open loop with max_concurrency")
	}
	if st.Rate == 0 && (st.Arrival != "" || st.MaxConcurrency != 0) {
		l.errf(path+".arrival", "arrival and max_concurrency apply to an open loop (rate)")
	}
	if st.Rate > 0 && st.Arrival != "constant" && st.Arrival != "poisson" && st.Arrival != "gamma" {
		l.errf(path+".arrival", "%q is not constant, poisson or gamma", st.Arrival)
	}
	switch {
	case st.Arrival == "gamma" && st.Smoothness <= 0:
		l.errf(path+".smoothness", "gamma arrivals need a positive smoothness (1 is Poisson, below 1 burstier)")
	case st.Arrival != "gamma" && st.Smoothness != 0:
		l.errf(path+".smoothness", "smoothness applies to gamma arrivals only")
	}
	if st.MaxConcurrency < 0 {
		l.errf(path+".max_concurrency", "must not be negative")
	}
	if st.Duration < 0 {
		l.errf(path+".duration", "must be positive")
	}
	if st.Requests < 0 {
		l.errf(path+".requests", "must not be negative")
	}
	switch {
	case st.RampTo < 0:
		l.errf(path+".ramp_to", "must be positive")
	case st.RampTo > 0 && st.Duration <= 0:
		l.errf(path+".ramp_to", "a ramp needs a duration to ramp over")
	case st.RampTo > 0 && st.Rate == 0 && st.RampTo != math.Trunc(st.RampTo):
		l.errf(path+".ramp_to", "a concurrency ramp ends at a whole number of requests in flight, not %g", st.RampTo)
	}
}

func (w *Workload) validate(l *locator, path, dir string) {
	if w.Tokenizer != "" && w.Tokenizer != BuiltinTokenizer {
		var err error
		if w.TokenizerPath, err = locateTokenizer(w.Tokenizer, resolve(dir, w.Tokenizer)); err != nil {
			l.errf(path+".tokenizer", "%v", err)
		}
		if (w.Trace != nil || w.Dataset != nil) && w.OSL != "tokenizer" {
			l.errf(path+".tokenizer", "a tokenizer sizes synthetic prompts; a trace or dataset brings its own (with osl: tokenizer it counts the answers)")
		}
	}
	switch w.OSL {
	case "", "auto", "usage", "chunks":
	case "tokenizer":
		if w.Tokenizer == "" {
			l.errf(path+".osl", "osl: tokenizer counts the answers with workload.tokenizer: give one (a tokenizer.json)")
		}
	default:
		l.errf(path+".osl", "%q is not auto, usage, chunks or tokenizer", w.OSL)
	}
	if d := w.Dataset; d != nil {
		switch {
		case w.Trace != nil:
			l.errf(path+".dataset", "give a dataset or a trace, not both")
		case d.File == "":
			l.errf(path+".dataset", "file is required")
		case d.Format != "" && d.Format != "single_turn" && d.Format != "multi_turn":
			l.errf(path+".dataset.format", "%q is not a known dataset format (single_turn, multi_turn)", d.Format)
		case d.Sampling != "" && d.Sampling != "sequential" && d.Sampling != "random":
			l.errf(path+".dataset.sampling", "%q is not sequential or random", d.Sampling)
		default:
			d.Path = resolve(dir, d.File)
		}
	}
	if c := w.Cancel; c.Fraction < 0 || c.Fraction > 1 {
		l.errf(path+".cancel.fraction", "%v is not a fraction between 0 and 1", c.Fraction)
	} else if c.Fraction > 0 && c.After <= 0 {
		l.errf(path+".cancel.after", "give how long after sending a request is cancelled")
	}
	if t := w.Trace; t != nil {
		switch {
		case t.File == "":
			l.errf(path+".trace", "file is required")
		case t.Format != "" && t.Format != "mooncake":
			l.errf(path+".trace.format", "%q is not a known trace format (mooncake)", t.Format)
		case t.Speedup < 0 || t.From < 0 || t.To < 0 || t.To > 0 && t.To <= t.From:
			l.errf(path+".trace", "speedup, from and to must be positive, and to after from")
		default:
			t.Path = resolve(dir, t.File)
		}
	}
	for name, t := range map[string]Tokens{"input_tokens": w.InputTokens, "output_tokens": w.OutputTokens} {
		if t.Mean < 1 {
			l.errf(path+"."+name+".mean", "must be at least 1")
		}
		if t.Stddev < 0 {
			l.errf(path+"."+name+".stddev", "must not be negative")
		}
	}
}

func (s *SLO) validate(l *locator, path string) {
	for name, d := range map[string]Duration{"ttft": s.TTFT, "ttst": s.TTST, "itl": s.ITL, "request_latency": s.RequestLatency} {
		if d < 0 {
			l.errf(path+"."+name, "must be positive")
		}
	}
	if s.OutputTokensPerSecond < 0 {
		l.errf(path+".output_tokens_per_second", "must be positive")
	}
	if s.Objective < 0 || s.Objective > 1 {
		l.errf(path+".objective", "%v is not a fraction between 0 and 1 (0.95 means 95%%)", s.Objective)
	}
}

func (c *Checks) validate(l *locator, path, dir string) {
	if c.JSONSchema != "" {
		c.SchemaPath = resolve(dir, c.JSONSchema)
	}
	if c.Tools != "" {
		c.ToolsPath = resolve(dir, c.Tools)
	}
	switch {
	case c.ToolCall != "" && c.ToolCall != "required":
		l.errf(path+".tool_call", "%q is not required (leave it out to check only the calls an answer makes)", c.ToolCall)
	case c.ToolCall != "" && c.Tools == "":
		l.errf(path+".tool_call", "needs tools: the file of tool definitions to send")
	}
	if c.ToolChoice != "" && c.Tools == "" {
		l.errf(path+".tool_choice", "needs tools: the file of tool definitions to send")
	}
	switch c.Model {
	case "", "learn", "exact", "prefix", "off":
	default:
		l.errf(path+".model", "%q is not learn, exact, prefix or off", c.Model)
	}
	if c.ModelMatches != "" {
		if _, err := regexp.Compile(c.ModelMatches); err != nil {
			l.errf(path+".model_matches", "not an RE2 expression: %v", err)
		} else if c.Model == "off" {
			l.errf(path+".model_matches", "is a model check: model off turns it off")
		}
	}
	if r := c.MaxWrongRatio; r != nil && (*r < 0 || *r > 1) {
		l.errf(path+".max_wrong_ratio", "%g is not a share between 0 and 1", *r)
	}
	if c.MaxAnswerBytes < 0 {
		l.errf(path+".max_answer_bytes", "%d is negative (leave it out for the default, 1 MiB)", c.MaxAnswerBytes)
	}
	if c.MinOutputTokens < 0 || c.MaxOutputTokens < 0 {
		l.errf(path, "min_output_tokens and max_output_tokens must not be negative")
	}
	if c.MaxOutputTokens > 0 && c.MinOutputTokens > c.MaxOutputTokens {
		l.errf(path+".max_output_tokens", "%d is below min_output_tokens (%d)", c.MaxOutputTokens, c.MinOutputTokens)
	}
	for _, f := range []struct {
		field string
		exprs []string
	}{{"matches", c.Matches}, {"not_matches", c.NotMatches}} {
		field := f.field
		for i, e := range f.exprs {
			if _, err := regexp.Compile(e); err != nil {
				l.errf(fmt.Sprintf("%s.%s[%d]", path, field, i), "not an RE2 expression: %v", err)
			} else if why := regexcost.Why(e); why != "" {
				l.errf(fmt.Sprintf("%s.%s[%d]", path, field, i), "%s", why)
			}
		}
	}
	for i, r := range c.FinishReason {
		if r == "" {
			l.errf(fmt.Sprintf("%s.finish_reason[%d]", path, i), "empty")
		}
	}
}

// endpointSuggestion names the endpoint a mistyped reference most likely
// means (within two edits), or lists the endpoints there are.
func (c *Config) endpointSuggestion(name string) string {
	best, bestD := "", 3
	var names []string
	for _, e := range c.Endpoints {
		names = append(names, e.Name)
		if d := EditDistance(name, e.Name); d < bestD {
			best, bestD = e.Name, d
		}
	}
	switch {
	case best != "":
		return fmt.Sprintf(" (did you mean %q?)", best)
	case len(names) > 0:
		return " (endpoints: " + strings.Join(names, ", ") + ")"
	}
	return ""
}

// The ranges of money: the dearest model priced at a few hundred per
// million tokens, and a day's budget that a fleet of probes could spend.
// Beyond them a price is a typo (1e308 made a run's cost +Inf: no
// summary.json, a counter at +Inf for ever, a daily budget spent for
// good), and NaN or .inf are never values.
const (
	MaxPricePerMillion = 100_000
	MaxCostPerDay      = 1_000_000_000
)

// within reports whether v is a finite number in [lo, hi].
func within(v, lo, hi float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= lo && v <= hi
}
