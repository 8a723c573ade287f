package bench

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
)

// collector is an OTLP/HTTP receiver that reads and discards what it is
// sent, counting its bytes, so that the OTLP kinds pay for encoding and
// sending, as they would to a real collector, and the collector's own
// work stays out of their process.
type collector struct {
	*httptest.Server
	metrics, traces atomic.Int64
}

func startCollector() *collector {
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/v1/metrics":
			c.metrics.Add(n)
		case "/v1/traces":
			c.traces.Add(n)
		}
		// An empty Export*ServiceResponse is an empty protobuf message.
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	return c
}

// url is where the clients push; none without a collector.
func (c *collector) url() string {
	if c == nil {
		return ""
	}
	return c.URL
}

// received is the bytes of metrics and of spans received so far.
func (c *collector) received() (metrics, traces int64) {
	if c == nil {
		return 0, 0
	}
	return c.metrics.Load(), c.traces.Load()
}
