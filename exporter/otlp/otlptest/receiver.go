// Package otlptest is an OTLP/HTTP metrics and traces receiver for
// tests: it decodes what it is sent and keeps it.
package otlptest

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver is a running OTLP/HTTP endpoint; URL is its address.
type Receiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*colmetricpb.ExportMetricsServiceRequest
	spans    []*tracepb.Span
	// spanSchemas are the schema URLs the spans came under, resource's
	// and scope's.
	spanSchemas map[string]bool
}

// Start starts a receiver; Close stops it.
func Start() *Receiver {
	rc := &Receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	return rc
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/traces" && r.Header.Get("Content-Type") == "application/x-protobuf" {
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		if rc.spanSchemas == nil {
			rc.spanSchemas = map[string]bool{}
		}
		for _, rs := range req.ResourceSpans {
			rc.spanSchemas[rs.SchemaUrl] = true
			for _, ss := range rs.ScopeSpans {
				rc.spanSchemas[ss.SchemaUrl] = true
				rc.spans = append(rc.spans, ss.Spans...)
			}
		}
		rc.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
		return
	}
	if r.URL.Path != "/v1/metrics" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "unexpected "+r.URL.Path+" "+r.Header.Get("Content-Type"), http.StatusBadRequest)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req colmetricpb.ExportMetricsServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.requests = append(rc.requests, &req)
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{})
	_, _ = w.Write(out)
}

// Last returns the metrics of the newest export by name, and its resource
// attributes.
func (rc *Receiver) Last() (map[string]*metricpb.Metric, map[string]string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := map[string]*metricpb.Metric{}
	if len(rc.requests) == 0 {
		return out, nil
	}
	req := rc.requests[len(rc.requests)-1]
	for _, rm := range req.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				out[m.Name] = m
			}
		}
	}
	return out, Attrs(req.ResourceMetrics[0].Resource.Attributes)
}

// Spans returns every span received.
func (rc *Receiver) Spans() []*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*tracepb.Span(nil), rc.spans...)
}

// SpanSchemas are the schema URLs the spans came under, their
// resources' and their scopes' ("" where one had none).
func (rc *Receiver) SpanSchemas() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Sorted(maps.Keys(rc.spanSchemas))
}

// Attrs flattens attributes to strings.
func Attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.Key] = strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_DoubleValue:
			out[kv.Key] = strconv.FormatFloat(v.DoubleValue, 'g', -1, 64)
		case *commonpb.AnyValue_BoolValue:
			out[kv.Key] = strconv.FormatBool(v.BoolValue)
		}
	}
	return out
}

// HistogramCount sums the counts of an exponential histogram's points.
func HistogramCount(m *metricpb.Metric) uint64 {
	var n uint64
	for _, dp := range m.GetExponentialHistogram().GetDataPoints() {
		n += dp.Count
	}
	return n
}
