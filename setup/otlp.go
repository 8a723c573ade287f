package setup

import (
	"github.com/tokenprobe/tokenprobe/config"
	"github.com/tokenprobe/tokenprobe/exporter/otlp"
)

// OTLP converts the configuration's otlp block (nil: the environment
// only) into the exporter's settings.
func OTLP(c *config.OTLP, tracing *config.Tracing, version string) otlp.Config {
	out := otlp.Config{Version: version, Traces: tracing.SampleRatio() > 0}
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

// TraceSample is the share of requests whose spans are exported: the
// tracing block's, where OTLP export is on (an otlp block or the
// OTEL_* variables); 0 otherwise, every traceparent then unsampled.
func TraceSample(cfg *config.Config) float64 {
	if cfg.OTLP == nil && !otlp.EnvEnabled() {
		return 0
	}
	return cfg.Tracing.SampleRatio()
}
