package otlp

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tokenprobe/tokenprobe/probe"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
)

// tracer exports a span per sampled request, with the ids its
// traceparent carried, so that the server's span (a child of it) and
// the probe's join in one trace; and a span per run, which its
// requests' spans link to (each request has a trace of its own).
type tracer struct {
	provider *sdktrace.TracerProvider
	t        trace.Tracer
	losses   *losses

	mu   sync.Mutex
	runs map[uint64]trace.Span // by probe.Run.Seq, while the run lasts
	// ended are the span contexts of the runs that ended last, oldest
	// first: a run's last requests reach the tracer through the sink's
	// queue, often after the run's end, which comes directly.
	ended []endedRun
}

type endedRun struct {
	seq  uint64
	span trace.SpanContext
}

// keepEnded is how many ended runs' spans requests can still link to: more
// runs than a daemon ends in the time its queue takes to drain.
const keepEnded = 256

// presetIDs is a context key: the ids the next span must take.
type presetIDs struct{}

// idGenerator gives a span the ids preset in its context (the request's
// traceparent), and random ones otherwise.
type idGenerator struct{ random sdktrace.IDGenerator }

func (g idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if t, ok := ctx.Value(presetIDs{}).(*result.Trace); ok {
		return t.TraceID, t.SpanID
	}
	return g.random.NewIDs(ctx)
}

func (g idGenerator) NewSpanID(ctx context.Context, id trace.TraceID) trace.SpanID {
	if t, ok := ctx.Value(presetIDs{}).(*result.Trace); ok {
		return t.SpanID
	}
	return g.random.NewSpanID(ctx, id)
}

// randomIDs draws fresh ids as requests draw theirs (the SDK does not
// export its own generator).
type randomIDs struct{}

func (randomIDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	t := result.NewTrace(1)
	return t.TraceID, t.SpanID
}

func (randomIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	t := result.NewTrace(1)
	return t.SpanID
}

// alwaysWithState samples every span and gives it the configured
// tracestate: a span of tokenprobe's is a trace's root, so no parent
// carries the state the request sent.
type alwaysWithState struct{ state trace.TraceState }

func (s alwaysWithState) ShouldSample(sdktrace.SamplingParameters) sdktrace.SamplingResult {
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample, Tracestate: s.state}
}

func (alwaysWithState) Description() string { return "AlwaysOnWithTraceState" }

func newTracer(ctx context.Context, cfg Config, res *resource.Resource, l *losses) (*tracer, error) {
	inner, err := newSpanExporter(ctx, cfg)
	if err != nil {
		return nil, err
	}
	exp := countingSpans{inner, l}
	// Config.Load has checked the state; an unparsable one is none.
	state, _ := trace.ParseTraceState(cfg.TraceState)
	// Never blocking: a run's span ends on the run's own goroutine, which
	// a blocked exporter queue held for good when the collector hung. The
	// queue's admission is counted here instead, so that a span the SDK's
	// queue would drop in silence is counted (tokenprobe_otlp_dropped_total).
	bsp := sdktrace.NewBatchSpanProcessor(exp, sdktrace.WithMaxQueueSize(spanQueue), sdktrace.WithBatchTimeout(time.Second))
	p := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(alwaysWithState{state}), // spans are made only for sampled requests
		sdktrace.WithIDGenerator(idGenerator{random: randomIDs{}}),
		sdktrace.WithSpanProcessor(&admitted{SpanProcessor: bsp, l: l}),
	)
	return &tracer{provider: p, t: p.Tracer("github.com/tokenprobe/tokenprobe", trace.WithSchemaURL(semconv.SchemaURL)), losses: l, runs: map[uint64]trace.Span{}}, nil
}

func newSpanExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, error) {
	switch cfg.Protocol {
	case "", "http", "http/protobuf":
		return otlptracehttp.New(ctx, options(cfg, "/v1/traces", optionSet[otlptracehttp.Option, otlptracehttp.RetryConfig]{
			otlptracehttp.WithEndpointURL, otlptracehttp.WithEndpoint, otlptracehttp.WithInsecure, otlptracehttp.WithHeaders, otlptracehttp.WithTimeout, otlptracehttp.WithRetry})...)
	case "grpc":
		return otlptracegrpc.New(ctx, options(cfg, "", optionSet[otlptracegrpc.Option, otlptracegrpc.RetryConfig]{
			nil, otlptracegrpc.WithEndpoint, otlptracegrpc.WithInsecure, otlptracegrpc.WithHeaders, otlptracegrpc.WithTimeout, otlptracegrpc.WithRetry})...)
	}
	return nil, fmt.Errorf("unknown OTLP protocol %q (http or grpc)", cfg.Protocol)
}

func (t *tracer) runStarted(run *probe.Run) {
	_, span := t.t.Start(context.Background(), "tokenprobe run "+run.Profile, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.String("tokenprobe.profile", run.Profile), attribute.String("tokenprobe.endpoint", run.Endpoint.Name)))
	t.mu.Lock()
	t.runs[run.Seq()] = span
	t.mu.Unlock()
}

func (t *tracer) runFinished(run *probe.Run, f probe.Finished) {
	seq := run.Seq()
	t.mu.Lock()
	span := t.runs[seq]
	delete(t.runs, seq)
	if span != nil {
		if len(t.ended) == keepEnded {
			t.ended = append(t.ended[:0], t.ended[1:]...)
		}
		t.ended = append(t.ended, endedRun{seq, span.SpanContext()})
	}
	t.mu.Unlock()
	if span == nil {
		return
	}
	span.SetAttributes(attribute.String("tokenprobe.verdict", string(f.Verdict)))
	if f.Verdict == probe.Errored {
		span.SetStatus(codes.Error, "run error")
	}
	span.End()
	t.losses.ended.Add(1)
}

// runOf is the span context of the run r belongs to, to link to: invalid
// when the run is unknown (not started through this exporter, or ended
// more than keepEnded runs ago).
func (t *tracer) runOf(r *result.Request) trace.SpanContext {
	t.mu.Lock()
	defer t.mu.Unlock()
	if span := t.runs[r.RunSeq]; span != nil {
		return span.SpanContext()
	}
	for i := len(t.ended) - 1; i >= 0; i-- {
		if t.ended[i].seq == r.RunSeq {
			return t.ended[i].span
		}
	}
	return trace.SpanContext{}
}

// observe exports r's span, after the request: nothing of it is on the
// request's clock. Names and attributes follow the GenAI conventions for
// a client inference span.
func (t *tracer) observe(r *result.Request, v slo.Verdict, base []attribute.KeyValue, op string) {
	if !r.Trace.Sampled || !r.Trace.Valid() || r.Start.IsZero() {
		return
	}
	end := r.End
	if end.IsZero() || end.Before(r.Start) {
		end = r.Start.Add(r.E2E)
	}
	attrs := append(append([]attribute.KeyValue{}, base...),
		attribute.String("tokenprobe.outcome", r.Outcome.String()), attribute.Bool("tokenprobe.good", v.Good),
		semconv.GenAIUsageInputTokens(r.InputTokens), semconv.GenAIUsageOutputTokens(r.OutputTokens))
	if r.ServedModel != "" {
		attrs = append(attrs, semconv.GenAIResponseModel(r.ServedModel))
	}
	if r.FinishReason != "" {
		attrs = append(attrs, semconv.GenAIResponseFinishReasons(r.FinishReason))
	}
	if r.HTTPStatus != 0 {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(r.HTTPStatus))
	}
	// The GenAI conventions' own names beside ours, so that a backend
	// that knows them reads the probe's spans as any client's; the first
	// chunk is the first that carries output (a role-only chunk before
	// it is not an answer).
	attrs = append(attrs, semconv.GenAIRequestStream(r.Streaming))
	if r.HasTTFT() {
		attrs = append(attrs, attribute.Float64("tokenprobe.ttft", r.TTFT.Seconds()), semconv.GenAIResponseTimeToFirstChunk(r.TTFT.Seconds()))
	}
	if itl, ok := r.ITL(); ok {
		attrs = append(attrs, attribute.Float64("tokenprobe.itl", itl.Seconds()))
	}
	if r.FirstByte > 0 {
		attrs = append(attrs, attribute.Float64("tokenprobe.first_byte", r.FirstByte.Seconds()))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(r.Start), trace.WithAttributes(attrs...)}
	if run := t.runOf(r); run.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: run}))
	}
	ctx := context.WithValue(context.Background(), presetIDs{}, &r.Trace)
	_, span := t.t.Start(ctx, op+" "+r.Model, opts...)
	if r.HasTTFT() {
		span.AddEvent("first_token", trace.WithTimestamp(r.Start.Add(r.TTFT)))
	}
	if r.HasTTFO {
		span.AddEvent("first_output_token", trace.WithTimestamp(r.Start.Add(r.TTFO)))
	}
	if r.Outcome == result.Error || r.Outcome == result.WrongAnswer {
		why := r.Reason.String()
		if r.Outcome == result.WrongAnswer {
			why = "wrong_answer"
		}
		span.SetAttributes(semconv.ErrorTypeKey.String(why))
		span.SetStatus(codes.Error, r.Err)
	}
	span.End(trace.WithTimestamp(end))
	t.losses.ended.Add(1)
}

// TracerProvider is a provider exporting to cfg's collector for another
// service than the probe's: the standalone simulator's server spans.
func TracerProvider(ctx context.Context, cfg Config, service string) (*sdktrace.TracerProvider, error) {
	exp, err := newSpanExporter(ctx, cfg)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx, resource.WithSchemaURL(semconv.SchemaURL), resource.WithAttributes(semconv.ServiceName(service)))
	if err != nil {
		return nil, err
	}
	return sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(exp)), nil
}
