package setup

import (
	"go.opentelemetry.io/otel/trace"

	"github.com/tokenprobe/tokenprobe/exporter/otlp"
	"github.com/tokenprobe/tokenprobe/internal/config"
)

// OTLP converts the configuration's otlp block (nil: the environment
// only) into the exporter's settings.
func OTLP(c *config.OTLP, tracing *config.Tracing, version string) otlp.Config {
	out := otlp.Config{Version: version, Traces: tracing.SampleRatio() > 0, TraceState: tracing.State()}
	if c != nil {
		out.Protocol, out.Endpoint, out.Insecure = c.Protocol, c.Endpoint, c.Insecure
		if len(c.Headers) > 0 {
			out.Headers = map[string]string{}
			for k, h := range c.Headers {
				out.Headers[k] = h.Value()
			}
		}
		out.Interval, out.Timeout = c.Interval.D(), c.Timeout.D()
	}
	return out
}

// Tracing is what every request's trace context carries.
type Tracing struct {
	// Sample is the share of requests whose traceparent says sampled.
	Sample float64
	// State is the tracestate header's value, none when empty.
	State string
	// Server, when set, exports the built-in simulators' server spans.
	Server trace.Tracer
}

// TraceContext is the trace context of cfg's requests. Sample is the
// tracing block's share where OTLP export is on (an otlp block or the
// OTEL_* variables), 0 otherwise: every traceparent then unsampled.
func TraceContext(cfg *config.Config) Tracing {
	t := Tracing{State: cfg.Tracing.State()}
	if cfg.OTLP != nil || otlp.EnvEnabled() {
		t.Sample = cfg.Tracing.SampleRatio()
	}
	return t
}
