package apierror

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenprobe/tokenprobe/probe/result"
)

// capture is one file of testdata: "# key: value" lines, then an HTTP
// response as a server sent it (captured) or as a provider documents it.
type capture struct {
	meta   map[string]string
	status int
	header http.Header
	body   []byte
}

func readCapture(t *testing.T, path string) capture {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := capture{meta: map[string]string{}}
	for bytes.HasPrefix(data, []byte("# ")) {
		line, rest, _ := bytes.Cut(data, []byte("\n"))
		k, v, _ := strings.Cut(string(line[2:]), ": ")
		c.meta[k], data = v, rest
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(data)), nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	if c.body, err = io.ReadAll(resp.Body); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	c.status, c.header = resp.StatusCode, resp.Header
	return c
}

// TestCapturedAndDocumentedBodies reads every error body in testdata:
// those captured from the servers .ci/run builds (llama-server,
// llm-d-inference-sim) and those the providers document, each with its
// source in its header.
func TestCapturedAndDocumentedBodies(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.http")
	if len(files) < 20 {
		t.Fatalf("only %d captures in testdata", len(files))
	}
	seen := map[string]bool{}
	for _, f := range files {
		c := readCapture(t, f)
		want := c.meta["want"]
		if want == "" || c.meta["server"] == "" {
			t.Errorf("%s: its header must say the server and the reason wanted", f)
			continue
		}
		seen[want] = true
		if got := Reason(c.status, c.body).String(); got != want {
			t.Errorf("%s (%s): HTTP %d read as %s, want %s", f, c.meta["server"], c.status, got, want)
		}
	}
	// Every reason an HTTP answer can have is shown by a body.
	for _, r := range []result.Reason{result.ReasonAuth, result.ReasonRateLimit, result.ReasonQuota, result.ReasonOverloaded,
		result.ReasonContentFilter, result.ReasonContextLength, result.ReasonModelNotFound, result.ReasonBadRequest} {
		if !seen[r.String()] {
			t.Errorf("no capture shows %s", r)
		}
	}
}

func TestStatusAlone(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
		want   result.Reason
	}{
		{401, "", result.ReasonAuth},
		{403, "<html>Forbidden</html>", result.ReasonAuth},
		{402, "", result.ReasonQuota},
		{429, "", result.ReasonRateLimit},
		{529, "", result.ReasonOverloaded},
		{500, "Internal Server Error", result.ReasonServerError},
		{502, "<html><body>502 Bad Gateway</body></html>", result.ReasonServerError},
		{503, "upstream connect error", result.ReasonServerError},
		{503, `{"error":{"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE","code":503}}`, result.ReasonOverloaded},
		{404, "404 page not found", result.ReasonBadRequest},
		{307, "", result.ReasonBadRequest},
		{400, "not json {", result.ReasonBadRequest},
		// A 404 of a wrong path says "not found" but no model.
		{404, `{"detail":"Not Found"}`, result.ReasonBadRequest},
	} {
		if got := Reason(c.status, []byte(c.body)); got != c.want {
			t.Errorf("HTTP %d %q: %s, want %s", c.status, c.body, got, c.want)
		}
	}
}

// TestStreamErrors: an error event inside a stream that began with 200
// keeps the reason stream unless it names a cause.
func TestStreamErrors(t *testing.T) {
	for _, c := range []struct {
		body string
		want result.Reason
	}{
		// Anthropic's mid-stream error event
		// (https://docs.anthropic.com/en/docs/build-with-claude/streaming, "Error events").
		{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, result.ReasonOverloaded},
		{`{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, result.ReasonStream},
		// vLLM's in-stream error object.
		{`{"object":"error","message":"This model's maximum context length is 2048 tokens.","type":"BadRequestError","code":400}`, result.ReasonContextLength},
		{`{"error":{"message":"something broke","type":"InternalServerError","code":500}}`, result.ReasonStream},
		{`{"error":{"message":"The model is overloaded","type":"server_error"}}`, result.ReasonOverloaded},
		{`garbage`, result.ReasonStream},
	} {
		if got := Reason(0, []byte(c.body)); got != c.want {
			t.Errorf("%s: %s, want %s", c.body, got, c.want)
		}
	}
}

// TestBounded: a body past MaxBody is read no further, and one nested
// 20,000 deep is refused by the decoder without a stack to match: the
// status decides.
func TestBounded(t *testing.T) {
	deep := strings.Repeat(`{"error":`, 20000) + `"overloaded"` + strings.Repeat("}", 20000)
	if got := Reason(500, []byte(deep)); got != result.ReasonServerError && got != result.ReasonOverloaded {
		t.Errorf("deep body: %s", got)
	}
	huge := append([]byte(`{"error":{"message":"`+strings.Repeat("x", 60<<20)), `","code":"insufficient_quota"}}`...)
	if got := Reason(429, huge); got != result.ReasonRateLimit {
		t.Errorf("a code past MaxBody was read: %s", got)
	}
	cut := []byte(`{"error":{"code":"content_filter","message":"` + strings.Repeat("y", MaxBody))
	if got := Reason(400, cut); got != result.ReasonContentFilter {
		t.Errorf("a body cut at MaxBody lost the code it held: %s", got)
	}
}

func BenchmarkReason(b *testing.B) {
	body := []byte(`{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-xxx on tokens per min (TPM): Limit 200000, Used 199800, Requested 512.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`)
	b.ReportAllocs()
	for b.Loop() {
		Reason(429, body)
	}
}

// A gateway's own answers are told from the model server's it passes on:
// Portkey's validation and its exceptions name it; an error body of a
// model server does not.
func TestGatewayNamesItsOwnAnswers(t *testing.T) {
	for body, want := range map[string]string{
		`{"status":"failure","message":"Either x-portkey-config or x-portkey-provider header is required"}`:                                           "the Portkey gateway",
		`{"status":"failure","message":"Something went wrong"}`:                                                                                       "the Portkey gateway",
		`{"error":{"message":"The guardrail checks defined in the config failed.","type":"hooks_failed","param":null,"code":null},"hook_results":{}}`: "the Portkey gateway",
		`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`:                                                   "",
		`{"object":"error","message":"overloaded","type":"ServiceUnavailable"}`:                                                                       "",
	} {
		if got := Gateway([]byte(body)); got != want {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
	if r := Reason(446, []byte(`{"error":{"message":"The guardrail checks defined in the config failed.","type":"hooks_failed"},"hook_results":{}}`)); r != result.ReasonContentFilter {
		t.Errorf("a guardrail's deny: %v, want content_filter", r)
	}
}
