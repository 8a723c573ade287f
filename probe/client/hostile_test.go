package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/hostile"
	"github.com/tokenprobe/tokenprobe/internal/redact"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/sse"
)

// newRawServer serves every request with answer (see hostile.StartFunc)
// until the test ends.
func newRawServer(t *testing.T, answer func(conn net.Conn, req *http.Request) bool) *hostile.Server {
	t.Helper()
	s, err := hostile.StartFunc(answer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func rawURL(s *hostile.Server) string { return "http://" + s.Addr() }

// A deeply nested answer, streamed or not, is a stream error for that
// request and nothing more. The test binary's stack is bounded, so that
// recursion without a bound crashes this test rather than the machine.
func TestDeeplyNestedAnswers(t *testing.T) { bothClients(t, testDeeplyNestedAnswers) }

func testDeeplyNestedAnswers(t *testing.T, newClient func(Options) *Client) {
	old := debug.SetMaxStack(16 << 20)
	defer debug.SetMaxStack(old)

	whole := []byte(`{"x":` + strings.Repeat("[", 40<<20) + `}`) // 40 MB, under the 64 MiB body limit
	line := `{"choices":[{"delta":{"content":"a"}}],"x":` + strings.Repeat("[", 1<<20-100) + "}"
	srv := newRawServer(t, func(conn net.Conn, req *http.Request) bool {
		if req.Header.Get("Accept") == "text/event-stream" {
			body := "data: " + line + "\n\n"
			fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			return true
		}
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(whole))
		_, _ = conn.Write(whole)
		return true
	})
	c := newClient(Options{})
	ep := endpoint(rawURL(srv))
	// Four 40 MB answers under -race on a busy CI machine took longer
	// than the usual 5s; the test is about how the request fails, not
	// how fast, so only a hang should end it by timeout.
	ep.Timeout = 2 * time.Minute
	for _, stream := range []bool{false, true} {
		// Several at once: each costs its line or body, not a stack per level.
		var wg sync.WaitGroup
		rs := make([]result.Request, 4)
		for i := range rs {
			wg.Go(func() {
				c.Do(context.Background(), ep, Prompt{Text: "x", Stream: stream}, &rs[i])
			})
		}
		wg.Wait()
		for _, r := range rs {
			if r.Outcome != result.Error || r.Reason != result.ReasonStream || !strings.Contains(r.Err, "nested deeper than 256") {
				t.Errorf("stream %v: %v/%v %.120s; want a stream error naming the nesting", stream, r.Outcome, r.Reason, r.Err)
			}
			if len(r.Err) > 400 {
				t.Errorf("stream %v: error text of %d bytes, want an excerpt", stream, len(r.Err))
			}
		}
	}
}

// A server that sends [DONE] and then neither ends the body nor closes the
// connection gets its requests measured in full and released within the
// drain timeout, with the anomaly counted; the connection is not reused.
func TestDrainAfterDoneIsBounded(t *testing.T) { bothClients(t, testDrainAfterDoneIsBounded) }

func testDrainAfterDoneIsBounded(t *testing.T, newClient func(Options) *Client) {
	events := fmt.Sprintf("data: %s\n\ndata: %s\n\ndata: [DONE]\n\n", chunk("a"), chunk("b"))
	cases := map[string]func(conn net.Conn){
		"chunked body never ended": func(conn net.Conn) {
			_, _ = io.WriteString(conn, hostile.SSEHead+hostile.Chunk(events))
			hostile.Hold(conn)
		},
		"content-length longer than sent": func(conn net.Conn) {
			fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(events)+100, events)
			hostile.Hold(conn)
		},
	}
	for name, answer := range cases {
		t.Run(name, func(t *testing.T) {
			srv := newRawServer(t, func(conn net.Conn, _ *http.Request) bool { answer(conn); return false })
			c := newClient(Options{})
			ep := endpoint(rawURL(srv))
			ep.Timeout = 20 * time.Second
			for i := range 3 {
				var r result.Request
				start := time.Now()
				c.Do(context.Background(), ep, Prompt{Text: "x", Stream: true}, &r)
				took := time.Since(start)
				if r.Outcome != result.Success || r.ContentChunks != 2 || r.Anomaly != result.AnomalyDrain {
					t.Fatalf("request %d: %v/%v %s, %d chunks, anomaly %q; want a success with the drain anomaly", i, r.Outcome, r.Reason, r.Err, r.ContentChunks, r.Anomaly)
				}
				// The bound is the drain timeout (100ms); the request
				// timeout is 20s. Anything near the latter is the bug.
				if took > 10*time.Second {
					t.Fatalf("request %d held for %v: the drain is not bounded", i, took)
				}
				if r.E2E <= 0 || r.E2E > took {
					t.Fatalf("request %d: E2E %v outside the request's %v", i, r.E2E, took)
				}
			}
			if n := srv.Connections(); n != 3 {
				t.Fatalf("%d connections for 3 requests: a connection left mid-body was reused", n)
			}
		})
	}
}

// A body that ends right after [DONE] is no anomaly, and its connection is
// kept: the bound costs a healthy server nothing.
func TestCleanEndIsNoAnomaly(t *testing.T) { bothClients(t, testCleanEndIsNoAnomaly) }

func testCleanEndIsNoAnomaly(t *testing.T, newClient func(Options) *Client) {
	events := fmt.Sprintf("data: %s\n\ndata: [DONE]\n\n", chunk("a"))
	srv := newRawServer(t, func(conn net.Conn, _ *http.Request) bool {
		_, _ = io.WriteString(conn, hostile.SSEHead+hostile.Chunk(events))
		time.Sleep(20 * time.Millisecond) // the end comes a little later, within the bound
		_, _ = io.WriteString(conn, "0\r\n\r\n")
		return true
	})
	c := newClient(Options{})
	for i := range 3 {
		var r result.Request
		c.Do(context.Background(), endpoint(rawURL(srv)), Prompt{Text: "x", Stream: true}, &r)
		if r.Outcome != result.Success || r.Anomaly != result.AnomalyNone {
			t.Fatalf("request %d: %v %s anomaly %q", i, r.Outcome, r.Err, r.Anomaly)
		}
	}
	if n := srv.Connections(); n != 1 {
		t.Fatalf("%d connections for 3 requests, want the first kept", n)
	}
}

// A stream longer than MaxBodyBytes is ended at the bound and says why, on
// both clients (probe/h1's body is bounded over its views, net/http's over
// its reads), keeping what it measured before, and the reader it went
// through is pooled holding no body.
func TestStreamBodyIsBounded(t *testing.T) { bothClients(t, testStreamBodyIsBounded) }

func testStreamBodyIsBounded(t *testing.T, newClient func(Options) *Client) {
	event := fmt.Sprintf("data: %s\n\n", chunk("a"))
	srv := newRawServer(t, func(conn net.Conn, _ *http.Request) bool {
		_, _ = io.WriteString(conn, hostile.SSEHead)
		for range 200 { // 200 events, far past the 1 KiB bound
			if _, err := io.WriteString(conn, hostile.Chunk(event)); err != nil {
				return false
			}
		}
		_, _ = io.WriteString(conn, hostile.Chunk("data: [DONE]\n\n")+"0\r\n\r\n")
		return false
	})
	c := newClient(Options{MaxBodyBytes: 1024})
	var r result.Request
	c.Do(context.Background(), endpoint(rawURL(srv)), Prompt{Text: "x", Stream: true}, &r)
	if r.Outcome != result.Error || !strings.Contains(r.Err, errBodyTooLarge.Error()) {
		t.Fatalf("outcome %v, error %q: want the size limit's error", r.Outcome, r.Err)
	}
	if most := 1024 / len(event); r.ContentChunks == 0 || r.ContentChunks > most {
		t.Fatalf("%d content chunks read, want 1 to %d within 1 KiB", r.ContentChunks, most)
	}
	if len(r.Gaps) != r.ContentChunks-1 || r.E2E <= 0 {
		t.Fatalf("%d gaps and E2E %v for %d chunks: what was measured before the bound is kept", len(r.Gaps), r.E2E, r.ContentChunks)
	}
	sr := c.readers.Get().(*streamReader)
	if holdsBody(&sr.sse) {
		t.Fatal("the pooled stream reader still holds the last body")
	}
}

// holdsBody says whether an SSE reader still refers to a source: a
// Viewer (probe/h1's body), or the reader under its bufio.Reader
// (net/http's body). It looks at unexported fields, as nothing exported
// says it.
func holdsBody(rd *sse.Reader) bool {
	v := reflect.ValueOf(rd).Elem()
	if !v.FieldByName("src").IsNil() {
		return true
	}
	br := v.FieldByName("br")
	return !br.IsNil() && !br.Elem().FieldByName("rd").IsNil()
}

// The client asks for no content coding and refuses one it cannot read,
// saying so, instead of reporting the stream as cut.
func TestContentEncodingIsRefused(t *testing.T) { bothClients(t, testContentEncodingIsRefused) }

func testContentEncodingIsRefused(t *testing.T, newClient func(Options) *Client) {
	asked := make(chan string, 2)
	srv := newRawServer(t, func(conn net.Conn, req *http.Request) bool {
		asked <- req.Header.Get("Accept-Encoding")
		body := "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" // a gzip header
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		return true
	})
	ep := endpoint(rawURL(srv))
	ep.Headers = http.Header{"Accept-Encoding": {"gzip"}} // the client's own value wins
	var r result.Request
	newClient(Options{}).Do(context.Background(), ep, Prompt{Text: "x", Stream: true}, &r)
	if got := <-asked; got != "identity" {
		t.Errorf("Accept-Encoding %q, want identity", got)
	}
	if r.Outcome != result.Error || r.Reason != result.ReasonStream || !strings.Contains(r.Err, `Content-Encoding "gzip"`) {
		t.Errorf("%v/%v %s; want a stream error naming the encoding", r.Outcome, r.Reason, r.Err)
	}
}

// A 101 is an error, and its connection is never reused: the next request
// goes out on a new one and succeeds.
func TestSwitchingProtocolsClosesTheConnection(t *testing.T) {
	bothClients(t, testSwitchingProtocolsClosesTheConnection)
}

func testSwitchingProtocolsClosesTheConnection(t *testing.T, newClient func(Options) *Client) {
	var n atomic.Int64
	srv := newRawServer(t, func(conn net.Conn, _ *http.Request) bool {
		if n.Add(1) == 1 {
			_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x05hello")
			hostile.Hold(conn)
			return false
		}
		events := fmt.Sprintf("data: %s\n\ndata: [DONE]\n\n", chunk("a"))
		_, _ = io.WriteString(conn, hostile.SSEHead+hostile.Chunk(events)+"0\r\n\r\n")
		return true
	})
	c := newClient(Options{})
	ep := endpoint(rawURL(srv))
	ep.Timeout = 20 * time.Second
	var r result.Request
	start := time.Now()
	c.Do(context.Background(), ep, Prompt{Text: "x", Stream: true}, &r)
	if r.Outcome != result.Error || r.Reason != result.ReasonStream || !strings.Contains(r.Err, "101") {
		t.Fatalf("101: %v/%v %s; want a stream error", r.Outcome, r.Reason, r.Err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("101 held the request for %v", took)
	}
	r = result.Request{}
	c.Do(context.Background(), ep, Prompt{Text: "x", Stream: true}, &r)
	if r.Outcome != result.Success {
		t.Fatalf("the request after a 101: %v/%v %s", r.Outcome, r.Reason, r.Err)
	}
	if got := srv.Connections(); got != 2 {
		t.Fatalf("%d connections, want 2 (the 101's closed)", got)
	}
}

// A server that echoes the API key back, in any text the client quotes,
// gets it redacted before the text is cut: no part of the key is left in
// the request's error, at an excerpt's edge included.
func TestEchoedKeyIsRedacted(t *testing.T) { bothClients(t, testEchoedKeyIsRedacted) }

func testEchoedKeyIsRedacted(t *testing.T, newClient func(Options) *Client) {
	const key = "sk-planted-0123456789abcdefghij"
	answers := map[string]func(conn net.Conn, echo string){
		"401 echoing the headers": func(conn net.Conn, echo string) {
			body := `{"error":"unauthorized","headers":{"authorization":"` + echo + `"}}`
			fmt.Fprintf(conn, "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		},
		"401 with the key across the excerpt's edge": func(conn net.Conn, _ string) {
			body := strings.Repeat("x", maxErrorBody-10) + key + strings.Repeat("y", 100)
			fmt.Fprintf(conn, "HTTP/1.1 401 Unauthorized\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		},
		"error event": func(conn net.Conn, echo string) {
			_, _ = io.WriteString(conn, hostile.SSEHead+hostile.Chunk("event: error\ndata: {\"message\":\"bad key "+echo+"\"}\n\n")+"0\r\n\r\n")
		},
		"error event with the key across the excerpt's edge": func(conn net.Conn, _ string) {
			data := `{"message":"` + strings.Repeat("x", 180) + key + `"}`
			_, _ = io.WriteString(conn, hostile.SSEHead+hostile.Chunk("event: error\ndata: "+data+"\n\n")+"0\r\n\r\n")
		},
		"error payload in a 200 stream": func(conn net.Conn, echo string) {
			_, _ = io.WriteString(conn, hostile.SSEHead+hostile.Chunk("data: {\"object\":\"error\",\"message\":\""+echo+"\"}\n\n")+"0\r\n\r\n")
		},
		"malformed chunk": func(conn net.Conn, echo string) {
			_, _ = io.WriteString(conn, hostile.SSEHead+hostile.Chunk("data: {\"choices\":[ "+echo+"\n\n")+"0\r\n\r\n")
		},
		"status line": func(conn net.Conn, _ string) {
			_, _ = io.WriteString(conn, "HTTP/1.1 200 "+strings.Repeat("x", 60)+key+"\r\nContent-Type: text/event-stream\r\nContent-Length: 0\r\n\r\n")
		},
		"content type": func(conn net.Conn, _ string) {
			_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/"+strings.Repeat("x", 60)+key+"\r\nContent-Length: 0\r\n\r\n")
		},
		"content of a good stream": func(conn net.Conn, echo string) {
			events := fmt.Sprintf("data: %s\n\ndata: [DONE]\n\n", chunk("your key is "+echo))
			_, _ = io.WriteString(conn, hostile.SSEHead+hostile.Chunk(events)+"0\r\n\r\n")
		},
	}
	for name, answer := range answers {
		t.Run(name, func(t *testing.T) {
			srv := newRawServer(t, func(conn net.Conn, req *http.Request) bool {
				answer(conn, req.Header.Get("Authorization"))
				return false
			})
			ep := endpoint(rawURL(srv))
			ep.APIKey = key
			var r result.Request
			newClient(Options{Secrets: redact.New(key)}).Do(context.Background(), ep, Prompt{Text: "x", Stream: true}, &r)
			if name != "content of a good stream" && r.Outcome != result.Error {
				t.Fatalf("%v %s: want an error", r.Outcome, r.Err)
			}
			for n := 6; n <= len(key); n++ {
				if strings.Contains(r.Err, key[:n]) {
					t.Fatalf("%d bytes of the key survive in %q", n, r.Err)
				}
			}
			if r.Outcome == result.Error && name != "status line" && !strings.Contains(r.Err, redact.Marker) {
				t.Fatalf("no marker in %q", r.Err)
			}
		})
	}
}

// FuzzWholeResponse holds the non-streamed path to its contract for any
// body: it ends in success or error (never a crash, never cancelled), a
// success carries content, and an error quotes at most an excerpt.
func FuzzWholeResponse(f *testing.F) {
	f.Add([]byte(`{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`))
	f.Add([]byte(`{"object":"error","message":"bad"}`))
	f.Add([]byte(`{"x":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`))
	f.Add([]byte(`{"choices":[{"message":{"content":"a"}}],"x":` + strings.Repeat(`{"a":`, 1000)))
	f.Add([]byte(""))
	c := New(Options{})
	f.Fuzz(func(t *testing.T, body []byte) {
		r := result.Request{Start: time.Now()}
		c.readWhole(call{ctx: context.Background()}, openai.Of(openai.Chat), bytes.NewReader(body), &r, Prompt{})
		switch r.Outcome {
		case result.Success:
			if r.ContentChunks != 1 || r.OutputTokens < 1 || r.Err != "" {
				t.Fatalf("success without content: %+v", r)
			}
		case result.Error:
			if r.Reason != result.ReasonStream && r.Reason != result.ReasonEmpty {
				t.Fatalf("reason %v for a body", r.Reason)
			}
			if len(r.Err) > 300 {
				t.Fatalf("error text of %d bytes", len(r.Err))
			}
		default:
			t.Fatalf("outcome %v", r.Outcome)
		}
	})
}

// An error answer whose body stops short (a Content-Length longer than
// what is sent, a chunked body left open) is an error within a second,
// quoting what came, not a request held until its timeout.
func TestStalledErrorBodyIsBounded(t *testing.T) { bothClients(t, testStalledErrorBodyIsBounded) }

func testStalledErrorBodyIsBounded(t *testing.T, newClient func(Options) *Client) {
	cases := map[string]func(conn net.Conn){
		"content-length longer than sent": func(conn net.Conn) {
			_, _ = io.WriteString(conn, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\noverloaded")
			hostile.Hold(conn)
		},
		"chunked body never ended": func(conn net.Conn) {
			_, _ = io.WriteString(conn, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"+hostile.Chunk("overloaded"))
			hostile.Hold(conn)
		},
	}
	for name, answer := range cases {
		t.Run(name, func(t *testing.T) {
			srv := newRawServer(t, func(conn net.Conn, _ *http.Request) bool { answer(conn); return false })
			c := newClient(Options{})
			ep := endpoint(rawURL(srv))
			ep.Timeout = 20 * time.Second
			for i := range 2 {
				var r result.Request
				start := time.Now()
				c.Do(context.Background(), ep, Prompt{Text: "x", Stream: true}, &r)
				took := time.Since(start)
				if r.Outcome != result.Error || r.Reason != result.ReasonOverloaded || !strings.Contains(r.Err, "HTTP 503: overloaded") || !strings.Contains(r.Err, "did not end") {
					t.Fatalf("request %d: %v/%v %q; want overloaded (a 503 that says so) quoting what came and saying the body did not end", i, r.Outcome, r.Reason, r.Err)
				}
				// The bound is 1s; the request timeout is 20s. Anything
				// near the latter is the bug.
				if took > 10*time.Second {
					t.Fatalf("request %d held for %v: the error body's read is not bounded", i, took)
				}
			}
			if n := srv.Connections(); n != 2 {
				t.Fatalf("%d connections for 2 requests: a connection left mid-body was reused", n)
			}
		})
	}
}

// A whole error answer keeps its connection, and the bound on its read
// does not outlive it: the next request on the connection, sent after the
// bound, is not cut short by it.
func TestWholeErrorBodyKeepsTheConnection(t *testing.T) {
	bothClients(t, testWholeErrorBodyKeepsTheConnection)
}

func testWholeErrorBodyKeepsTheConnection(t *testing.T, newClient func(Options) *Client) {
	srv := newRawServer(t, func(conn net.Conn, _ *http.Request) bool {
		_, _ = io.WriteString(conn, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\noverloaded")
		return true
	})
	c := newClient(Options{})
	for i := range 2 {
		if i > 0 {
			time.Sleep(errorBodyWait + 200*time.Millisecond)
		}
		var r result.Request
		c.Do(context.Background(), endpoint(rawURL(srv)), Prompt{Text: "x", Stream: true}, &r)
		if r.Outcome != result.Error || r.Reason != result.ReasonOverloaded || r.Err != "HTTP 503: overloaded" {
			t.Fatalf("request %d: %v/%v %q", i, r.Outcome, r.Reason, r.Err)
		}
	}
	if n := srv.Connections(); n != 1 {
		t.Fatalf("%d connections for 2 whole error answers, want 1", n)
	}
}

// A query's values reach neither a record's URL nor an error's text,
// through either client: net/http quotes the whole request URL in its
// errors.
func TestQueryValuesAreNotShown(t *testing.T) { bothClients(t, testQueryValuesAreNotShown) }

func testQueryValuesAreNotShown(t *testing.T, newClient func(Options) *Client) {
	const value = "planted-query-value-9c4e"
	addr, err := hostile.ClosedAddr()
	if err != nil {
		t.Fatal(err)
	}
	ep := endpoint("http://" + addr)
	ep.BaseURL += "?api-version=" + value
	var r result.Request
	newClient(Options{}).Do(context.Background(), ep, Prompt{Text: "x", Stream: true}, &r)
	if r.Outcome != result.Error || r.Reason != result.ReasonConnect {
		t.Fatalf("%v/%v %s, want a connect error", r.Outcome, r.Reason, r.Err)
	}
	if strings.Contains(r.Err, value) || strings.Contains(r.URL, value) || !strings.Contains(r.URL, "api-version="+redact.Marker) {
		t.Errorf("URL %q, error %q: the query's value is shown", r.URL, r.Err)
	}
}

// A connect that is never answered (a host that is down) fails as
// connect at the connect timeout, through either client, and the
// request's own timeout, when earlier, fails it as timeout.
func TestUnansweredConnect(t *testing.T) { bothClients(t, testUnansweredConnect) }

func testUnansweredConnect(t *testing.T, newClient func(Options) *Client) {
	addr, closeAll, err := hostile.UnansweredAddr()
	if errors.Is(err, hostile.ErrAnswered) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	const connect = 100 * time.Millisecond
	for _, tc := range []struct {
		name             string
		connect, request time.Duration // the connect timeout, the endpoint's request timeout
		want             result.Reason
	}{
		{"the connect timeout first", connect, time.Minute, result.ReasonConnect},
		{"the request's timeout first", time.Minute, connect, result.ReasonTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(Options{ConnectTimeout: tc.connect})
			ep := endpoint("http://" + addr)
			ep.Timeout = tc.request
			var r result.Request
			start := time.Now()
			c.Do(t.Context(), ep, Prompt{Text: "x", Stream: true}, &r)
			if r.Outcome != result.Error || r.Reason != tc.want {
				t.Errorf("%v/%v %s, want error/%v", r.Outcome, r.Reason, r.Err, tc.want)
			}
			// Not ended before its bound; without one it would wait for
			// the kernel's SYN retries, about two minutes.
			if took := time.Since(start); took < connect || took > 30*time.Second {
				t.Errorf("ended after %v", took)
			}
		})
	}
}
