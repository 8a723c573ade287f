package sim

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// serverSpan exports one request's server span as vLLM records its own
// (vllm/tracing.py): named llm_request, a child of the caller's
// traceparent, from arrival to the end, with the queue, first-token,
// prefill, decode and end-to-end times the vLLM-named histograms
// observe for the same request.
func (l *lifecycle) serverSpan(parent context.Context, t trace.Tracer, id, model string, end time.Time) {
	if t == nil || l.firstToken.IsZero() {
		return
	}
	_, span := t.Start(parent, "llm_request", trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(l.arrived),
		trace.WithAttributes(
			attribute.String("gen_ai.request.id", id),
			attribute.String("gen_ai.response.model", model),
			attribute.Int("gen_ai.usage.prompt_tokens", l.inTokens),
			attribute.Int("gen_ai.usage.completion_tokens", l.outTokens),
			attribute.Float64("gen_ai.latency.time_in_queue", l.scheduled.Sub(l.arrived).Seconds()),
			attribute.Float64("gen_ai.latency.time_to_first_token", l.firstToken.Sub(l.arrived).Seconds()),
			attribute.Float64("gen_ai.latency.e2e", end.Sub(l.arrived).Seconds()),
			attribute.Float64("gen_ai.latency.time_in_model_prefill", l.firstToken.Sub(l.scheduled).Seconds()),
			attribute.Float64("gen_ai.latency.time_in_model_decode", end.Sub(l.firstToken).Seconds()),
			attribute.Float64("gen_ai.latency.time_in_model_inference", end.Sub(l.scheduled).Seconds()),
		))
	span.End(trace.WithTimestamp(end))
}

// traceContext is the request's traceparent, as vLLM extracts it.
func traceContext(r *http.Request) context.Context {
	return propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(r.Header))
}
