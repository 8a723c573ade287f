package setup

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/tokenprobe/tokenprobe/exporter/otlp"
	"github.com/tokenprobe/tokenprobe/exporter/otlp/otlptest"
	"github.com/tokenprobe/tokenprobe/internal/config"
	"github.com/tokenprobe/tokenprobe/internal/hostile"
	"github.com/tokenprobe/tokenprobe/internal/redact"
	"github.com/tokenprobe/tokenprobe/internal/sim"
	"github.com/tokenprobe/tokenprobe/internal/timingtest"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/cloudauth"
	"github.com/tokenprobe/tokenprobe/probe/ratelimit"
	"github.com/tokenprobe/tokenprobe/probe/result"
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
			tg := openYAML(t, yml, nil)
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
		tg := openYAML(t, yml, nil)
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

// awsEnv points the AWS default chain at the environment's key alone: no
// shared files, no instance metadata.
func awsEnv(t *testing.T, id, secret string) {
	t.Setenv("AWS_ACCESS_KEY_ID", id)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "")
}

// TestSigV4AgainstTheSimulator: requests signed by aws-sdk-go-v2's signer
// with the key the default chain finds are accepted by a simulator that
// checks them with the same library; a wrong secret is auth, with
// Bedrock's 403, and the secret appears in no error.
func TestSigV4AgainstTheSimulator(t *testing.T) {
	const yml = `endpoints:
  - name: bedrock
    simulator: {decode_base: 1ms, auth: {aws_sigv4: {access_key_id: AKIDTOKENPROBETEST, secret_access_key: right-secret, region: eu-west-1, service: bedrock}}}
    auth: {aws_sigv4: {region: eu-west-1}}
profiles:
  - name: p
`
	do := func() result.Request {
		tg := openYAML(t, yml, redact.New())
		defer tg.Close()
		var r result.Request
		tg.Client.Do(context.Background(), tg.Endpoint, client.Prompt{Text: "x", Stream: true, MaxTokens: 4}, &r)
		return r
	}
	awsEnv(t, "AKIDTOKENPROBETEST", "right-secret")
	if r := do(); r.Outcome != result.Success {
		t.Fatalf("the right key: %v/%v %s", r.Outcome, r.Reason, r.Err)
	}
	awsEnv(t, "AKIDTOKENPROBETEST", "wrong-secret")
	if r := do(); r.Outcome != result.Error || r.Reason != result.ReasonAuth || r.HTTPStatus != 403 || !strings.Contains(r.Err, "signature") ||
		strings.Contains(r.Err, "wrong-secret") {
		t.Fatalf("a wrong secret: %v/%v HTTP %d %s", r.Outcome, r.Reason, r.HTTPStatus, r.Err)
	}
	awsEnv(t, "", "")
	if r := do(); r.Outcome != result.Error || r.Reason != result.ReasonAuth || r.HTTPStatus != 0 || !strings.Contains(r.Err, "credentials") {
		t.Fatalf("no credentials: %v/%v HTTP %d %s", r.Outcome, r.Reason, r.HTTPStatus, r.Err)
	}
}

// TestGoogleTokensAgainstTheSimulator: Application Default Credentials
// (an authorized_user file whose token_uri is the simulator's token
// endpoint) give requests an access token the simulator issued. A token
// that lasts an hour is fetched once for many requests; one that lasts
// 10 s, oauth2's margin, is renewed before every request: the refresh
// before expiry, seen without waiting for a clock. An access token a
// server echoes back is redacted like a key.
func TestGoogleTokensAgainstTheSimulator(t *testing.T) {
	for _, c := range []struct {
		lifetime string
		tokens   int
	}{{"1h", 1}, {"10s", 3}} {
		srv, err := sim.Start("127.0.0.1:0", sim.Config{Slots: 4, DecodeBase: time.Millisecond, Auth: sim.Auth{TokenLifetime: mustDuration(t, c.lifetime)}})
		if err != nil {
			t.Fatal(err)
		}
		adc := filepath.Join(t.TempDir(), "adc.json")
		if err := os.WriteFile(adc, []byte(fmt.Sprintf(`{"type":"authorized_user","client_id":"c","client_secret":"s","refresh_token":"r","token_uri":"http://%s/token"}`, srv.Addr())), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", adc)
		cfg, err := config.Parse("tokenprobe.yaml", []byte(fmt.Sprintf("endpoints:\n  - {name: vertex, base_url: 'http://%s/v1', model: m, auth: {google: {}}}\nprofiles:\n  - name: p\n", srv.Addr())))
		if err != nil {
			t.Fatal(err)
		}
		secrets := redact.New()
		tg, err := OpenEndpoint(cfg.Endpoints[0], secrets, Tracing{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			var r result.Request
			tg.Client.Do(context.Background(), tg.Endpoint, client.Prompt{Text: "x", Stream: true, MaxTokens: 4}, &r)
			if r.Outcome != result.Success {
				t.Fatalf("lifetime %s, request %d: %v/%v %s", c.lifetime, i, r.Outcome, r.Reason, r.Err)
			}
		}
		_ = tg.Close()
		if n := srv.TokensIssued(); n != c.tokens {
			t.Errorf("lifetime %s: %d tokens fetched for 3 requests, want %d", c.lifetime, n, c.tokens)
		}
		if got := secrets.String("echo sim-access-token-1"); strings.Contains(got, "sim-access-token-1") {
			t.Errorf("the access token is not redacted: %q", got)
		}
		_ = srv.Close()
	}
	// Without a token the simulator refuses: Google's 401, read as auth.
	srv, err := sim.Start("127.0.0.1:0", sim.Config{Slots: 1, DecodeBase: time.Millisecond, Auth: sim.Auth{TokenLifetime: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tg := openYAML(t, fmt.Sprintf("endpoints:\n  - {name: vertex, base_url: 'http://%s/v1', model: m}\nprofiles:\n  - name: p\n", srv.Addr()), nil)
	defer tg.Close()
	var r result.Request
	tg.Client.Do(context.Background(), tg.Endpoint, client.Prompt{Text: "x", Stream: true, MaxTokens: 4}, &r)
	if r.Reason != result.ReasonAuth || r.HTTPStatus != 401 {
		t.Errorf("no token: %v/%v HTTP %d %s", r.Outcome, r.Reason, r.HTTPStatus, r.Err)
	}
}

func mustDuration(t *testing.T, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// openYAML opens the first endpoint of a configuration.
func openYAML(t *testing.T, yml string, secrets *redact.Set) *Target {
	t.Helper()
	cfg, err := config.Parse("tokenprobe.yaml", []byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	tg, err := OpenEndpoint(cfg.Endpoints[0], secrets, Tracing{})
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// A token endpoint that accepts and never answers: the request fails as
// auth, "no access token", after one bounded fetch (cloudauth.TokenTimeout),
// and nothing is sent to the model server. oauth2's token source takes no
// context, so without the bound the request would wait forever (the guard
// below fails the test at a minute).
func TestATokenEndpointThatNeverAnswers(t *testing.T) {
	_, model, tg := silentTokenEndpoint(t)
	done := make(chan result.Request, 1)
	go func() {
		var r result.Request
		tg.Client.Do(context.Background(), tg.Endpoint, client.Prompt{Text: "x", Stream: true, MaxTokens: 4}, &r)
		done <- r
	}()
	select {
	case r := <-done:
		if r.Outcome != result.Error || r.Reason != result.ReasonAuth || !strings.Contains(r.Err, "no access token") {
			t.Fatalf("%v/%v %q; want auth, no access token", r.Outcome, r.Reason, r.Err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the request still waits for a token a minute on (the fetch's bound is %v)", cloudauth.TokenTimeout)
	}
	if n := model.TokensIssued(); n != 0 {
		t.Errorf("the model server issued %d tokens", n)
	}
}

// Requests waiting for a token from an endpoint that never answers share
// one fetch, and each leaves as soon as its own context ends: at
// concurrency 4 a SIGTERM took 37.5 s (each request's fetch in turn, 10 s
// each) and the endpoint got three more fetches after the signal. Those
// the run cancelled are cancelled, not failures of the server.
func TestSignInSharesOneFetchAndEndsAtCancellation(t *testing.T) {
	h, _, tg := silentTokenEndpoint(t)
	ctx, cancel := context.WithCancel(context.Background())
	const n = 8
	done := make(chan result.Request, n)
	for range n {
		go func() {
			var r result.Request
			tg.Client.Do(ctx, tg.Endpoint, client.Prompt{Text: "x", Stream: true, MaxTokens: 4}, &r)
			done <- r
		}()
	}
	// The fetch is under way once the token endpoint has its connection.
	timingtest.Until(t, func() string { return "the token endpoint's first connection" }, func() bool { return h.Connections() > 0 }, nil)
	cancel() // the signal
	signalled := time.Now()
	for range n {
		select {
		case r := <-done:
			if r.Outcome != result.Cancelled {
				t.Errorf("a request waiting for its token at the signal: %v/%v %q, want cancelled", r.Outcome, r.Reason, r.Err)
			}
		case <-time.After(cloudauth.TokenTimeout / 2):
			t.Fatalf("requests still wait for a token %s after the signal", time.Since(signalled).Round(time.Millisecond))
		}
	}
	if c := h.Connections(); c != 1 {
		t.Errorf("the token endpoint got %d connections from %d waiting requests, want one fetch", c, n)
	}
}

// silentTokenEndpoint is a Vertex AI endpoint (a simulator taking only
// its own tokens) whose Application Default Credentials name a token
// endpoint that accepts and never answers (hostile.Silent); all closed
// with the test.
func silentTokenEndpoint(t *testing.T) (*hostile.Server, *sim.Server, *Target) {
	t.Helper()
	h, err := hostile.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	model, err := sim.Start("127.0.0.1:0", sim.Config{Slots: 1, DecodeBase: time.Millisecond, Auth: sim.Auth{TokenLifetime: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	adc := filepath.Join(t.TempDir(), "adc.json")
	if err := os.WriteFile(adc, []byte(fmt.Sprintf(`{"type":"authorized_user","client_id":"c","client_secret":"s","refresh_token":"r","token_uri":"http://%s/%s/token"}`, h.Addr(), hostile.Silent)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", adc)
	tg := openYAML(t, fmt.Sprintf("endpoints:\n  - {name: vertex, base_url: 'http://%s/v1', model: m, auth: {google: {}}}\nprofiles:\n  - name: p\n", model.Addr()), redact.New())
	t.Cleanup(func() { tg.Close() })
	return h, model, tg
}
