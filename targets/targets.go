// Package targets opens the endpoints a configuration names: one shared
// HTTP client per endpoint, and the built-in simulator started in-process
// for endpoints that ask for it.
package targets

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/tokenprobe/tokenprobe/config"
	"github.com/tokenprobe/tokenprobe/exporter/dcgm"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/sim"
)

// Target is one opened endpoint.
type Target struct {
	Endpoint *client.Endpoint
	Client   *client.Client
	// Sim is the embedded simulator behind the endpoint, or nil.
	Sim *sim.Server
}

// Set is every opened endpoint of a configuration, by name.
type Set struct {
	byName map[string]*Target
}

// Open opens every endpoint of cfg. On error, whatever was opened is closed.
func Open(cfg *config.Config) (*Set, error) {
	s := &Set{byName: map[string]*Target{}}
	for _, e := range cfg.Endpoints {
		t, err := OpenEndpoint(e)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("endpoint %q: %w", e.Name, err)
		}
		s.byName[e.Name] = t
	}
	return s, nil
}

// OpenEndpoint opens one endpoint: its client, and its simulator if it has one.
func OpenEndpoint(e *config.Endpoint) (*Target, error) {
	t := &Target{
		Endpoint: &client.Endpoint{
			Name: e.Name, BaseURL: e.BaseURL, BaseURLs: e.BaseURLs, API: openai.API(e.API), Model: e.Model,
			APIKey: e.APIKey.Reveal(), Timeout: e.Timeout.D(), IncludeUsage: e.Usage(), Extra: e.ExtraBody,
		},
		Client: client.New(client.Options{ConnectTimeout: e.ConnectTimeout.D(), NetHTTP: e.HTTPClient == config.HTTPClientNetHTTP}),
	}
	if len(e.Headers) > 0 {
		t.Endpoint.Headers = http.Header{}
		for k, v := range e.Headers {
			t.Endpoint.Headers.Set(k, v)
		}
	}
	if sc := e.Simulator; sc != nil {
		srv, err := sim.Start("127.0.0.1:0", SimConfig(sc, e.Model))
		if err != nil {
			return nil, fmt.Errorf("starting the built-in simulator: %w", err)
		}
		t.Sim = srv
		t.Endpoint.BaseURL = srv.URL()
	}
	return t, nil
}

// SimConfig converts the YAML simulator block to the simulator's model.
func SimConfig(sc *config.Simulator, model string) sim.Config {
	f := sc.Faults
	return sim.Config{
		Model: model, Slots: sc.Slots, MaxQueue: sc.MaxQueue,
		PrefillBase: sc.PrefillBase.D(), PrefillPerToken: sc.PrefillPerToken.D(),
		DecodeBase: sc.DecodeBase.D(), DecodeSlowdown: sc.DecodeSlowdown, Jitter: sc.Jitter,
		TokensPerChunk: sc.TokensPerChunk, Seed: sc.Seed,
		Faults: sim.Faults{
			Error500: f.Error500, Error503: f.Error503, Error429: f.Error429, RetryAfter: f.RetryAfter.D(),
			Disconnect: f.Disconnect, Stall: f.Stall, StallFor: f.StallFor.D(), Malformed: f.Malformed,
		},
	}
}

// Get returns the target called name, or nil.
func (s *Set) Get(name string) *Target { return s.byName[name] }

// Close stops embedded simulators and idle connections.
func (s *Set) Close() error {
	var errs []error
	for _, t := range s.byName {
		errs = append(errs, t.Close())
	}
	return errors.Join(errs...)
}

// Close closes idle connections and stops the simulator, if any.
func (t *Target) Close() error {
	t.Client.CloseIdle()
	if t.Sim != nil {
		return t.Sim.Close()
	}
	return nil
}

// OpenGPU opens the configured GPU source and the fields it exports (all
// known when none are listed). A source that cannot read is returned down,
// with the reason, never as an error: GPUs are optional.
func OpenGPU(c *config.GPU) (dcgm.Source, []dcgm.Field) {
	var fields []dcgm.Field
	for _, name := range c.Fields {
		if f, ok := dcgm.ByName(name); ok {
			fields = append(fields, f)
		}
	}
	if c.Source == "dcgm-exporter" {
		return dcgm.NewScrape(c.URL), fields
	}
	return dcgm.Open(c.Address, fields), fields
}
