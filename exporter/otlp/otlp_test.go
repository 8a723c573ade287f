package otlp

import (
	"slices"

	"bytes"
	"context"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/tokenprobe/tokenprobe/exporter/otlp/otlptest"
	"github.com/tokenprobe/tokenprobe/internal/catalog"
	"github.com/tokenprobe/tokenprobe/internal/hostile"
	"github.com/tokenprobe/tokenprobe/probe"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/ratelimit"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

func TestPushesGenAIInstruments(t *testing.T) {
	rc := otlptest.Start()
	defer rc.Close()
	e, err := New(context.Background(), Config{Endpoint: rc.URL, Interval: time.Hour, Instance: "probe-1", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	t0 := time.Now()
	ok := result.Request{Profile: "chat", Endpoint: "vllm", Model: "llama", API: "chat", URL: "http://vllm.internal:8000/v1", Level: 4,
		Streaming: true, Outcome: result.Success, ContentChunks: 4, OutputTokens: 4, InputTokens: 100,
		Scheduled: t0, Start: t0, TTFT: ms(100), E2E: ms(160), Gaps: []time.Duration{ms(20), ms(20), ms(20)}}
	// A hosted API's answer: a price, and rate-limit headers.
	ok.Cost, ok.Currency, ok.End = 0.25, "EUR", t0.Add(ms(160))
	ok.RateLimit = &ratelimit.Reading{}
	for name, value := range map[string]string{"x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "120", "x-ratelimit-reset-tokens": "6s"} {
		ok.RateLimit.Header([]byte(name), []byte(value))
	}
	fail := ok
	fail.Outcome, fail.Reason, fail.End, fail.Cost, fail.RateLimit = result.Error, result.ReasonServerError, t0.Add(ms(5)), 0, nil
	set := slo.Set{Thresholds: []slo.Threshold{{Kind: slo.TTFT, Max: ms(500)}}}
	for range 3 {
		e.Observe(&ok, set.Evaluate(&ok))
	}
	e.Observe(&fail, set.Evaluate(&fail))
	run := &probe.Run{Profile: "chat", Endpoint: &client.Endpoint{Name: "vllm"}}
	e.RunStarted(run)
	e.RunFinished(run, probe.Finished{Summary: &stats.Summary{Server: &stats.Server{Breakdown: &stats.Breakdown{
		Mean: stats.Split{TTFT: 4700, Queue: 4300, Elsewhere: 400}, Dominant: "queue"}}}})
	// Gauges are read while the provider runs: flushed before Shutdown.
	if err := e.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	flushed, _ := rc.Last()
	checkBreakdown(t, flushed["tokenprobe.ttft.breakdown"])
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, r := rc.Last()
	documented := map[string]bool{}
	for _, i := range catalog.OTel {
		documented[i.Name] = true
	}
	for name := range got {
		if !documented[name] {
			t.Errorf("%s is pushed but not in catalog.OTel (docs/METRICS.md)", name)
		}
	}
	if r["service.name"] != "tokenprobe" || r["service.instance.id"] != "probe-1" || r["service.version"] != "test" {
		t.Errorf("resource: %v", r)
	}
	want := map[string]struct {
		unit  string
		count uint64
	}{
		"gen_ai.client.operation.duration":              {"s", 4}, // 3 successes + 1 error
		"gen_ai.client.operation.time_to_first_chunk":   {"s", 3},
		"gen_ai.client.operation.time_per_output_chunk": {"s", 9},
		"gen_ai.client.token.usage":                     {"{token}", 6}, // input and output per success
		"tokenprobe.dispatch_lag":                       {"s", 4},
	}
	for name, w := range want {
		m := got[name]
		if m == nil {
			t.Errorf("%s not pushed; got %v", name, keys(got))
			continue
		}
		h := m.GetExponentialHistogram()
		if h == nil || m.Unit != w.unit {
			t.Errorf("%s: unit %q, exponential %v", name, m.Unit, h != nil)
			continue
		}
		count := otlptest.HistogramCount(m)
		for _, dp := range h.DataPoints {
			a := otlptest.Attrs(dp.Attributes)
			if a["gen_ai.operation.name"] != "chat" || a["gen_ai.provider.name"] != "openai" || a["gen_ai.request.model"] != "llama" ||
				a["server.address"] != "vllm.internal" || a["server.port"] != "8000" || a["tokenprobe.profile"] != "chat" {
				t.Errorf("%s: attributes %v", name, a)
			}
		}
		if count != w.count {
			t.Errorf("%s: count %d, want %d", name, count, w.count)
		}
	}
	// The error's duration carries error.type; token usage carries its type.
	for _, dp := range got["gen_ai.client.operation.duration"].GetExponentialHistogram().DataPoints {
		if a := otlptest.Attrs(dp.Attributes); a["error.type"] != "" && (a["error.type"] != "server_error" || dp.Count != 1) {
			t.Errorf("error datapoint %v count %d", a, dp.Count)
		}
	}
	types := map[string]bool{}
	for _, dp := range got["gen_ai.client.token.usage"].GetExponentialHistogram().DataPoints {
		types[otlptest.Attrs(dp.Attributes)["gen_ai.token.type"]] = true
	}
	if !types["input"] || !types["output"] {
		t.Errorf("token types %v", types)
	}
	sum := func(name, key, value string) int64 {
		var n int64
		for _, dp := range got[name].GetSum().GetDataPoints() {
			if value == "" || otlptest.Attrs(dp.Attributes)[key] == value {
				n += dp.GetAsInt()
			}
		}
		return n
	}
	// The spend, in its currency, and the rate-limit gauges by kind.
	var cost float64
	for _, dp := range got["tokenprobe.cost"].GetSum().GetDataPoints() {
		if a := otlptest.Attrs(dp.Attributes); a["tokenprobe.currency"] != "EUR" || a["tokenprobe.profile"] != "chat" || a["tokenprobe.endpoint"] != "vllm" {
			t.Errorf("tokenprobe.cost attributes %v", a)
		}
		cost += dp.GetAsDouble()
	}
	if cost != 0.75 {
		t.Errorf("tokenprobe.cost %v, want 0.75 (3 answers at 0.25)", cost)
	}
	for name, want := range map[string]float64{"tokenprobe.rate_limit.limit": 1000, "tokenprobe.rate_limit.remaining": 120, "tokenprobe.rate_limit.reset": 6} {
		dps := got[name].GetGauge().GetDataPoints()
		if len(dps) != 1 || dps[0].GetAsDouble() != want || otlptest.Attrs(dps[0].Attributes)["tokenprobe.rate_limit.kind"] != "tokens" {
			t.Errorf("%s: %v, want one point of %v for kind tokens", name, dps, want)
		}
	}
	if sum("tokenprobe.requests.good", "", "") != 3 || sum("tokenprobe.requests", "tokenprobe.outcome", "success") != 3 ||
		sum("tokenprobe.requests", "error.type", "server_error") != 1 || sum("tokenprobe.slo.requests", "tokenprobe.slo.result", "missed") != 1 {
		t.Errorf("counters: good %d success %d 5xx %d missed %d", sum("tokenprobe.requests.good", "", ""),
			sum("tokenprobe.requests", "tokenprobe.outcome", "success"), sum("tokenprobe.requests", "error.type", "server_error"),
			sum("tokenprobe.slo.requests", "tokenprobe.slo.result", "missed"))
	}
}

// checkBreakdown holds the pushed TTFT breakdown to the run's.
func checkBreakdown(t *testing.T, m *metricpb.Metric) {
	t.Helper()
	got := map[string]float64{}
	for _, dp := range m.GetGauge().GetDataPoints() {
		a := otlptest.Attrs(dp.Attributes)
		got[a["tokenprobe.ttft.phase"]+"/"+a["tokenprobe.statistic"]+"/"+a["tokenprobe.ttft.dominant"]] = dp.GetAsDouble()
	}
	if len(got) != 2 || got["queue/mean/true"] != 4.3 || got["elsewhere/mean/false"] != 0.4 {
		t.Errorf("tokenprobe.ttft.breakdown: %v", got)
	}
}

func keys(m map[string]*metricpb.Metric) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestUnknownProtocol(t *testing.T) {
	if _, err := New(context.Background(), Config{Protocol: "carrier-pigeon"}); err == nil {
		t.Fatal("accepted an unknown protocol")
	}
}

// The operation and provider follow the API: the Messages API is
// Anthropic's chat, the Responses API OpenAI's chat, completions a text
// completion.
func TestOperationAndProviderFollowTheAPI(t *testing.T) {
	rc := otlptest.Start()
	defer rc.Close()
	e, err := New(context.Background(), Config{Endpoint: rc.URL, Interval: time.Hour, Instance: "probe-1", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{"messages": {"chat", "anthropic"}, "responses": {"chat", "openai"}, "completions": {"text_completion", "openai"}, "embeddings": {"embeddings", "openai"}}
	for api := range want {
		r := result.Request{Profile: api, Endpoint: "e", Model: "m", API: api, URL: "http://e:8000/v1", Outcome: result.Success,
			Start: time.Now(), E2E: time.Millisecond, OutputTokens: 1, InputTokens: 1}
		e.Observe(&r, slo.Verdict{})
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := rc.Last()
	seen := 0
	for _, dp := range got["gen_ai.client.operation.duration"].GetExponentialHistogram().DataPoints {
		a := otlptest.Attrs(dp.Attributes)
		w := want[a["tokenprobe.profile"]]
		if a["gen_ai.operation.name"] != w[0] || a["gen_ai.provider.name"] != w[1] {
			t.Errorf("%s: operation %q provider %q, want %v", a["tokenprobe.profile"], a["gen_ai.operation.name"], a["gen_ai.provider.name"], w)
		}
		seen++
	}
	if seen != len(want) {
		t.Fatalf("%d series, want %d", seen, len(want))
	}
}

// A sampled request's span carries the ids its traceparent carried (the
// server's span is its child), its timing from the request's own stamps,
// the GenAI attributes and an event at the first token, and links to its
// run's span; an unsampled request has none.
func TestSpansOfSampledRequests(t *testing.T) {
	rc := otlptest.Start()
	defer rc.Close()
	e, err := New(context.Background(), Config{Endpoint: rc.URL, Interval: time.Hour, Traces: true, TraceState: "tp=eu-west,congo=t61"})
	if err != nil {
		t.Fatal(err)
	}
	run := &probe.Run{Profile: "chat", Endpoint: &client.Endpoint{Name: "vllm"}}
	e.RunStarted(run)
	t0 := time.Now()
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	ok := result.Request{Profile: "chat", Endpoint: "vllm", Model: "llama", API: "chat", URL: "http://vllm:8000/v1", Outcome: result.Success,
		Streaming: true, ContentChunks: 3, OutputTokens: 3, InputTokens: 50, HTTPStatus: 200, ServedModel: "llama", FinishReason: "stop",
		Start: t0, End: t0.Add(ms(300)), TTFT: ms(120), E2E: ms(300), Gaps: []time.Duration{ms(90), ms(90)}, Trace: result.NewTrace(1), RunSeq: run.Seq()}
	unsampled := ok
	unsampled.Trace = result.NewTrace(0)
	failed := ok
	failed.Trace, failed.Outcome, failed.Reason, failed.Err, failed.HTTPStatus = result.NewTrace(1), result.Error, result.ReasonServerError, "HTTP 503", 503
	for _, r := range []*result.Request{&ok, &unsampled, &failed} {
		e.Observe(r, slo.Verdict{})
	}
	e.RunFinished(run, probe.Finished{Verdict: probe.Passed})
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := map[string]*tracepb.Span{}
	var runSpan *tracepb.Span
	for _, s := range rc.Spans() {
		if s.Name == "tokenprobe run chat" {
			runSpan = s
			continue
		}
		spans[hex.EncodeToString(s.TraceId)] = s
	}
	if runSpan == nil || len(spans) != 2 || spans[unsampled.Trace.TraceIDString()] != nil {
		t.Fatalf("run span %v, request spans %d (want 2: the unsampled one has none)", runSpan != nil, len(spans))
	}
	s := spans[ok.Trace.TraceIDString()]
	a := otlptest.Attrs(s.Attributes)
	switch {
	case s == nil:
		t.Fatal("no span for the sampled request")
	case hex.EncodeToString(s.SpanId) != ok.Trace.SpanIDString() || s.Name != "chat llama" || s.Kind != tracepb.Span_SPAN_KIND_CLIENT:
		t.Errorf("span %s %q kind %v, want span id %s named chat llama, client", hex.EncodeToString(s.SpanId), s.Name, s.Kind, ok.Trace.SpanIDString())
	case time.Duration(s.EndTimeUnixNano-s.StartTimeUnixNano) != ms(300) || s.StartTimeUnixNano != uint64(t0.UnixNano()):
		t.Errorf("span from %d to %d, want the request's start and 300 ms", s.StartTimeUnixNano, s.EndTimeUnixNano)
	case a["gen_ai.operation.name"] != "chat" || a["gen_ai.request.model"] != "llama" || a["gen_ai.usage.input_tokens"] != "50" ||
		a["server.address"] != "vllm" || a["http.response.status_code"] != "200" || a["tokenprobe.profile"] != "chat" ||
		a["gen_ai.request.stream"] != "true" || a["gen_ai.response.time_to_first_chunk"] != "0.12" || a["tokenprobe.ttft"] != "0.12":
		t.Errorf("attributes %v", a)
	case len(s.Events) != 1 || s.Events[0].Name != "first_token" || time.Duration(s.Events[0].TimeUnixNano-s.StartTimeUnixNano) != ms(120):
		t.Errorf("events %v, want first_token at 120 ms", s.Events)
	case len(s.Links) != 1 || !bytes.Equal(s.Links[0].SpanId, runSpan.SpanId):
		t.Errorf("links %v, want the run's span", s.Links)
	case s.TraceState != "tp=eu-west,congo=t61" || runSpan.TraceState != s.TraceState:
		t.Errorf("trace state %q, run's %q, want the configured tp=eu-west,congo=t61", s.TraceState, runSpan.TraceState)
	}
	if got := rc.SpanSchemas(); !slices.Equal(got, []string{semconv.SchemaURL}) {
		t.Errorf("spans under schemas %q, want the resource's and the scope's %s", got, semconv.SchemaURL)
	}
	f := spans[failed.Trace.TraceIDString()]
	if f == nil || f.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || otlptest.Attrs(f.Attributes)["error.type"] != "server_error" {
		t.Errorf("failed request's span %v", f)
	}
}

// A run's last requests reach the exporter through the sink's queue, often
// after the run's end: each still links to its own run's span, not to a
// later run of the same profile.
func TestRequestsLinkToTheirRunAfterItEnds(t *testing.T) {
	rc := otlptest.Start()
	defer rc.Close()
	e, err := New(context.Background(), Config{Endpoint: rc.URL, Interval: time.Hour, Traces: true})
	if err != nil {
		t.Fatal(err)
	}
	first := &probe.Run{Profile: "chat", Endpoint: &client.Endpoint{Name: "vllm"}}
	second := &probe.Run{Profile: "chat", Endpoint: &client.Endpoint{Name: "vllm"}}
	request := func(run *probe.Run) *result.Request {
		t0 := time.Now()
		return &result.Request{Profile: "chat", Endpoint: "vllm", Model: "m", API: "chat", Outcome: result.Success,
			Start: t0, End: t0.Add(time.Millisecond), Trace: result.NewTrace(1), RunSeq: run.Seq()}
	}
	e.RunStarted(first)
	early := request(first)
	e.Observe(early, slo.Verdict{})
	late := request(first)
	e.RunFinished(first, probe.Finished{Verdict: probe.Passed})
	e.Observe(late, slo.Verdict{}) // after its run's end
	e.RunStarted(second)
	later := request(first) // while the next run of the profile is on
	e.Observe(later, slo.Verdict{})
	e.RunFinished(second, probe.Finished{Verdict: probe.Passed})
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var runSpans [][]byte
	links := map[string][]byte{}
	for _, s := range rc.Spans() {
		if s.Name == "tokenprobe run chat" {
			runSpans = append(runSpans, s.SpanId)
			continue
		}
		if len(s.Links) == 1 {
			links[hex.EncodeToString(s.TraceId)] = s.Links[0].SpanId
		}
	}
	if len(runSpans) != 2 {
		t.Fatalf("%d run spans, want 2", len(runSpans))
	}
	// The first run's span is the one its early request links to.
	firstSpan := links[early.Trace.TraceIDString()]
	if firstSpan == nil {
		t.Fatal("the request during its run is not linked")
	}
	for name, r := range map[string]*result.Request{"after its run's end": late, "during the next run": later} {
		if got := links[r.Trace.TraceIDString()]; !bytes.Equal(got, firstSpan) {
			t.Errorf("a request observed %s links to %x, want its own run's span %x", name, got, firstSpan)
		}
	}
}

// A collector that accepts and never answers: shutdown ends within its
// deadline, and every span it could not deliver is counted.
func TestACollectorThatNeverAnswersHoldsNothing(t *testing.T) {
	h, err := hostile.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var mu sync.Mutex
	told := map[string]int64{}
	e, err := New(context.Background(), Config{Endpoint: "http://" + h.Addr() + "/" + hostile.Silent, Interval: time.Hour,
		Timeout: 100 * time.Millisecond, Traces: true,
		Dropped: func(signal string, n int64) { mu.Lock(); told[signal] += n; mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	run := &probe.Run{Profile: "chat", Endpoint: &client.Endpoint{Name: "vllm"}}
	e.RunStarted(run)
	const n = 50
	for range n {
		t0 := time.Now()
		e.Observe(&result.Request{Profile: "chat", Endpoint: "vllm", Model: "m", API: "chat", Outcome: result.Success,
			Start: t0, End: t0.Add(time.Millisecond), Trace: result.NewTrace(1), RunSeq: run.Seq()}, slo.Verdict{})
	}
	e.RunFinished(run, probe.Finished{Verdict: probe.Passed})
	// A deadline far past the exports' own bounds (100 ms an attempt, 200
	// ms of retries): the shutdown must end by those, not by it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.Shutdown(ctx) }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Shutdown said nothing of the collector that never answered")
		}
		if ctx.Err() != nil {
			t.Errorf("Shutdown ended by its deadline, not by the exports' bounds: %v", err)
		}
	case <-time.After(time.Minute): // a hang, not a timing
		t.Fatal("Shutdown waited for the collector that never answers")
	}
	spans, points := e.Dropped()
	mu.Lock()
	defer mu.Unlock()
	if spans != n+1 || told[SignalTraces] != spans || points == 0 || told[SignalMetrics] != points {
		t.Errorf("dropped %d spans and %d points, told %v; want the %d spans (requests and run) and the final metrics", spans, points, told, n+1)
	}
}
