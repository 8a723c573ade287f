package config

import (
	"fmt"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a time.Duration written with its unit ("500ms", "2m").
// A bare number is refused: "ttft: 500" is a mistake, not 500 ns.
type Duration time.Duration

func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!int" || n.Tag == "!!float" {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q is not a duration: give a unit, such as 500ms, 30s or 5m", n.Line, n.Value)}}
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q is not a duration: give a unit, such as 500ms, 30s or 5m", n.Line, n.Value)}}
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
func (s Secret) Format(f fmt.State, verb rune)   { _, _ = f.Write([]byte(redacted)) }
func (s *Secret) UnmarshalYAML(*yaml.Node) error { return errInlineSecret }

var errInlineSecret = fmt.Errorf("secrets are never written inline: use api_key_file or api_key_env")

// Config is a whole configuration file.
type Config struct {
	Endpoints []*Endpoint `yaml:"endpoints"`
	Profiles  []*Profile  `yaml:"profiles"`
	// OTLP turns on OpenTelemetry push. Without it, push is on when
	// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is set.
	OTLP *OTLP `yaml:"otlp"`
	// GPU puts DCGM GPU series beside the probe's and GPU figures into run
	// reports. Absent GPUs are normal: the source reports itself down.
	GPU *GPU `yaml:"gpu"`
}

// GPU is where GPU figures come from.
type GPU struct {
	// Source is "dcgm" (libdcgm in-process, or an nv-hostengine at Address)
	// or "dcgm-exporter" (a running dcgm-exporter's /metrics at URL).
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
// belong in OTEL_EXPORTER_OTLP_HEADERS, not in this file.
type OTLP struct {
	Protocol string            `yaml:"protocol"`
	Endpoint string            `yaml:"endpoint"`
	Insecure bool              `yaml:"insecure"`
	Headers  map[string]string `yaml:"headers"`
	Interval Duration          `yaml:"interval"`
	Timeout  Duration          `yaml:"timeout"`
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
	// API is "chat" (default) or "completions".
	API   string `yaml:"api"`
	Model string `yaml:"model"`
	// Headers are sent with every request.
	Headers map[string]string `yaml:"headers"`
	// APIKeyFile and APIKeyEnv name where the bearer token is read from.
	APIKeyFile string `yaml:"api_key_file"`
	APIKeyEnv  string `yaml:"api_key_env"`
	// Timeout bounds one request from send to last chunk (default 120s).
	Timeout Duration `yaml:"timeout"`
	// ConnectTimeout bounds dialling and TLS (default 10s).
	ConnectTimeout Duration `yaml:"connect_timeout"`
	// HTTPClient is "tokenprobe" (default: its own HTTP/1.1 client) or
	// "net/http" (Go's, which also speaks HTTP/2).
	HTTPClient string `yaml:"http_client"`
	// IncludeUsage asks for a usage chunk in streams (default true).
	IncludeUsage *bool `yaml:"include_usage"`
	// ExtraBody is merged into every request body (temperature, ignore_eos).
	ExtraBody map[string]any `yaml:"extra_body"`

	// APIKey is resolved from APIKeyFile or APIKeyEnv at load time.
	APIKey Secret `yaml:"-"`
}

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
}

// Faults are the simulator's per-request fault probabilities.
type Faults struct {
	Error500   float64  `yaml:"error_500"`
	Error503   float64  `yaml:"error_503"`
	Error429   float64  `yaml:"error_429"`
	RetryAfter Duration `yaml:"retry_after"`
	Disconnect float64  `yaml:"disconnect"`
	Stall      float64  `yaml:"stall"`
	StallFor   Duration `yaml:"stall_for"`
	Malformed  float64  `yaml:"malformed"`
}

// Profile is a workload replayed against endpoints.
type Profile struct {
	Name string `yaml:"name"`
	// Endpoints names the endpoints the profile runs against.
	Endpoints []string `yaml:"endpoints"`
	Load      Load     `yaml:"load"`
	Workload  Workload `yaml:"workload"`
	SLO       SLO      `yaml:"slo"`
	// Schedule is when the daemon runs the profile; `tokenprobe run`
	// ignores it.
	Schedule Schedule `yaml:"schedule"`
	// Shard says how the profile runs when the daemon is sharded.
	Shard Shard `yaml:"shard"`
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
	// Window limits runs to a time of day, "HH:MM-HH:MM" (may cross
	// midnight), in Timezone (an IANA name; default UTC).
	Window   string `yaml:"window"`
	Timezone string `yaml:"timezone"`
	// Exclusive runs never share their endpoint with another run.
	Exclusive bool `yaml:"exclusive"`
	// Budget pauses the profile while the last hour's runs used this much.
	Budget Budget `yaml:"budget"`
}

// Budget is an hourly allowance; 0 means no limit.
type Budget struct {
	RequestsPerHour int `yaml:"requests_per_hour"`
	TokensPerHour   int `yaml:"tokens_per_hour"`
}

// Load is how hard and how long a run pushes: one level of load given by
// the fields below, or several in Stages, run one after the other.
type Load struct {
	Stage `yaml:",inline"`
	// Stages replace the single level above with a sequence of levels.
	Stages []Stage `yaml:"stages"`
	// Sweep is a shorthand for stages that step one kind of load.
	Sweep *Sweep `yaml:"sweep"`
	// WarmupRequests are sent first, at the first stage's load, and left
	// out of every result.
	WarmupRequests int    `yaml:"warmup_requests"`
	Seed           uint64 `yaml:"seed"`
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
	// TokenizerPath is Tokenizer resolved against the configuration's folder.
	TokenizerPath string `yaml:"-"`
	// Stream asks for a streamed answer (default true).
	Stream *bool  `yaml:"stream"`
	Seed   uint64 `yaml:"seed"`
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
