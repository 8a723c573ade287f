package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenprobe/tokenprobe/exporter/otlp"
	"github.com/tokenprobe/tokenprobe/internal/daemon"
	"github.com/tokenprobe/tokenprobe/internal/sim"
)

// jaegerConfig is a Jaeger v2 with in-memory storage, an OTLP/HTTP
// receiver and its query API, on the given addresses.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces: {receivers: [otlp], exporters: [jaeger_storage_exporter]}
  telemetry: {metrics: {level: none}, logs: {level: warn}}
extensions:
  jaeger_storage: {backends: {memstore: {memory: {max_traces: 10000}}}}
  jaeger_query:
    storage: {traces: memstore}
    http: {endpoint: %q}
    grpc: {endpoint: %q}
receivers:
  otlp: {protocols: {http: {endpoint: %q}}}
exporters:
  jaeger_storage_exporter: {trace_storage: memstore}
`

var exemplarTrace = regexp.MustCompile(`^tokenprobe_time_to_first_token_seconds_bucket\{[^}]*\} \S+ # \{[^}]*trace_id="([0-9a-f]{32})"[^}]*\} (\S+)`)

// jaegerSpan is a span as Jaeger's query API returns it.
type jaegerSpan struct {
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

func (s jaegerSpan) tag(key string) any {
	for _, t := range s.Tags {
		if t.Key == key {
			return t.Value
		}
	}
	return nil
}

// One slow request followed from the histogram into a trace backend that
// no one here wrote (Jaeger v2, built by .ci/run from its module): the
// daemon overloads the simulator, a TTFT exemplar on /metrics names a
// trace, and Jaeger holds the probe's span and, as its child, the
// simulator's server span with its queue time.
func TestE2ETracesInJaeger(t *testing.T) {
	bin := os.Getenv("TOKENPROBE_JAEGER")
	if bin == "" {
		if os.Getenv("TOKENPROBE_REQUIRE_JAEGER") != "" {
			t.Fatal("TOKENPROBE_REQUIRE_JAEGER is set and TOKENPROBE_JAEGER names no binary (tools/jaeger.sh)")
		}
		t.Skip("no Jaeger (TOKENPROBE_JAEGER; tools/jaeger.sh builds one)")
	}
	dir := t.TempDir()
	queryAddr, grpcAddr, otlpAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	cfg := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, jaegerConfig, queryAddr, grpcAddr, otlpAddr), 0o644); err != nil {
		t.Fatal(err)
	}
	jaeger := exec.Command(bin, "--config", "file:"+cfg)
	jaeger.Stdout, jaeger.Stderr = os.Stderr, os.Stderr
	if err := jaeger.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = jaeger.Process.Kill(); _ = jaeger.Wait() }()
	waitUntil(t, 30*time.Second, "Jaeger's query API", func() bool {
		resp, err := http.Get("http://" + queryAddr + "/api/services")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})

	// The simulator exports its server spans as vLLM does; one slot and
	// four requests at a time make a queue.
	tp, err := otlp.TracerProvider(context.Background(), otlp.Config{Endpoint: "http://" + otlpAddr, Insecure: true}, "tokenprobe-sim")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tp.Shutdown(context.Background()) }()
	cfgSim := simulator
	cfgSim.Slots, cfgSim.PrefillBase, cfgSim.Tracer = 1, 20*time.Millisecond, tp.Tracer("sim")
	model, err := sim.Start("127.0.0.1:0", cfgSim)
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()

	probeAddr := freeAddr(t)
	conf := filepath.Join(dir, "tokenprobe.yaml")
	body := fmt.Sprintf(`endpoints:
  - {name: sim, base_url: %q, model: tokenprobe-sim}
otlp: {endpoint: "http://%s", insecure: true, interval: 1s}
tracing: {sample: 1}
profiles:
  - name: overload
    load: {concurrency: 4, requests: 16}
    workload: {input_tokens: {mean: 20}, output_tokens: {mean: 8}}
    schedule: {every: 5s}
`, model.URL(), otlpAddr)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	serveDaemon(t, probeAddr, daemon.Options{ConfigFile: conf}, prometheus.NewRegistry())

	// A trace id from a TTFT exemplar, as Grafana would follow it: one of
	// a request that queued (a request alone takes about 60 ms).
	var traceID string
	waitUntil(t, 60*time.Second, "a TTFT exemplar over 100 ms with a trace_id on /metrics", func() bool {
		req, _ := http.NewRequest(http.MethodGet, "http://"+probeAddr+"/metrics", nil)
		req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, line := range regexp.MustCompile("\n").Split(string(b), -1) {
			if m := exemplarTrace.FindStringSubmatch(line); m != nil {
				if v, err := strconv.ParseFloat(m[2], 64); err == nil && v > 0.1 {
					traceID = m[1]
					return true
				}
			}
		}
		return false
	})

	var spans []jaegerSpan
	waitUntil(t, 60*time.Second, "the probe's span and the simulator's child span in Jaeger", func() bool {
		resp, err := http.Get("http://" + queryAddr + "/api/traces/" + traceID)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var got struct {
			Data []struct {
				Spans []jaegerSpan `json:"spans"`
			} `json:"data"`
		}
		if json.NewDecoder(resp.Body).Decode(&got) != nil || len(got.Data) != 1 {
			return false
		}
		spans = got.Data[0].Spans
		return len(spans) == 2
	})
	var client, server jaegerSpan
	for _, s := range spans {
		if s.OperationName == "llm_request" {
			server = s
		} else {
			client = s
		}
	}
	if client.OperationName != "chat tokenprobe-sim" || len(server.References) != 1 || server.References[0].RefType != "CHILD_OF" || server.References[0].SpanID != client.SpanID {
		t.Fatalf("trace %s: spans %+v, want the probe's chat span and the simulator's llm_request as its child", traceID, spans)
	}
	queue, _ := server.tag("gen_ai.latency.time_in_queue").(float64)
	serverTTFT, _ := server.tag("gen_ai.latency.time_to_first_token").(float64)
	clientTTFT, _ := client.tag("tokenprobe.ttft").(float64)
	// The server's TTFT runs from the request's arrival, inside the
	// client's: within it, by a millisecond of rounding at most.
	if queue <= 0 || serverTTFT <= 0 || serverTTFT > clientTTFT+0.001 || queue > serverTTFT {
		t.Fatalf("queue %vs, server TTFT %vs, client TTFT %vs", queue, serverTTFT, clientTTFT)
	}
	t.Logf("trace %s: client TTFT %.1f ms, the server's %.1f ms of which %.1f ms in its queue", traceID, clientTTFT*1000, serverTTFT*1000, queue*1000)
}
