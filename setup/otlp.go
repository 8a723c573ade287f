package setup

import (
	"github.com/tokenprobe/tokenprobe/config"
	"github.com/tokenprobe/tokenprobe/sink/otlp"
)

// OTLP converts the configuration's otlp block (nil: the environment
// only) into the exporter's settings.
func OTLP(c *config.OTLP, version string) otlp.Config {
	out := otlp.Config{Version: version}
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
