package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a time.Duration written with its unit ("500ms", "2m").
// A bare number is refused: "ttft: 500" is a mistake, not 500 ns.
type Duration time.Duration

func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!int" || n.Tag == "!!float" {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d column %d: %q is not a duration: give a unit, such as 500ms, 30s or 5m", n.Line, n.Column, n.Value)}}
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d column %d: %q is not a duration: give a unit, such as 500ms, 30s or 5m", n.Line, n.Column, n.Value)}}
	}
	*d = Duration(v)
	return nil
}

func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Secret holds a credential read from a file or the environment. It prints,
// marshals and logs as a placeholder so it cannot leak through a status
// page, /config, a log line or an error message.
type Secret string

const redacted = "<secret>"

func (s Secret) String() string                  { return redacted }
func (s Secret) GoString() string                { return redacted }
func (s Secret) MarshalYAML() (any, error)       { return redacted, nil }
func (s Secret) MarshalJSON() ([]byte, error)    { return []byte(`"` + redacted + `"`), nil }
func (s Secret) MarshalText() ([]byte, error)    { return []byte(redacted), nil }
func (s Secret) Reveal() string                  { return string(s) }
func (s Secret) Format(f fmt.State, _ rune)      { _, _ = f.Write([]byte(redacted)) }
func (s *Secret) UnmarshalYAML(*yaml.Node) error { return errInlineSecret }

var errInlineSecret = fmt.Errorf("secrets are never written inline: use api_key_file or api_key_env")

// HeaderValue is a header's value: written inline (`X-Tenant: acme`), or
// read at load time from a file or an environment variable
// (`Api-Key: {file: /run/secrets/azure-key}`, `Cookie: {env: GW_COOKIE}`).
// A value read from a file or a variable is a secret: it never prints, and
// is redacted from whatever a server sends back.
type HeaderValue struct {
	Inline string
	File   string
	Env    string
	// Secret is the value read from File or Env.
	Secret Secret
}

func (h *HeaderValue) UnmarshalYAML(n *yaml.Node) error {
	failAt := func(at *yaml.Node, format string, args ...any) error {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d column %d: ", at.Line, at.Column) + fmt.Sprintf(format, args...)}}
	}
	fail := func(format string, args ...any) error { return failAt(n, format, args...) }
	switch n.Kind {
	case yaml.ScalarNode:
		h.Inline = n.Value
		return nil
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Kind != yaml.ScalarNode {
				return failAt(v, "a header's %s is a path or a variable name", k.Value)
			}
			switch k.Value {
			case "file":
				h.File = v.Value
			case "env":
				h.Env = v.Value
			default:
				return fail("unknown field %q in a header's value: give file or env", k.Value)
			}
		}
		if (h.File == "") == (h.Env == "") {
			return fail("a header's value is a string, {file: PATH} or {env: VARIABLE}")
		}
		return nil
	}
	return fail("a header's value is a string, {file: PATH} or {env: VARIABLE}")
}

// MarshalYAML writes where the value comes from, never a secret value.
func (h HeaderValue) MarshalYAML() (any, error) {
	switch {
	case h.File != "":
		return map[string]string{"file": h.File}, nil
	case h.Env != "":
		return map[string]string{"env": h.Env}, nil
	}
	return h.Inline, nil
}

// IsSecret reports whether the value is read from a file or a variable.
func (h HeaderValue) IsSecret() bool { return h.File != "" || h.Env != "" }

// Value is the value to send.
func (h HeaderValue) Value() string {
	if h.IsSecret() {
		return h.Secret.Reveal()
	}
	return h.Inline
}

// Headers are request headers by name.
type Headers map[string]HeaderValue

// Secrets lists the values read from files or variables.
func (hs Headers) Secrets() []string {
	var out []string
	for _, h := range hs {
		if h.IsSecret() {
			out = append(out, h.Secret.Reveal())
		}
	}
	return out
}

// CredentialHeaders are the header names that always carry a credential;
// any name containing one of CredentialWords does too. Such headers take
// their value from a file or a variable, never inline.
var (
	CredentialHeaders = []string{"authorization", "proxy-authorization", "api-key", "x-api-key", "cookie",
		// vendors whose "team" header is the key (Honeycomb's ingest key)
		"x-honeycomb-team"}
	CredentialWords = []string{"key", "token", "secret", "auth", "password", "passwd", "credential", "bearer", "signature", "session"}
)

// IsCredentialHeader reports whether a header's name says it carries a
// credential (case-insensitive).
func IsCredentialHeader(name string) bool {
	n := strings.ToLower(name)
	for _, h := range CredentialHeaders {
		if n == h {
			return true
		}
	}
	// A vendor whose name holds a word of them (Portkey's gateway's
	// x-portkey-provider, x-portkey-custom-host) is read without it; its
	// x-portkey-api-key still says key.
	words := strings.ReplaceAll(n, "portkey", "port")
	for _, w := range CredentialWords {
		if strings.Contains(words, w) {
			return true
		}
	}
	// "sig" as a word of its own (x-amz-sig), not inside one (x-design).
	for part := range strings.FieldsFuncSeq(n, func(r rune) bool { return r == '-' || r == '_' }) {
		if part == "sig" {
			return true
		}
	}
	return false
}

// Config is a whole configuration file.
type Config struct {
	Endpoints []*Endpoint `yaml:"endpoints"`
	Profiles  []*Profile  `yaml:"profiles"`
	// OTLP turns on OpenTelemetry push. Without it, push is on when
	// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is set.
	OTLP *OTLP `yaml:"otlp"`
	// Tracing exports a span per sampled request over OTLP (the otlp
	// block's collector, or the OTEL_* variables). Every request carries
	// a traceparent, with or without it.
	Tracing *Tracing `yaml:"tracing"`
	// GPU puts DCGM GPU series beside the probe's and GPU figures into run
	// reports. Absent GPUs are normal: the source reports itself down.
	GPU *GPU `yaml:"gpu"`

	// loc knows where each field was written, for Errorf.
	loc *locator
}

// GPU is where GPU figures come from.
type GPU struct {
	// Source is "dcgm" (libdcgm in-process, or an nv-hostengine at Address),
	// "nvml" (the driver's libnvidia-ml: no profiling fields), "auto" (DCGM
	// if it initialises, else NVML), or "dcgm-exporter" (a running
	// dcgm-exporter's /metrics at URL).
	Source  string `yaml:"source"`
	Address string `yaml:"address"`
	URL     string `yaml:"url"`
	// Fields are dcgm-exporter series names (default: all tokenprobe knows).
	Fields []string `yaml:"fields"`
	// Interval is how often run reports sample the GPUs (default 1s).
	Interval Duration `yaml:"interval"`
}

// OTLP is where metrics are pushed. Empty fields fall back to the
// standard OTEL_EXPORTER_OTLP_* variables; headers that hold credentials
// are read from a file or a variable (or set in OTEL_EXPORTER_OTLP_HEADERS),
// never written in this file.
type OTLP struct {
	Protocol string   `yaml:"protocol"`
	Endpoint string   `yaml:"endpoint"`
	Insecure bool     `yaml:"insecure"`
	Headers  Headers  `yaml:"headers"`
	Interval Duration `yaml:"interval"`
	Timeout  Duration `yaml:"timeout"`
}

// Tracing is the span export.
type Tracing struct {
	// Sample is the share of requests whose spans are exported and whose
	// traceparent says sampled (default 1).
	Sample *float64 `yaml:"sample"`
	// TraceState is a W3C tracestate value (vendor=value, comma
	// separated) sent beside every traceparent and set on the exported
	// spans, for a tracing system that routes or samples by it.
	TraceState string `yaml:"tracestate"`
}

// State is the tracestate value: empty without a tracing block.
func (t *Tracing) State() string {
	if t == nil {
		return ""
	}
	return t.TraceState
}

// SampleRatio is the share of requests traced: 0 without a tracing
// block.
func (t *Tracing) SampleRatio() float64 {
	switch {
	case t == nil:
		return 0
	case t.Sample == nil:
		return 1
	}
	return *t.Sample
}

// Endpoint is one OpenAI-compatible server, real or simulated.
type Endpoint struct {
	Name string `yaml:"name"`
	// BaseURL is the OpenAI base URL, normally ending in /v1.
	BaseURL string `yaml:"base_url"`
	// BaseURLs are replicas behind no load balancer, used round robin, in
	// place of BaseURL.
	BaseURLs []string `yaml:"base_urls"`
	// Simulator starts tokenprobe's built-in simulator in-process and
	// points the endpoint at it, instead of BaseURL.
	Simulator *Simulator `yaml:"simulator"`
	// API is the request shape: "chat" (default), "completions",
	// "responses", "messages", "embeddings" or "kserve_generate"
	// (probe/openai: one file each).
	API   string `yaml:"api"`
	Model string `yaml:"model"`
	// Headers are sent with every request; their values are inline or read
	// from a file or a variable.
	Headers Headers `yaml:"headers"`
	// APIKeyFile and APIKeyEnv name where the bearer token is read from.
	APIKeyFile string `yaml:"api_key_file"`
	APIKeyEnv  string `yaml:"api_key_env"`
	// Timeout bounds one request from send to last chunk (default 120s).
	Timeout Duration `yaml:"timeout"`
	// Price is what the endpoint's provider charges per token: the
	// probe's own spend, by request, run and day.
	Price *Price `yaml:"price"`
	// Auth signs requests with a cloud's own sign-in, in place of an API
	// key.
	Auth *Auth `yaml:"auth"`
	// ConnectTimeout bounds dialling and TLS (default 10s).
	ConnectTimeout Duration `yaml:"connect_timeout"`
	// HTTPClient is "tokenprobe" (default: its own HTTP/1.1 client) or
	// "net/http" (Go's, which also speaks HTTP/2).
	HTTPClient string `yaml:"http_client"`
	// SourceAddresses are local IP addresses new connections come from,
	// in turn: past about 28,000 connections to one address and port a
	// source address runs out of ephemeral ports.
	SourceAddresses []string `yaml:"source_addresses"`
	// IncludeUsage asks for a usage chunk in streams (default true).
	IncludeUsage *bool `yaml:"include_usage"`
	// ExtraBody is merged into every request body (temperature, ignore_eos).
	ExtraBody map[string]any `yaml:"extra_body"`
	// TLS configures HTTPS: a private CA, a client certificate.
	TLS *TLS `yaml:"tls"`
	// ServerMetrics is where the server behind the endpoint serves its own
	// Prometheus metrics, read during every run to split the TTFT the
	// client measures into the server's queue, its prefill and the rest.
	// A simulator endpoint has it on its own.
	ServerMetrics *ServerMetrics `yaml:"server_metrics"`
	// GPUs are the GPUs that serve the endpoint, by UUID or index: its run
	// reports' GPU figures count those alone (default: every GPU the gpu
	// source sees).
	GPUs []string `yaml:"gpus"`

	// APIKey is resolved from APIKeyFile or APIKeyEnv at load time.
	APIKey Secret `yaml:"-"`
}

// TLS is how an endpoint's HTTPS is checked and answered. Paths are
// relative to the configuration file.
type TLS struct {
	// CAFile is a PEM bundle of the CAs to trust, in place of the system's.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a client certificate and its key (mutual TLS).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name the server's certificate must carry, when it
	// is not the URL's host (and the SNI sent).
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify accepts any certificate. For tests only: it is
	// logged as a warning when the endpoint is opened.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`

	caPath, certPath, keyPath string
}

// Config builds the crypto/tls configuration, reading the files.
func (t *TLS) Config() (*tls.Config, error) {
	c := &tls.Config{ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // the user's explicit choice, warned about
	if t.caPath != "" {
		pem, err := os.ReadFile(t.caPath)
		if err != nil {
			return nil, fmt.Errorf("cannot read %s: %w", t.caPath, errors.Unwrap(err))
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", t.caPath)
		}
	}
	if t.certPath != "" {
		cert, err := tls.LoadX509KeyPair(t.certPath, t.keyPath)
		if err != nil {
			// The error names files and PEM blocks, never key material.
			return nil, &certError{err}
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// Material is the content of the files the block names, for telling a
// rotated certificate from the one in use (a reload reopens an endpoint
// whose material changed). A file that cannot be read counts as empty.
func (t *TLS) Material() []string {
	var out []string
	for _, p := range []string{t.caPath, t.certPath, t.keyPath} {
		b, _ := os.ReadFile(p)
		out = append(out, string(b))
	}
	return out
}

// certError is a client certificate or key that cannot be loaded.
type certError struct{ err error }

func (e *certError) Error() string { return "client certificate: " + e.err.Error() }
func (e *certError) Unwrap() error { return e.err }

// Secrets lists what the endpoint sends that must never be shown: its API
// key and the header values read from files or variables.
func (e *Endpoint) Secrets() []string {
	out := append(e.Headers.Secrets(), e.APIKey.Reveal())
	out = append(out, queryValues(e.BaseURL)...)
	if m := e.ServerMetrics; m != nil {
		if m.BearerToken != "" {
			out = append(out, m.BearerToken.Reveal())
		}
		out = append(out, queryValues(m.URL)...)
		for _, u := range m.URLs {
			out = append(out, queryValues(u)...)
		}
	}
	return out
}

// safeQuery are the query parameters whose values are not secrets: the
// ones providers document as settings. Every other value of a configured
// URL's query is taken out of what a server echoes (a 401 body quoting
// the request line), whatever its name: a credential list misses the
// names it does not know.
var safeQuery = map[string]bool{"api-version": true, "api_version": true, "version": true, "model": true, "format": true, "stream": true, "region": true, "deployment": true}

// minQuerySecret is the shortest query value taken as a secret: a value
// of a few characters ("1", "true") would be taken out of every text.
const minQuerySecret = 6

// queryValues are the values of raw's query that are secrets: those of
// parameters not in safeQuery, at least minQuerySecret long, as written
// and as a server may echo them (encoded or not).
func queryValues(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil || u.RawQuery == "" {
		return nil
	}
	var out []string
	for name, vs := range u.Query() {
		if safeQuery[strings.ToLower(name)] {
			continue
		}
		for _, v := range vs {
			if len(v) >= minQuerySecret {
				out = append(out, v)
				if enc := url.QueryEscape(v); enc != v {
					out = append(out, enc)
				}
			}
		}
	}
	return out
}

// Server kinds that server_metrics.kind names (servermetrics.Kinds).
var ServerKinds = []string{"vllm", "sglang", "tgi", "llamacpp", "nim", "trtllm", "dynamo", "auto"}

// ServerMetrics is where a server's own metrics are read.
type ServerMetrics struct {
	// URL is the server's metrics page (http://host:8000/metrics).
	URL string `yaml:"url"`
	// URLs are the replicas' pages, one per base_urls entry in its order,
	// in place of URL: the run's figures are the replicas' pooled, with
	// each replica's beside them.
	URLs []string `yaml:"urls"`
	// Kind names how the server names its series: vllm, sglang, tgi,
	// llamacpp, nim, trtllm, dynamo, or auto (default: from the names it
	// serves).
	Kind string `yaml:"kind"`
	// Interval is how often the page is read during a run (default 1s).
	Interval Duration `yaml:"interval"`
	// BearerTokenFile and BearerTokenEnv name where a bearer token for
	// the page is read from.
	BearerTokenFile string `yaml:"bearer_token_file"`
	BearerTokenEnv  string `yaml:"bearer_token_env"`

	BearerToken Secret `yaml:"-"`
}

// Secrets lists every secret of the configuration.
func (c *Config) Secrets() []string {
	var out []string
	for _, e := range c.Endpoints {
		if e != nil {
			out = append(out, e.Secrets()...)
		}
	}
	if c.OTLP != nil {
		out = append(out, c.OTLP.Headers.Secrets()...)
	}
	return out
}

// APIs are the request shapes an endpoint may speak (api).
var APIs = []string{"chat", "completions", "responses", "messages", "embeddings", "kserve_generate"}

// Simulator configures the built-in simulated server (see sim.Config).
type Simulator struct {
	Slots           int      `yaml:"slots"`
	MaxQueue        int      `yaml:"max_queue"`
	PrefillBase     Duration `yaml:"prefill_base"`
	PrefillPerToken Duration `yaml:"prefill_per_token"`
	DecodeBase      Duration `yaml:"decode_base"`
	DecodeSlowdown  float64  `yaml:"decode_slowdown"`
	Jitter          float64  `yaml:"jitter"`
	TokensPerChunk  int      `yaml:"tokens_per_chunk"`
	Seed            uint64   `yaml:"seed"`
	Faults          Faults   `yaml:"faults"`
	// Provider is whose error answers the faults give (sim.Providers).
	Provider string `yaml:"provider"`
	// RateLimit meters requests and tokens as a hosted API does
	// (sim.RateLimit).
	RateLimit SimRateLimit `yaml:"rate_limit"`
	// Auth checks a cloud's sign-in on every request (sim.Auth).
	Auth SimAuth `yaml:"auth"`
	// ReasoningTokens come before every streamed answer (sim.Config).
	ReasoningTokens int `yaml:"reasoning_tokens"`
	// Answers is a JSONL file of known answers ({"match": RE2, "answer":
	// text}) for a known-answer dataset's prompts.
	Answers     string `yaml:"answers"`
	AnswersPath string `yaml:"-"`
	// Metrics are how the simulator's vLLM series count, imitating servers
	// that count otherwise.
	Metrics SimMetrics `yaml:"metrics"`
}

// SimAuth is the simulator's sign-in check (sim.Auth).
type SimAuth struct {
	// AWSSigV4 is the one key whose signatures it accepts.
	AWSSigV4 *SimSigV4 `yaml:"aws_sigv4"`
	// TokenLifetime serves an OAuth2 token endpoint at /token whose
	// access tokens last this long, and accepts only those.
	TokenLifetime Duration `yaml:"token_lifetime"`
}

// SimSigV4 is a test key: never a real one.
type SimSigV4 struct {
	AccessKeyID     string `yaml:"access_key_id"`
	SecretAccessKey string `yaml:"secret_access_key"`
	Region          string `yaml:"region"`
	Service         string `yaml:"service"`
}

// SimRateLimit is the simulator's rate limit (sim.RateLimit).
type SimRateLimit struct {
	Requests int      `yaml:"requests"`
	Tokens   int      `yaml:"tokens"`
	Window   Duration `yaml:"window"`
}

// SimMetrics are the simulator's counting habits (see sim.MetricsHabits).
type SimMetrics struct {
	Lazy            bool `yaml:"lazy"`
	QueueOnlyWaited bool `yaml:"queue_only_waited"`
}

// Faults are the simulator's per-request fault probabilities.
type Faults struct {
	Error500   float64  `yaml:"error_500"`
	Error503   float64  `yaml:"error_503"`
	Error429   float64  `yaml:"error_429"`
	RetryAfter Duration `yaml:"retry_after"`
	// Error answers by cause, in the simulator's provider's shape.
	Auth          float64  `yaml:"auth"`
	Quota         float64  `yaml:"quota"`
	Overloaded    float64  `yaml:"overloaded"`
	ContentFilter float64  `yaml:"content_filter"`
	ContextLength float64  `yaml:"context_length"`
	ModelNotFound float64  `yaml:"model_not_found"`
	Disconnect    float64  `yaml:"disconnect"`
	Stall         float64  `yaml:"stall"`
	StallFor      Duration `yaml:"stall_for"`
	Malformed     float64  `yaml:"malformed"`
	// Wrong answers, answered in full (sim.Faults).
	Empty          float64 `yaml:"empty"`
	Truncate       float64 `yaml:"truncate"`
	Garbage        float64 `yaml:"garbage"`
	BadJSON        float64 `yaml:"bad_json"`
	WrongModel     string  `yaml:"wrong_model"`
	WrongModelRate float64 `yaml:"wrong_model_rate"`
}

// Profile is a workload replayed against endpoints.
type Profile struct {
	Name string `yaml:"name"`
	// Endpoints names the endpoints the profile runs against.
	Endpoints []string `yaml:"endpoints"`
	Load      Load     `yaml:"load"`
	Workload  Workload `yaml:"workload"`
	SLO       SLO      `yaml:"slo"`
	// Failure is what a run does when requests fail; what it leaves out
	// keeps its default (docs/CONFIGURATION.md).
	Failure Failure `yaml:"failure"`
	// Schedule is when the daemon runs the profile; `tokenprobe run`
	// ignores it.
	Schedule Schedule `yaml:"schedule"`
	// Shard says how the profile runs when the daemon is sharded.
	Shard Shard `yaml:"shard"`
	// Checks judge every answer, beside its timing: an answer that fails
	// one is a wrong answer (docs/CONFIGURATION.md#checks).
	Checks Checks `yaml:"checks"`
	// PrefixCache, when set, makes the profile a prefix-cache probe: it
	// sends triples of requests (a long prefix cold, the same prefix warm,
	// a new one fresh) and judges whether the server's prefix cache
	// works (docs/CONFIGURATION.md#prefix_cache).
	PrefixCache *PrefixCache `yaml:"prefix_cache"`
	// ModelIdentity, when set, makes the profile a model-identity probe:
	// fixed prompts under greedy decoding, each run's answers held to a
	// reference learned from the endpoint's first runs
	// (docs/CONFIGURATION.md#model_identity).
	ModelIdentity *ModelIdentity `yaml:"model_identity"`
}

// ModelIdentity is a model-identity probe's prompts and bar.
type ModelIdentity struct {
	// Prompts is how many of the built-in prompts a run sends (default
	// 16).
	Prompts int `yaml:"prompts"`
	// MaxTokens is each answer's length (default 16).
	MaxTokens int `yaml:"max_tokens"`
	// LearnRuns is how many complete runs the reference is learned from
	// (default 3).
	LearnRuns int `yaml:"learn_runs"`
	// MinAgreement is the share of prompts that must be answered as the
	// reference answers them for the model to be the same (default 0.5).
	MinAgreement float64 `yaml:"min_agreement"`
	// Logprobs asks for each token's log-probability where the API
	// offers them (chat and completions; default true): an answer alike
	// in its text whose log-probabilities moved by more than
	// MaxLogprobDistance (nats per token, mean) is not alike.
	Logprobs           *bool   `yaml:"logprobs"`
	MaxLogprobDistance float64 `yaml:"max_logprob_distance"`
	// Reference is a reference file to hold the runs to, never learned
	// (GET /api/v1/model-identity writes one); ReferencePath is it
	// resolved against the configuration's folder.
	Reference     string `yaml:"reference"`
	ReferencePath string `yaml:"-"`

	loadGiven, lengthsGiven bool
}

// WantsLogprobs says whether the probe asks for log-probabilities.
func (mi *ModelIdentity) WantsLogprobs() bool { return mi.Logprobs == nil || *mi.Logprobs }

// The model-identity probe's defaults and bounds.
const (
	DefaultIdentityPrompts   = 16
	DefaultIdentityMaxTokens = 16
	DefaultLearnRuns         = 3
	DefaultMinAgreement      = 0.5
	// DefaultMaxLogprobDistance sits between the same weights in F32 and
	// F16 (at most 0.00012 nats a token apart) and in F16 and Q8_0 (at
	// least 0.0011) on llama-server (docs/MEASUREMENT.md).
	DefaultMaxLogprobDistance = 0.0005
	MaxMaxLogprobDistance     = 10
	MaxIdentityPrompts        = 32 // the built-in prompts (workload.IdentityPrompts)
	MaxIdentityMaxTokens      = 256
	MaxLearnRuns              = 100
)

// PrefixCache is a prefix-cache probe's shape and bar.
type PrefixCache struct {
	// PrefixTokens is the shared prefix's length (default 1024).
	PrefixTokens int `yaml:"prefix_tokens"`
	// Triples is how many triples a run sends (default 8): 3 requests
	// each, one at a time.
	Triples int `yaml:"triples"`
	// MinSpeedup is how many times faster than uncached a warm request
	// must be for the cache to work (default 1.25).
	MinSpeedup float64 `yaml:"min_speedup"`

	// loadGiven and inputGiven say the profile set a load or input
	// lengths, which the probe sets itself: refused by validate.
	loadGiven, inputGiven bool
}

// The prefix-cache probe's defaults and bounds.
const (
	DefaultPrefixTokens   = 1024
	DefaultCacheTriples   = 8
	DefaultMinSpeedup     = 1.25
	DefaultCacheOutTokens = 8
	MaxPrefixTokens       = 200_000
	MaxCacheTriples       = 1000
	MaxMinSpeedup         = 100
)

// Checks are a profile's answer checks. The model is checked unless
// model is off; the rest only when set.
type Checks struct {
	// Model is learn (default: the model the endpoint's answers named
	// before, see check.Served), exact, prefix or off.
	Model string `yaml:"model"`
	// ModelMatches is an RE2 expression the answer's model must match, in
	// place of Model's comparison, for those who know the names.
	ModelMatches    string   `yaml:"model_matches"`
	FinishReason    []string `yaml:"finish_reason"`
	MinOutputTokens int      `yaml:"min_output_tokens"`
	MaxOutputTokens int      `yaml:"max_output_tokens"`
	Contains        []string `yaml:"contains"`
	// Matches and NotMatches are RE2 expressions.
	Matches    []string `yaml:"matches"`
	NotMatches []string `yaml:"not_matches"`
	JSON       bool     `yaml:"json"`
	// JSONSchema is a JSON Schema file: every request asks for JSON of
	// that schema (response_format json_schema), and every answer is
	// validated against it.
	JSONSchema string `yaml:"json_schema"`
	// SchemaPath is JSONSchema resolved against the configuration's folder.
	SchemaPath string `yaml:"-"`
	// Tools is a JSON file of OpenAI tool definitions sent with every
	// request; every tool call in an answer must name one of them with
	// arguments valid against its parameters. ToolChoice is sent as
	// tool_choice (auto, required, none, or one tool's name); ToolCall
	// required makes an answer without a tool call wrong.
	Tools      string `yaml:"tools"`
	ToolsPath  string `yaml:"-"`
	ToolChoice string `yaml:"tool_choice"`
	ToolCall   string `yaml:"tool_call"`
	// Abort makes a wrong answer a failure for the failure policy
	// (backoff, abort, max_error_ratio); by default it is not.
	Abort bool `yaml:"abort"`
	// MaxWrongRatio is the share of wrong answers a run tolerates before
	// it fails, SLO or not (default 0.01: one in a hundred).
	MaxWrongRatio *float64 `yaml:"max_wrong_ratio"`
	// MaxAnswerBytes bounds the answer the checks read (default
	// check.DefaultMaxAnswerBytes): a longer one is a wrong answer, too
	// large to check.
	MaxAnswerBytes int `yaml:"max_answer_bytes"`
}

// Failure is a profile's failure policy. A field left out (nil) keeps
// its default; 0 turns that part off.
type Failure struct {
	// Backoff is a closed-loop worker's wait after a failed request.
	Backoff Backoff `yaml:"backoff"`
	// RetryAfterMax caps a server's Retry-After (0: ignore it).
	RetryAfterMax *Duration `yaml:"retry_after_max"`
	Abort         Abort     `yaml:"abort"`
	// MaxErrorRatio: a run with a larger share of failed requests is an
	// error, with or without an slo block.
	MaxErrorRatio *float64 `yaml:"max_error_ratio"`
	// ScheduleBackoffMax caps how far the daemon stretches a job's
	// interval after aborted runs in a row.
	ScheduleBackoffMax *Duration `yaml:"schedule_backoff_max"`
}

// Backoff is an exponential backoff with jitter.
type Backoff struct {
	Base *Duration `yaml:"base"`
	Max  *Duration `yaml:"max"`
}

// Abort is when a run stops early because its endpoint is failing.
type Abort struct {
	MinRequests    *int      `yaml:"min_requests"`
	ErrorRatio     *float64  `yaml:"error_ratio"`
	UnreachableFor *Duration `yaml:"unreachable_for"`
}

// Shard is a profile's behaviour across --shard.count replicas.
type Shard struct {
	// Split runs the profile on every replica with its load divided
	// between them (rates evenly, concurrency and counts as integers),
	// instead of on the one replica its name hashes to.
	Split bool `yaml:"split"`
}

// Schedule is when the daemon runs a profile against each endpoint.
type Schedule struct {
	// Every is the interval between runs (default 5m), at a fixed offset
	// within the interval derived from the profile and endpoint names.
	Every Duration `yaml:"every"`
	// Jitter delays each run by a random amount below it.
	Jitter Duration `yaml:"jitter"`
	// Continuous runs back to back instead of every interval.
	Continuous bool `yaml:"continuous"`
	// Manual runs only when asked through the run API, never on a tick.
	Manual bool `yaml:"manual"`
	// Window limits runs to a time of day, "HH:MM-HH:MM" (may cross
	// midnight), in Timezone (an IANA name; default UTC).
	Window   string `yaml:"window"`
	Timezone string `yaml:"timezone"`
	// Exclusive runs never share their endpoint with another run.
	Exclusive bool `yaml:"exclusive"`
	// Budget pauses the profile while the last hour's runs used this much.
	Budget Budget `yaml:"budget"`
}

// Budget is an hourly allowance, and a daily one in money; 0 means no
// limit.
type Budget struct {
	RequestsPerHour int `yaml:"requests_per_hour"`
	TokensPerHour   int `yaml:"tokens_per_hour"`
	// MaxCostPerDay pauses the profile while the last 24 hours' runs cost
	// this much, in its endpoints' price currency.
	MaxCostPerDay float64 `yaml:"max_cost_per_day"`
}

// Auth is a cloud's sign-in: one of its members.
type Auth struct {
	// AWSSigV4 signs with AWS Signature Version 4, the credentials from
	// the AWS default chain (Bedrock).
	AWSSigV4 *AWSSigV4 `yaml:"aws_sigv4"`
	// Google sends an OAuth2 access token of Application Default
	// Credentials (Vertex AI).
	Google *GoogleAuth `yaml:"google"`
}

// AWSSigV4 is where and for what requests are signed.
type AWSSigV4 struct {
	Region string `yaml:"region"`
	// Service is the signing name (default bedrock).
	Service string `yaml:"service"`
	// Profile is a shared config profile (default: AWS_PROFILE, or
	// "default").
	Profile string `yaml:"profile"`
}

// GoogleAuth is the access token's scopes (default cloud-platform).
type GoogleAuth struct {
	Scopes []string `yaml:"scopes"`
}

// Price is a provider's price per million tokens.
type Price struct {
	InputPerMillion float64 `yaml:"input_per_million"`
	// CachedInputPerMillion prices the input read from the provider's
	// prompt cache (default: InputPerMillion).
	CachedInputPerMillion *float64 `yaml:"cached_input_per_million"`
	OutputPerMillion      float64  `yaml:"output_per_million"`
	// Currency is an ISO 4217 code (default USD).
	Currency string `yaml:"currency"`
}

// Load is how hard and how long a run pushes: one level of load given by
// the fields below, or several in Stages, run one after the other.
type Load struct {
	Stage `yaml:",inline"`
	// Stages replace the single level above with a sequence of levels.
	Stages []Stage `yaml:"stages"`
	// Sweep is a shorthand for stages that step one kind of load.
	Sweep *Sweep `yaml:"sweep"`
	// Search finds the highest level whose SLO attainment meets the
	// objective; every step holds its level for the duration or requests
	// above.
	Search *Search `yaml:"search"`
	// WarmupRequests are sent first, at the first stage's load, and left
	// out of every result.
	WarmupRequests int `yaml:"warmup_requests"`
	// GracePeriod bounds how long requests in flight when a stage's
	// duration ends may still finish; those that have not are cancelled
	// (counted as cancelled), at once with 0. Unset: they run until their
	// own timeout. aiperf's --benchmark-grace-period.
	GracePeriod *Duration `yaml:"grace_period"`
	Seed        uint64    `yaml:"seed"`
}

// Stage is one level of load: a closed loop at a fixed concurrency, or an
// open loop at a request rate, held for a duration or a number of requests
// (whichever comes first).
type Stage struct {
	// Concurrency runs a closed loop: this many requests always in flight.
	Concurrency int `yaml:"concurrency"`
	// Rate runs an open loop at this many requests per second.
	Rate float64 `yaml:"rate"`
	// Arrival is the open loop's arrival process: constant, poisson or gamma.
	Arrival string `yaml:"arrival"`
	// Smoothness is the gamma process's shape (AIPerf and vLLM's
	// burstiness): 1 is Poisson, below 1 burstier, above 1 more regular.
	Smoothness float64 `yaml:"smoothness"`
	// MaxConcurrency caps requests in flight in an open loop (0: no cap).
	MaxConcurrency int      `yaml:"max_concurrency"`
	Duration       Duration `yaml:"duration"`
	Requests       int      `yaml:"requests"`
	// RampTo moves the level in a straight line from concurrency (or
	// rate) at the start of the stage to RampTo at the end of Duration.
	RampTo float64 `yaml:"ramp_to"`
}

// Sweep steps concurrency (or rate) through levels, each held for the same
// number of requests or time: the shape that finds capacity at SLO and the
// TTFT cliff.
type Sweep struct {
	Concurrency []int     `yaml:"concurrency"`
	Rate        []float64 `yaml:"rate"`
	Requests    int       `yaml:"requests"`
	Duration    Duration  `yaml:"duration"`
}

// Search is a capacity search: the levels it may try, [min, max], of
// concurrency or of rate, how near it must come, and in how many steps.
type Search struct {
	Concurrency []int     `yaml:"concurrency"`
	Rate        []float64 `yaml:"rate"`
	// Precision ends the search when the highest level that met the
	// objective and the lowest that missed it are this close, relative to
	// the latter (default 0.1; concurrency stops at 1 apart in any case).
	Precision float64 `yaml:"precision"`
	// Steps is the budget of levels tried (default 10).
	Steps int `yaml:"steps"`
}

// Plan returns the stages to run: Stages, or the single inline stage.
func (l *Load) Plan() []Stage {
	if len(l.Stages) > 0 {
		return l.Stages
	}
	return []Stage{l.Stage}
}

// Workload is what each request asks.
type Workload struct {
	// Trace replays a recorded trace: its timestamps set the schedule and
	// its rows the prompt and answer lengths.
	Trace *Trace `yaml:"trace"`
	// Dataset takes prompts from a JSONL file instead of synthesising them.
	Dataset      *Dataset `yaml:"dataset"`
	InputTokens  Tokens   `yaml:"input_tokens"`
	OutputTokens Tokens   `yaml:"output_tokens"`
	// Tokenizer is a Hugging Face tokenizer.json (relative to the
	// configuration file) that sizes synthetic prompts exactly in the
	// model's tokens; without it one word counts as one token.
	Tokenizer string `yaml:"tokenizer"`
	// OSL is where output lengths come from: auto (default: the server's
	// usage; without it the tokenizer's count of the answer when there is
	// a tokenizer, else the content chunks), usage, chunks, or tokenizer
	// (the tokenizer's count of the answer, as AIPerf counts it).
	OSL string `yaml:"osl"`
	// TokenizerPath is Tokenizer resolved against the configuration's folder.
	TokenizerPath string `yaml:"-"`
	// Stream asks for a streamed answer (default true).
	Stream *bool  `yaml:"stream"`
	Seed   uint64 `yaml:"seed"`
	// Batch is how many inputs an embeddings request carries (default 1);
	// only endpoints of api embeddings take it.
	Batch int `yaml:"batch"`
	// Cancel makes the workload cancel some requests, as impatient users do.
	Cancel Cancel `yaml:"cancel"`
}

// Cancel is cancellation injection: Fraction of requests cancelled After
// they were sent. They count as cancelled, in neither the numerator nor
// the denominator of SLO attainment.
type Cancel struct {
	Fraction float64  `yaml:"fraction"`
	After    Duration `yaml:"after"`
}

// Dataset is a JSONL prompt file.
type Dataset struct {
	// File is the dataset, relative to the configuration file.
	File string `yaml:"file"`
	// Format is "single_turn" (AIPerf's: text or texts, output_length) or
	// "multi_turn" (AIPerf's: session_id, turns of text, delay in ms,
	// output_length; or one turn per line with its session_id).
	Format string `yaml:"format"`
	// Sampling is "sequential" (default, wrapping around) or "random".
	Sampling string `yaml:"sampling"`

	// Path is File resolved against the configuration's folder.
	Path string `yaml:"-"`
}

// Trace is a recorded workload to replay.
type Trace struct {
	// File is the trace, relative to the configuration file.
	File string `yaml:"file"`
	// Format is "mooncake" (timestamp ms, input_length, output_length,
	// hash_ids of 512-token blocks).
	Format string `yaml:"format"`
	// Speedup divides the trace's gaps (10 sends ten times as fast).
	Speedup float64 `yaml:"speedup"`
	// From and To select a window of the trace's own time.
	From Duration `yaml:"from"`
	To   Duration `yaml:"to"`
	// Salt changes every prompt block's text; 0 replays the same text run
	// after run, so a server's prefix cache warms as in production.
	Salt uint64 `yaml:"salt"`

	// Path is File resolved against the configuration's folder.
	Path string `yaml:"-"`
}

// Tokens is a normal distribution of token counts, at least 1.
type Tokens struct {
	Mean   int `yaml:"mean"`
	Stddev int `yaml:"stddev"`
}

// SLO is a profile's objectives. A request is good when it succeeds and
// meets every threshold given here.
type SLO struct {
	TTFT                  Duration `yaml:"ttft"`
	TTST                  Duration `yaml:"ttst"`
	ITL                   Duration `yaml:"itl"`
	RequestLatency        Duration `yaml:"request_latency"`
	OutputTokensPerSecond float64  `yaml:"output_tokens_per_second"`
	// Objective is the fraction of requests that must be good for a run to
	// pass; `tokenprobe run` exits non-zero below it.
	Objective float64 `yaml:"objective"`
}

// Endpoint returns the endpoint called name, or nil.
func (c *Config) Endpoint(name string) *Endpoint {
	for _, e := range c.Endpoints {
		if e.Name == name {
			return e
		}
	}
	return nil
}

// Profile returns the profile called name, or nil.
func (c *Config) Profile(name string) *Profile {
	for _, p := range c.Profiles {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Stream reports whether the workload streams.
func (w *Workload) Streaming() bool { return w.Stream == nil || *w.Stream }

// Usage reports whether the endpoint asks for usage in streams.
func (e *Endpoint) Usage() bool { return e.IncludeUsage == nil || *e.IncludeUsage }

// ProfileNames lists profile names, for messages.
func (c *Config) ProfileNames() string {
	names := make([]string, len(c.Profiles))
	for i, p := range c.Profiles {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}
