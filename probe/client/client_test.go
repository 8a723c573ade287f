package client

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/timingtest"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
)

func chunk(content string) string {
	return fmt.Sprintf(`{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}`, content)
}

const finish = `{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`

// script is a server that sends events after given delays and records when
// each one actually left (after Flush), on the same clock as the client.
type script struct {
	mu    sync.Mutex
	sent  []time.Time
	steps []step
}

type step struct {
	after time.Duration
	data  string // written as "data: <data>\n\n" unless raw
	raw   bool
}

func (s *script) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	for _, st := range s.steps {
		select {
		case <-time.After(st.after):
		case <-req.Context().Done():
			return
		}
		if st.raw {
			fmt.Fprint(w, st.data)
		} else {
			fmt.Fprintf(w, "data: %s\n\n", st.data)
		}
		w.(http.Flusher).Flush()
		s.mu.Lock()
		s.sent = append(s.sent, time.Now())
		s.mu.Unlock()
	}
}

func endpoint(url string) *Endpoint {
	return &Endpoint{Name: "t", BaseURL: url + "/v1", API: openai.Chat, Model: "m", Timeout: 5 * time.Second, IncludeUsage: true}
}

func within(a *timingtest.Attempt, what string, got, want, tol time.Duration) {
	if d := got - want; d < -time.Millisecond || d > tol {
		a.Errorf("%s = %v, want %v (+%v)", what, got, want, tol)
	}
}

func TestTimingAgainstScriptedServer(t *testing.T) { bothClients(t, testTimingAgainstScriptedServer) }

// The client's stamps match when the server's chunks left, within 5 ms.
// A client goroutine that the machine does not schedule for a while
// stamps late through no fault of its own, so the timing is checked over
// up to three requests and holds if one of them holds it.
func testTimingAgainstScriptedServer(t *testing.T, newClient func(Options) *Client) {
	c := newClient(Options{})
	timingtest.Retry(t, 3, func(a *timingtest.Attempt) {
		// First token after 120 ms, then tokens 20 ms apart with a 90 ms
		// stall before the fourth, then a finish chunk, a usage chunk and
		// [DONE], none of which may move E2E.
		s := &script{steps: []step{
			{0, `{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`, false},
			{120 * time.Millisecond, chunk("Hello"), false},
			{20 * time.Millisecond, chunk(" big"), false},
			{20 * time.Millisecond, chunk(" wide"), false},
			{90 * time.Millisecond, chunk(" world"), false},
			{20 * time.Millisecond, chunk("!"), false},
			{30 * time.Millisecond, finish, false},
			{30 * time.Millisecond, `{"id":"x","choices":[],"usage":{"prompt_tokens":17,"completion_tokens":6,"total_tokens":23}}`, false},
			{10 * time.Millisecond, "[DONE]", false},
		}}
		srv := httptest.NewServer(s)
		defer srv.Close()
		var r result.Request
		r.Scheduled = time.Now()
		c.Do(context.Background(), endpoint(srv.URL), Prompt{Text: "hi", InputTokens: 20, MaxTokens: 10, Stream: true}, &r)

		if r.Outcome != result.Success {
			t.Fatalf("outcome %v/%v: %s", r.Outcome, r.Reason, r.Err)
		}
		if len(r.Gaps) != 4 {
			t.Fatalf("%d gaps, want 4: %v", len(r.Gaps), r.Gaps)
		}
		// What the stream carried does not depend on timing.
		if r.ContentChunks != 5 || r.OutputTokens != 6 || r.OutputSource != result.SourceUsage {
			t.Errorf("chunks %d, OSL %d from %v; want 5, 6 from usage", r.ContentChunks, r.OutputTokens, r.OutputSource)
		}
		if r.InputTokens != 17 || r.InputSource != result.SourceUsage || r.IntendedInputTokens != 20 {
			t.Errorf("ISL %d from %v (intended %d)", r.InputTokens, r.InputSource, r.IntendedInputTokens)
		}
		if itl, ok := r.ITL(); !ok || itl != (r.E2E-r.TTFT)/5 {
			t.Errorf("ITL %v, want (E2E-TTFT)/(OSL-1) = %v", itl, (r.E2E-r.TTFT)/5)
		}
		// Nothing arrives before it was sent: the script's waits are floors.
		if r.TTFT < 120*time.Millisecond || r.E2E < 270*time.Millisecond {
			t.Errorf("TTFT %v / E2E %v shorter than the script", r.TTFT, r.E2E)
		}

		sent := s.sent
		const tol = 5 * time.Millisecond
		within(a, "TTFT", r.TTFT, sent[1].Sub(r.Start), tol)
		within(a, "TTST", r.TTST, sent[2].Sub(sent[1]), tol)
		within(a, "E2E", r.E2E, sent[5].Sub(r.Start), tol)
		for i, g := range r.Gaps {
			within(a, fmt.Sprintf("gap %d", i), g, sent[i+2].Sub(sent[i+1]), tol)
		}
	})
}

func TestOSLFallsBackToChunksWithoutUsage(t *testing.T) {
	bothClients(t, testOSLFallsBackToChunksWithoutUsage)
}

func testOSLFallsBackToChunksWithoutUsage(t *testing.T, newClient func(Options) *Client) {
	srv := httptest.NewServer(&script{steps: []step{
		{0, chunk("a"), false}, {0, chunk("b"), false}, {0, chunk("c"), false}, {0, finish, false},
	}})
	defer srv.Close()
	var r result.Request
	newClient(Options{}).Do(context.Background(), endpoint(srv.URL), Prompt{Text: "x", InputTokens: 9, Stream: true}, &r)
	if r.Outcome != result.Success || r.OutputTokens != 3 || r.OutputSource != result.SourceChunks {
		t.Fatalf("outcome %v, OSL %d from %v: %s", r.Outcome, r.OutputTokens, r.OutputSource, r.Err)
	}
	if r.InputTokens != 9 || r.InputSource != result.SourceIntended {
		t.Fatalf("ISL %d from %v, want intended 9", r.InputTokens, r.InputSource)
	}
}

func TestReasoningCountsForTTFT(t *testing.T) { bothClients(t, testReasoningCountsForTTFT) }

func testReasoningCountsForTTFT(t *testing.T, newClient func(Options) *Client) {
	// The 50 ms between the chunks is timing: a client not scheduled for
	// a few milliseconds on a busy machine stamps the first chunk late
	// and shortens it (a busy CI pass read 43 ms), so the check is retried.
	timingtest.Retry(t, 3, func(a *timingtest.Attempt) {
		srv := httptest.NewServer(&script{steps: []step{
			{0, `{"choices":[{"delta":{"reasoning_content":"hmm"}}]}`, false},
			{50 * time.Millisecond, `{"choices":[{"delta":{"content":"42"},"finish_reason":"stop"}]}`, false},
			{0, "[DONE]", false},
		}})
		defer srv.Close()
		var r result.Request
		newClient(Options{}).Do(context.Background(), endpoint(srv.URL), Prompt{Text: "x", Stream: true}, &r)
		if r.Outcome != result.Success || !r.HasTTFO {
			t.Fatalf("outcome %v: %s", r.Outcome, r.Err)
		}
		if r.TTFO-r.TTFT < 45*time.Millisecond {
			a.Errorf("TTFT %v should be the reasoning chunk, TTFO %v the answer", r.TTFT, r.TTFO)
		}
	})
}

func TestOutcomes(t *testing.T) { bothClients(t, testOutcomes) }

func testOutcomes(t *testing.T, newClient func(Options) *Client) {
	stream := func(steps ...step) http.Handler { return &script{steps: steps} }
	status := func(code int, hdr ...string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			for i := 0; i+1 < len(hdr); i += 2 {
				w.Header().Set(hdr[i], hdr[i+1])
			}
			w.WriteHeader(code)
			fmt.Fprint(w, `{"error":{"message":"nope"}}`)
		})
	}
	reset := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fmt.Fprintf(w, "data: %s\n\n", chunk("partial"))
		w.(http.Flusher).Flush()
		conn, _, _ := w.(http.Hijacker).Hijack()
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST, not FIN
		}
		conn.Close()
	})
	cases := []struct {
		name    string
		h       http.Handler
		timeout time.Duration
		outcome result.Outcome
		reason  result.Reason
	}{
		{"success", stream(step{0, chunk("a"), false}, step{0, "[DONE]", false}), 0, result.Success, result.ReasonNone},
		{"finish_reason then EOF", stream(step{0, chunk("a"), false}, step{0, finish, false}), 0, result.Success, result.ReasonNone},
		{"500", status(500), 0, result.Error, result.ReasonServerError},
		{"503", status(503), 0, result.Error, result.ReasonServerError},
		{"429", status(429, "Retry-After", "2"), 0, result.Error, result.ReasonRateLimit},
		{"404", status(404), 0, result.Error, result.ReasonBadRequest},
		{"redirect", status(307, "Location", "/elsewhere"), 0, result.Error, result.ReasonBadRequest},
		{"empty stream", stream(step{0, "[DONE]", false}), 0, result.Error, result.ReasonEmpty},
		{"role-only chunks", stream(step{0, `{"choices":[{"delta":{"role":"assistant","content":""}}]}`, false}, step{0, "[DONE]", false}), 0, result.Error, result.ReasonEmpty},
		{"truncated", stream(step{0, chunk("a"), false}), 0, result.Error, result.ReasonStream},
		{"malformed chunk", stream(step{0, chunk("a"), false}, step{0, `{"choices":[{"delta":`, false}), 0, result.Error, result.ReasonStream},
		{"error event", stream(step{0, "event: error\ndata: {\"error\":\"boom\"}\n\n", true}), 0, result.Error, result.ReasonStream},
		{"error payload", stream(step{0, chunk("a"), false}, step{0, `{"object":"error","message":"too long"}`, false}), 0, result.Error, result.ReasonStream},
		{"line too long", stream(step{0, "data: " + strings.Repeat("x", 2<<20) + "\n\n", true}), 0, result.Error, result.ReasonStream},
		{"reset mid-stream", reset, 0, result.Error, result.ReasonStream},
		{"stall past timeout", stream(step{0, chunk("a"), false}, step{2 * time.Second, chunk("b"), false}), 300 * time.Millisecond, result.Error, result.ReasonTimeout},
		{"slow headers", http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
			}
		}), 200 * time.Millisecond, result.Error, result.ReasonTimeout},
		{"body that never ends", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for r.Context().Err() == nil {
				fmt.Fprintf(w, "data: %s\n\n", chunk("more"))
				w.(http.Flusher).Flush()
				time.Sleep(time.Millisecond)
			}
		}), 300 * time.Millisecond, result.Error, result.ReasonTimeout},
		{"wrong content type", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"choices":[{"message":{"content":"hi"}}]}`)
		}), 0, result.Error, result.ReasonStream},
	}
	c := newClient(Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.h)
			defer srv.Close()
			ep := endpoint(srv.URL)
			if tc.timeout > 0 {
				ep.Timeout = tc.timeout
			}
			timingtest.Retry(t, 3, func(a *timingtest.Attempt) {
				var r result.Request
				c.Do(context.Background(), ep, Prompt{Text: "x", Stream: true}, &r)
				if r.Outcome != tc.outcome || r.Reason != tc.reason {
					t.Fatalf("got %v/%v (%s), want %v/%v", r.Outcome, r.Reason, r.Err, tc.outcome, tc.reason)
				}
				// A timeout ends the request: not the server, whose next
				// step comes 2s in, nor the 64 MiB body limit.
				if took := r.End.Sub(r.Start); tc.reason == result.ReasonTimeout && took > tc.timeout+time.Second {
					a.Errorf("the request ended %v after it began, its timeout %v", took, tc.timeout)
				}
			})
		})
	}
}

func TestConnectionRefused(t *testing.T) { bothClients(t, testConnectionRefused) }

func testConnectionRefused(t *testing.T, newClient func(Options) *Client) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	var r result.Request
	newClient(Options{}).Do(context.Background(), endpoint("http://"+addr), Prompt{Text: "x", Stream: true}, &r)
	if r.Outcome != result.Error || r.Reason != result.ReasonConnect {
		t.Fatalf("got %v/%v: %s", r.Outcome, r.Reason, r.Err)
	}
}

func TestWorkloadCancellationIsNotAnError(t *testing.T) {
	bothClients(t, testWorkloadCancellationIsNotAnError)
}

func testWorkloadCancellationIsNotAnError(t *testing.T, newClient func(Options) *Client) {
	srv := httptest.NewServer(&script{steps: []step{{0, chunk("a"), false}, {2 * time.Second, chunk("b"), false}}})
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var r result.Request
	newClient(Options{}).Do(ctx, endpoint(srv.URL), Prompt{Text: "x", Stream: true}, &r)
	if r.Outcome != result.Cancelled {
		t.Fatalf("got %v/%v (%s), want cancelled", r.Outcome, r.Reason, r.Err)
	}
}

func TestNonStreaming(t *testing.T) { bothClients(t, testNonStreaming) }

func testNonStreaming(t *testing.T, newClient func(Options) *Client) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(30 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":2}}`)
	}))
	defer srv.Close()
	var r result.Request
	newClient(Options{}).Do(context.Background(), endpoint(srv.URL), Prompt{Text: "x", Stream: false}, &r)
	if r.Outcome != result.Success || r.OutputTokens != 2 || r.E2E < 30*time.Millisecond {
		t.Fatalf("got %v OSL %d E2E %v: %s", r.Outcome, r.OutputTokens, r.E2E, r.Err)
	}
	if r.HasTTFT() {
		t.Fatal("a non-streamed request has no TTFT")
	}
}

// The request asks for usage in the stream and carries the key as a bearer
// token and the configured headers.
func TestRequestShape(t *testing.T) { bothClients(t, testRequestShape) }

func testRequestShape(t *testing.T, newClient func(Options) *Client) {
	var got *http.Request
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 4096)
		n, _ := r.Body.Read(buf)
		body, got = string(buf[:n]), r
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", chunk("a"))
	}))
	defer srv.Close()
	ep := endpoint(srv.URL)
	ep.APIKey = "sk-test"
	ep.Headers = http.Header{"X-Team": {"sre"}}
	ep.Extra = map[string]any{"ignore_eos": true, "model": "not-this"}
	var r result.Request
	newClient(Options{}).Do(context.Background(), ep, Prompt{Text: "hello", MaxTokens: 7, Stream: true}, &r)
	if got.URL.Path != "/v1/chat/completions" || got.Header.Get("Authorization") != "Bearer sk-test" || got.Header.Get("X-Team") != "sre" {
		t.Fatalf("path %s, headers %v", got.URL.Path, got.Header)
	}
	if _, sent := got.Header["X-Idempotency-Key"]; sent {
		t.Fatal("the empty idempotency key must not go on the wire")
	}
	for _, want := range []string{`"stream":true`, `"stream_options":{"include_usage":true}`, `"max_tokens":7`, `"ignore_eos":true`, `"model":"m"`, `"content":"hello"`} {
		if !strings.Contains(body, want) {
			t.Errorf("body %s lacks %s", body, want)
		}
	}
}

// A base URL with a query (Azure OpenAI's api-version) keeps it after
// the API's path, on the request line itself.
func TestBaseURLQueryStaysOnThePath(t *testing.T) { bothClients(t, testBaseURLQueryStaysOnThePath) }

func testBaseURLQueryStaysOnThePath(t *testing.T, newClient func(Options) *Client) {
	var line string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		line = r.Method + " " + r.RequestURI
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\ndata: %s\n\ndata: [DONE]\n\n", chunk("a"), finish)
	}))
	defer srv.Close()
	for _, c := range []struct {
		base string
		api  openai.API
		want string
	}{
		{srv.URL + "/openai/deployments/gpt-4o?api-version=2024-10-21", openai.Chat, "POST /openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"},
		{srv.URL + "/openai/deployments/gpt-4o/?api-version=2024-10-21", openai.Completions, "POST /openai/deployments/gpt-4o/completions?api-version=2024-10-21"},
		{srv.URL + "/v1", openai.Chat, "POST /v1/chat/completions"},
	} {
		ep := endpoint("")
		ep.BaseURL, ep.API = c.base, c.api
		var r result.Request
		newClient(Options{}).Do(context.Background(), ep, Prompt{Text: "hello", Stream: true}, &r)
		if line != c.want || r.Outcome != result.Success {
			t.Errorf("%s (%s): request line %q, want %q; %v %s", c.base, c.api, line, c.want, r.Outcome, r.Err)
		}
	}
}

// Replicas behind no load balancer are used in turn.
func TestBaseURLsRoundRobin(t *testing.T) { bothClients(t, testBaseURLsRoundRobin) }

func testBaseURLsRoundRobin(t *testing.T, newClient func(Options) *Client) {
	var hits [2]int
	var mu sync.Mutex
	var urls []string
	for i := range 2 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			mu.Lock()
			hits[i]++
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", chunk("a"))
		}))
		defer srv.Close()
		urls = append(urls, srv.URL+"/v1")
	}
	ep := endpoint("http://unused")
	ep.BaseURLs = urls
	c := newClient(Options{})
	for range 6 {
		var r result.Request
		c.Do(context.Background(), ep, Prompt{Text: "x", Stream: true}, &r)
		if r.Outcome != result.Success {
			t.Fatal(r.Err)
		}
	}
	if hits != [2]int{3, 3} {
		t.Fatalf("hits %v, want 3 each", hits)
	}
}

// Some servers close every connection after a response while advertising
// keep-alive. The client puts the connection back in its pool and sends the
// next request on it just before the close arrives; that request must be
// retried on a new connection, not reported as an error the server did
// not make. A raw TCP server, because net/http cannot misbehave this way.
func TestServerThatClosesEveryConnection(t *testing.T) {
	bothClients(t, testServerThatClosesEveryConnection)
}

func testServerThatClosesEveryConnection(t *testing.T, newClient func(Options) *Client) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	body := fmt.Sprintf("data: %s\n\ndata: [DONE]\n\n", chunk("a"))
	var conns atomic.Int64
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: keep-alive\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				// Close a moment later, whatever the client sent meanwhile.
				time.Sleep(time.Millisecond)
			}()
		}
	}()
	c := newClient(Options{})
	retried := 0
	for i := range 100 {
		var r result.Request
		c.Do(context.Background(), endpoint("http://"+l.Addr().String()), Prompt{Text: "x", Stream: true}, &r)
		if r.Outcome != result.Success {
			t.Fatalf("request %d: %v/%v %s", i, r.Outcome, r.Reason, r.Err)
		}
		if r.Retried {
			retried++
		}
	}
	if conns.Load() < 100 {
		t.Fatalf("%d connections for 100 requests", conns.Load())
	}
	// probe/h1 learns that the server closes after every response and
	// stops keeping its connections: a few requests are sent twice (and
	// say so), not one in three. Go's transport keeps its own pool.
	if c.netHTTP {
		return
	}
	if retried == 0 || retried > 3 {
		t.Fatalf("%d of 100 requests sent twice: want the first few only, each marked", retried)
	}
}

func TestDNSAndTLSFailuresAreConnect(t *testing.T) { bothClients(t, testDNSAndTLSFailuresAreConnect) }

func testDNSAndTLSFailuresAreConnect(t *testing.T, newClient func(Options) *Client) {
	c := newClient(Options{ConnectTimeout: 2 * time.Second})
	var r result.Request
	c.Do(context.Background(), endpoint("http://no-such-host.invalid"), Prompt{Text: "x", Stream: true}, &r)
	if r.Outcome != result.Error || r.Reason != result.ReasonConnect {
		t.Errorf("DNS failure: %v/%v %s", r.Outcome, r.Reason, r.Err)
	}
	// A TLS server whose certificate the client does not trust.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	r = result.Request{}
	c.Do(context.Background(), endpoint(srv.URL), Prompt{Text: "x", Stream: true}, &r)
	if r.Outcome != result.Error || r.Reason != result.ReasonConnect {
		t.Errorf("untrusted certificate: %v/%v %s", r.Outcome, r.Reason, r.Err)
	}
}

// bothClients runs a test with the client sending through probe/h1 and
// through net/http (http_client: net/http): both must measure alike.
func bothClients(t *testing.T, test func(*testing.T, func(Options) *Client)) {
	for _, netHTTP := range []bool{false, true} {
		name := "h1"
		if netHTTP {
			name = "net-http"
		}
		t.Run(name, func(t *testing.T) {
			test(t, func(o Options) *Client { o.NetHTTP = netHTTP; return New(o) })
		})
	}
}

// Requests go through probe/h1 unless net/http is asked for; the two tell
// themselves apart by their User-Agent.
func TestWhichHTTPClientSends(t *testing.T) {
	agents := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		agents <- req.UserAgent()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", chunk("a"))
	}))
	defer srv.Close()
	for netHTTP, want := range map[bool]string{false: "tokenprobe", true: "Go-http-client/1.1"} {
		var r result.Request
		New(Options{NetHTTP: netHTTP}).Do(context.Background(), endpoint(srv.URL), Prompt{Text: "x", Stream: true}, &r)
		if got := <-agents; got != want || r.Outcome != result.Success {
			t.Errorf("NetHTTP %v: sent by %q (%s %s), want %q", netHTTP, got, r.Outcome, r.Err, want)
		}
	}
}

// Every request carries its record's id as X-Request-Id, through both
// HTTP clients, in place of one the endpoint's headers set: a fixed id
// on every request would make a server that keys on it refuse them.
func TestRequestIDHeader(t *testing.T) { bothClients(t, testRequestIDHeader) }

func testRequestIDHeader(t *testing.T, newClient func(Options) *Client) {
	ids := make(chan []string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ids <- req.Header.Values("X-Request-Id")
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", chunk("a"))
	}))
	defer srv.Close()
	c := newClient(Options{})
	ep := endpoint(srv.URL)
	ep.Headers = http.Header{"X-Request-Id": {"fixed"}}
	for _, id := range []uint64{41, 1000000042} {
		r := result.Request{ID: id}
		c.Do(context.Background(), ep, Prompt{Text: "x", Stream: true}, &r)
		got := <-ids
		want := result.RequestIDPrefix() + strconv.FormatUint(id, 10)
		if len(got) != 1 || got[0] != want || r.XRequestID() != want || !strings.HasPrefix(want, "tp-") {
			t.Errorf("request %d sent X-Request-Id %q, its record says %q; want %q once", id, got, r.XRequestID(), want)
		}
	}
}
