package setup

// Opening the endpoints a configuration names: one shared HTTP client per
// endpoint, and the built-in simulator started in-process for endpoints
// that ask for it.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tokenprobe/tokenprobe/internal/config"
	"github.com/tokenprobe/tokenprobe/internal/gpu"
	"github.com/tokenprobe/tokenprobe/internal/redact"
	"github.com/tokenprobe/tokenprobe/internal/servermetrics"
	"github.com/tokenprobe/tokenprobe/internal/sim"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/cloudauth"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
)

// Target is one opened endpoint.
type Target struct {
	Endpoint *client.Endpoint
	Client   *client.Client
	// Sim is the embedded simulator behind the endpoint, or nil.
	Sim *sim.Server
	// Server reads the server's own metrics during runs, or is nil.
	Server *servermetrics.Source
	// GPUs are the GPUs serving the endpoint (UUIDs or indexes), or none
	// for every GPU the source sees.
	GPUs []string
}

// Targets is every opened endpoint of a configuration, by name.
type Targets struct {
	byName map[string]*Target
}

// Open opens every endpoint of cfg, each redacting secrets from what its
// server sends; server, when set, exports its simulators' server spans.
// On error, whatever was opened is closed.
func Open(cfg *config.Config, secrets *redact.Set, server trace.Tracer) (*Targets, error) {
	tc := TraceContext(cfg)
	tc.Server = server
	s := &Targets{byName: map[string]*Target{}}
	for _, e := range cfg.Endpoints {
		t, err := OpenEndpoint(e, secrets, tc)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("endpoint %q: %w", e.Name, err)
		}
		s.byName[e.Name] = t
	}
	return s, nil
}

// OpenEndpoint opens one endpoint: its client, and its simulator if it
// has one. Its client takes secrets out of whatever the server sends,
// and gives its requests the trace context tc.
func OpenEndpoint(e *config.Endpoint, secrets *redact.Set, tc Tracing) (*Target, error) {
	opts := client.Options{ConnectTimeout: e.ConnectTimeout.D(), NetHTTP: e.HTTPClient == config.HTTPClientNetHTTP, Secrets: secrets,
		TraceSample: tc.Sample}
	for _, a := range e.SourceAddresses {
		opts.SourceAddrs = append(opts.SourceAddrs, net.ParseIP(a)) // checked by config
	}
	if e.TLS != nil {
		c, err := e.TLS.Config()
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		opts.TLS = c
	}
	t := &Target{
		Endpoint: &client.Endpoint{
			Name: e.Name, BaseURL: e.BaseURL, BaseURLs: e.BaseURLs, API: openai.API(e.API), Model: e.Model,
			APIKey: e.APIKey.Reveal(), Timeout: e.Timeout.D(), IncludeUsage: e.Usage(), Extra: e.ExtraBody,
		},
		Client: client.New(opts),
	}
	if p := e.Price; p != nil {
		cached := p.InputPerMillion
		if p.CachedInputPerMillion != nil {
			cached = *p.CachedInputPerMillion
		}
		t.Endpoint.Price = &result.Price{Input: p.InputPerMillion, CachedInput: cached, Output: p.OutputPerMillion, Currency: p.Currency}
	}
	if a := e.Auth; a != nil {
		signer, err := openSigner(a)
		if err != nil {
			return nil, err
		}
		t.Endpoint.Signer = signer
	}
	if len(e.Headers) > 0 || tc.State != "" {
		t.Endpoint.Headers = http.Header{}
		for k, h := range e.Headers {
			t.Endpoint.Headers.Set(k, h.Value())
		}
		if tc.State != "" {
			t.Endpoint.Headers.Set("Tracestate", tc.State)
		}
	}
	if sc := e.Simulator; sc != nil {
		cfg, err := SimConfig(sc, e.Model)
		if err != nil {
			return nil, err
		}
		cfg.Tracer = tc.Server
		srv, err := sim.Start("127.0.0.1:0", cfg)
		if err != nil {
			return nil, fmt.Errorf("starting the built-in simulator: %w", err)
		}
		t.Sim = srv
		t.Endpoint.BaseURL = srv.URL()
	}
	t.Server = serverMetrics(e, t.Sim, opts)
	t.GPUs = e.GPUs
	return t, nil
}

// serverMetrics opens the reader of the server's own metrics: the
// simulator's always, as the demo's breakdown needs them, another server's
// where the endpoint names them.
func serverMetrics(e *config.Endpoint, s *sim.Server, opts client.Options) *servermetrics.Source {
	m := e.ServerMetrics
	o := servermetrics.Options{Model: e.Model, TLS: opts.TLS}
	switch {
	case s != nil:
		o.URL, o.Kind = "http://"+s.Addr()+"/metrics", servermetrics.VLLM
		if m != nil {
			o.Interval = m.Interval.D()
		}
	case m != nil && len(m.URLs) > 0:
		// One page per replica, in base_urls' order (config checks the
		// count): pooled as one server, each replica's beside it.
		bases := e.BaseURLs
		if len(bases) == 0 {
			bases = []string{e.BaseURL}
		}
		rs := make([]servermetrics.Replica, len(m.URLs))
		for i, u := range m.URLs {
			ro := o
			ro.URL, ro.Kind, ro.Interval, ro.BearerToken = u, servermetrics.Kind(m.Kind), m.Interval.D(), m.BearerToken.Reveal()
			rs[i] = servermetrics.Replica{Options: ro, BaseURL: bases[min(i, len(bases)-1)]}
		}
		return servermetrics.NewReplicas(rs)
	case m != nil:
		o.URL, o.Kind, o.Interval, o.BearerToken = m.URL, servermetrics.Kind(m.Kind), m.Interval.D(), m.BearerToken.Reveal()
	default:
		return nil
	}
	return servermetrics.New(o)
}

// ServerInstance is the host:port of the endpoint's inference server's own
// metrics page: server_metrics.url's, else the base URL's (vLLM and
// SGLang serve /metrics on their API port). It is the instance label
// Prometheus gives the server's series when it scrapes that page.
func ServerInstance(e *config.Endpoint, baseURL string) string {
	raw := baseURL
	if e != nil && e.ServerMetrics != nil && e.ServerMetrics.URL != "" {
		raw = e.ServerMetrics.URL
	} else if e != nil && e.ServerMetrics != nil && len(e.ServerMetrics.URLs) > 0 {
		// The first replica's: the server recording rules join one
		// instance an endpoint (docs/MEASUREMENT.md says so).
		raw = e.ServerMetrics.URLs[0]
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return u.Host + ":443"
	}
	return u.Host + ":80"
}

// SimConfig converts the YAML simulator block to the simulator's model,
// reading its known answers.
func SimConfig(sc *config.Simulator, model string) (sim.Config, error) {
	f := sc.Faults
	var answers []sim.Answer
	if sc.AnswersPath != "" {
		var err error
		if answers, err = sim.LoadAnswers(sc.AnswersPath); err != nil {
			return sim.Config{}, err
		}
	}
	return sim.Config{
		Model: model, Slots: sc.Slots, MaxQueue: sc.MaxQueue, Answers: answers, ReasoningTokens: sc.ReasoningTokens,
		PrefillBase: sc.PrefillBase.D(), PrefillPerToken: sc.PrefillPerToken.D(),
		DecodeBase: sc.DecodeBase.D(), DecodeSlowdown: sc.DecodeSlowdown, Jitter: sc.Jitter,
		TokensPerChunk: sc.TokensPerChunk, Seed: sc.Seed, Provider: sc.Provider,
		RateLimit: sim.RateLimit{Requests: sc.RateLimit.Requests, Tokens: sc.RateLimit.Tokens, Window: sc.RateLimit.Window.D()},
		Auth:      simAuth(sc.Auth),
		Metrics:   sim.MetricsHabits{Lazy: sc.Metrics.Lazy, QueueOnlyWaited: sc.Metrics.QueueOnlyWaited},
		Faults: sim.Faults{
			Error500: f.Error500, Error503: f.Error503, Error429: f.Error429, RetryAfter: f.RetryAfter.D(),
			Auth: f.Auth, Quota: f.Quota, Overloaded: f.Overloaded, ContentFilter: f.ContentFilter, ContextLength: f.ContextLength, ModelNotFound: f.ModelNotFound,
			Disconnect: f.Disconnect, Stall: f.Stall, StallFor: f.StallFor.D(), Malformed: f.Malformed,
			Empty: f.Empty, Truncate: f.Truncate, Garbage: f.Garbage, BadJSON: f.BadJSON, WrongModel: f.WrongModel, WrongModelRate: f.WrongModelRate,
		},
	}, nil
}

// Get returns the target called name, or nil.
func (s *Targets) Get(name string) *Target { return s.byName[name] }

// Close stops embedded simulators and idle connections.
func (s *Targets) Close() error {
	var errs []error
	for _, t := range s.byName {
		errs = append(errs, t.Close())
	}
	return errors.Join(errs...)
}

// Close closes idle connections and stops the simulator, if any.
func (t *Target) Close() error {
	t.Client.CloseIdle()
	if t.Server != nil {
		t.Server.Close()
	}
	if t.Sim != nil {
		return t.Sim.Close()
	}
	return nil
}

// OpenGPU opens the configured GPU source and the fields it exports (all
// known when none are listed). A source that cannot read is returned down,
// with the reason, never as an error: GPUs are optional.
func OpenGPU(c *config.GPU) (gpu.Source, []gpu.Field) {
	var fields []gpu.Field
	for _, name := range c.Fields {
		if f, ok := gpu.ByName(name); ok {
			fields = append(fields, f)
		}
	}
	switch c.Source {
	case "dcgm-exporter":
		return gpu.NewScrape(c.URL), fields
	case "nvml":
		return gpu.OpenNVML(fields), fields
	case "auto":
		return gpu.OpenAuto(c.Address, fields), fields
	}
	return gpu.Open(c.Address, fields), fields
}

// signInWait bounds finding a cloud's credentials when an endpoint is
// opened: the files, and on a cloud's machine its metadata server.
const signInWait = 15 * time.Second

// openSigner finds the credentials of an endpoint's cloud sign-in.
func openSigner(a *config.Auth) (client.Signer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), signInWait)
	defer cancel()
	if s := a.AWSSigV4; s != nil {
		return cloudauth.NewSigV4(ctx, s.Region, s.Service, s.Profile)
	}
	return cloudauth.NewGoogle(ctx, a.Google.Scopes...)
}

func simAuth(a config.SimAuth) sim.Auth {
	out := sim.Auth{TokenLifetime: a.TokenLifetime.D()}
	if k := a.AWSSigV4; k != nil {
		out.SigV4 = &sim.SigV4Key{AccessKeyID: k.AccessKeyID, SecretAccessKey: k.SecretAccessKey, Region: k.Region, Service: k.Service}
	}
	return out
}
