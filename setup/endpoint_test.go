package setup

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/tokenprobe/tokenprobe/config"
	"github.com/tokenprobe/tokenprobe/exporter/otlp"
	"github.com/tokenprobe/tokenprobe/exporter/otlp/otlptest"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/ratelimit"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/sim"
)

// A configured tracestate goes beside every traceparent, through both
// HTTP clients, with the endpoint's own headers kept; without one no
// tracestate is sent.
func TestTraceStateIsSentWithEveryRequest(t *testing.T) {
	var mu sync.Mutex
	var states, custom []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		states, custom = append(states, r.Header.Get("Tracestate")), append(custom, r.Header.Get("X-Team-Route"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	for _, httpClient := range []string{"tokenprobe", "net/http"} {
		for _, state := range []string{"tp=eu-west,congo=t61", ""} {
			tracing := ""
			if state != "" {
				tracing = fmt.Sprintf("tracing: {tracestate: %q}\n", state)
			}
			yml := fmt.Sprintf("endpoints:\n  - {name: gw, base_url: '%s/v1', model: m, http_client: %s, headers: {X-Team-Route: blue}}\nprofiles:\n  - name: p\n%s",
				srv.URL, httpClient, tracing)
			cfg, err := config.Parse("tokenprobe.yaml", []byte(yml))
			if err != nil {
				t.Fatal(err)
			}
			tg, err := OpenEndpoint(cfg.Endpoints[0], nil, TraceContext(cfg))
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				var r result.Request
				tg.Client.Do(context.Background(), tg.Endpoint, client.Prompt{Text: "x", Stream: true}, &r)
				if r.Outcome != result.Success {
					t.Fatalf("%s: %v/%v %s", httpClient, r.Outcome, r.Reason, r.Err)
				}
			}
			_ = tg.Close()
			mu.Lock()
			got, route := states[len(states)-2:], custom[len(custom)-2:]
			mu.Unlock()
			if got[0] != state || got[1] != state || route[0] != "blue" || route[1] != "blue" {
				t.Errorf("%s, tracestate %q: the server saw tracestate %q and X-Team-Route %q", httpClient, state, got, route)
			}
		}
	}
}

// An endpoint's source_addresses are where its connections come from, in
// turn, through both HTTP clients: a loopback server sees 127.0.0.2 and
// 127.0.0.3, never the default 127.0.0.1.
func TestSourceAddressesTakeTurns(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	// Every request waits until four are in, so that four connections
	// are open at once: a client that finished one request before the
	// next would send them all on one.
	var arrived sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		mu.Lock()
		seen[host]++
		mu.Unlock()
		arrived.Done()
		arrived.Wait()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	for _, httpClient := range []string{"tokenprobe", "net/http"} {
		mu.Lock()
		clear(seen)
		mu.Unlock()
		yml := fmt.Sprintf("endpoints:\n  - {name: gw, base_url: '%s/v1', model: m, http_client: %s, source_addresses: [127.0.0.2, 127.0.0.3]}\nprofiles:\n  - name: p\n",
			srv.URL, httpClient)
		cfg, err := config.Parse("tokenprobe.yaml", []byte(yml))
		if err != nil {
			t.Fatal(err)
		}
		tg, err := OpenEndpoint(cfg.Endpoints[0], nil, Tracing{})
		if err != nil {
			t.Fatal(err)
		}
		// Four requests at once: four connections.
		arrived.Add(4)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				var r result.Request
				tg.Client.Do(context.Background(), tg.Endpoint, client.Prompt{Text: "x", Stream: true}, &r)
				if r.Outcome != result.Success {
					t.Errorf("%s: %v/%v %s", httpClient, r.Outcome, r.Reason, r.Err)
				}
			})
		}
		wg.Wait()
		_ = tg.Close()
		mu.Lock()
		if seen["127.0.0.2"] == 0 || seen["127.0.0.3"] == 0 || seen["127.0.0.1"] != 0 {
			t.Errorf("%s: requests came from %v, want 127.0.0.2 and 127.0.0.3 only", httpClient, seen)
		}
		mu.Unlock()
	}
	if _, err := config.Parse("x.yaml", []byte("endpoints:\n  - {name: gw, base_url: 'http://x/v1', model: m, source_addresses: [eth0]}\nprofiles: [{name: p}]\n")); err == nil ||
		!strings.Contains(err.Error(), `endpoints[0].source_addresses[0]: "eth0" is not an IP address`) {
		t.Errorf("a name for an address: %v", err)
	}
}

// A simulator block's server exports a server span per request through
// the OTLP exporter's simulator tracer, a child of the request's span, as
// `tokenprobe sim --otlp-traces-endpoint` and vLLM do.
func TestInProcessSimulatorExportsServerSpans(t *testing.T) {
	rc := otlptest.Start()
	defer rc.Close()
	exp, err := otlp.New(context.Background(), otlp.Config{Endpoint: rc.URL, Interval: time.Hour, Traces: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("tokenprobe.yaml", []byte("endpoints:\n  - {name: sim, simulator: {slots: 2, decode_base: 1ms}}\nprofiles:\n  - name: p\n"))
	if err != nil {
		t.Fatal(err)
	}
	tg, err := OpenEndpoint(cfg.Endpoints[0], nil, Tracing{Sample: 1, Server: exp.SimTracer()})
	if err != nil {
		t.Fatal(err)
	}
	var r result.Request
	tg.Client.Do(context.Background(), tg.Endpoint, client.Prompt{Text: "x", Stream: true, MaxTokens: 4}, &r)
	_ = tg.Close()
	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r.Outcome != result.Success {
		t.Fatalf("%v/%v %s", r.Outcome, r.Reason, r.Err)
	}
	var server *tracepb.Span
	for _, s := range rc.Spans() {
		if s.Name == "llm_request" {
			server = s
		}
	}
	switch {
	case server == nil:
		t.Fatal("no server span exported")
	case hex.EncodeToString(server.TraceId) != r.Trace.TraceIDString() || hex.EncodeToString(server.ParentSpanId) != r.Trace.SpanIDString():
		t.Errorf("server span in trace %x under %x, want the request's %s and %s", server.TraceId, server.ParentSpanId, r.Trace.TraceIDString(), r.Trace.SpanIDString())
	case server.Kind != tracepb.Span_SPAN_KIND_SERVER:
		t.Errorf("kind %v", server.Kind)
	}
}

// TestSimulatedProviderFailures runs a request against the built-in
// simulator playing each provider with each injected failure, through the
// configuration, the client and its reading of the error body: each gets
// the reason an on-call engineer routes by. It also holds config's list
// of providers to sim.Providers.
func TestSimulatedProviderFailures(t *testing.T) {
	faults := map[string]result.Reason{
		"error_500": result.ReasonServerError, "error_503": result.ReasonServerError, "error_429": result.ReasonRateLimit,
		"auth": result.ReasonAuth, "quota": result.ReasonQuota, "overloaded": result.ReasonOverloaded,
		"content_filter": result.ReasonContentFilter, "context_length": result.ReasonContextLength, "model_not_found": result.ReasonModelNotFound,
	}
	for _, provider := range sim.Providers {
		for fault, want := range faults {
			yml := fmt.Sprintf("endpoints:\n  - {name: sim, simulator: {provider: %q, decode_base: 1ms, faults: {%s: 1, retry_after: 1ms}}}\nprofiles:\n  - name: p\n", provider, fault)
			cfg, err := config.Parse("tokenprobe.yaml", []byte(yml))
			if err != nil {
				t.Fatalf("%s: %v", provider, err)
			}
			tg, err := OpenEndpoint(cfg.Endpoints[0], nil, Tracing{})
			if err != nil {
				t.Fatal(err)
			}
			var r result.Request
			tg.Client.Do(context.Background(), tg.Endpoint, client.Prompt{Text: "x", Stream: true, MaxTokens: 4}, &r)
			_ = tg.Close()
			if r.Outcome != result.Error || r.Reason != want {
				t.Errorf("provider %q, fault %s: %v/%v %s; want error/%v", provider, fault, r.Outcome, r.Reason, r.Err, want)
			}
		}
	}
	if _, err := config.Parse("x.yaml", []byte("endpoints:\n  - {name: sim, simulator: {provider: bedrock}}\nprofiles: [{name: p}]\n")); err == nil ||
		!strings.Contains(err.Error(), "provider") {
		t.Errorf("an unknown provider: %v", err)
	}
}

// TestSimulatedRateLimitHeaders: the built-in simulator playing each
// provider meters requests as a hosted API does; the client reads what
// remains from every answer, in each provider's headers, and the request
// past the limit is a rate_limit with the window's end to wait.
func TestSimulatedRateLimitHeaders(t *testing.T) {
	for _, provider := range sim.Providers {
		yml := fmt.Sprintf("endpoints:\n  - {name: sim, simulator: {provider: %q, decode_base: 1ms, rate_limit: {requests: 4, tokens: 100000, window: 1h}}}\nprofiles:\n  - name: p\n", provider)
		cfg, err := config.Parse("tokenprobe.yaml", []byte(yml))
		if err != nil {
			t.Fatal(err)
		}
		tg, err := OpenEndpoint(cfg.Endpoints[0], nil, Tracing{})
		if err != nil {
			t.Fatal(err)
		}
		var remaining []float64
		for i := range 5 {
			var r result.Request
			tg.Client.Do(context.Background(), tg.Endpoint, client.Prompt{Text: "x", Stream: true, MaxTokens: 4}, &r)
			if r.RateLimit == nil {
				t.Fatalf("provider %q, request %d: no rate-limit headers read (%v/%v %s)", provider, i, r.Outcome, r.Reason, r.Err)
			}
			v, _ := r.RateLimit.Get(ratelimit.Requests, ratelimit.Remaining, r.End)
			remaining = append(remaining, v)
			if _, ok := r.RateLimit.Get(ratelimit.Tokens, ratelimit.Remaining, r.End); !ok {
				t.Errorf("provider %q: no tokens remaining read", provider)
			}
			lim, hasLimit := r.RateLimit.Get(ratelimit.Requests, ratelimit.Limit, r.End)
			reset, hasReset := r.RateLimit.Get(ratelimit.Requests, ratelimit.Reset, r.End)
			if provider != "azure" && (!hasLimit || lim != 4 || !hasReset || reset <= 0 || reset > 3600) {
				t.Errorf("provider %q: limit %v (%v), reset %v s (%v)", provider, lim, hasLimit, reset, hasReset)
			}
			switch {
			case i < 4 && r.Outcome != result.Success:
				t.Errorf("provider %q, request %d: %v/%v %s", provider, i, r.Outcome, r.Reason, r.Err)
			case i == 4 && (r.Outcome != result.Error || r.Reason != result.ReasonRateLimit || r.RetryAfter < 59*time.Minute):
				t.Errorf("provider %q, the fifth request: %v/%v, Retry-After %v; want rate_limit and the window's end", provider, r.Outcome, r.Reason, r.RetryAfter)
			}
		}
		_ = tg.Close()
		if fmt.Sprint(remaining) != "[3 2 1 0 0]" {
			t.Errorf("provider %q: requests remaining %v", provider, remaining)
		}
	}
}
