package h1

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingServer is an httptest server that counts the connections it
// accepted, to see whether the client reused them.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	return ts, &conns
}

func target(t *testing.T, c *Client, url string) *Target {
	t.Helper()
	tg, err := c.Target(url)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// roundTrip sends req and returns the status and the whole body.
func roundTrip(ctx context.Context, c *Client, req *Request) (int, string, error) {
	resp, err := c.Do(ctx, req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// readViews reads b to its end through View, no more than most bytes a view,
// as the SSE reader does.
func readViews(b *Body, most int) ([]byte, error) {
	var out []byte
	for {
		v, err := b.View(most)
		if len(v) > most {
			return out, fmt.Errorf("a view of %d bytes, over its most %d", len(v), most)
		}
		out = append(out, v...)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

func TestBodiesAndReuse(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		want string
	}{
		{"chunked stream", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 5 {
				fmt.Fprintf(w, "data: %d\n\n", i)
				w.(http.Flusher).Flush()
			}
		}, "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n"},
		{"content length", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "5")
			_, _ = io.WriteString(w, "hello")
		}, "hello"},
		{"empty", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }, ""},
		{"long chunks", func(w http.ResponseWriter, _ *http.Request) {
			for range 3 {
				_, _ = io.WriteString(w, strings.Repeat("x", 10000))
				w.(http.Flusher).Flush()
			}
		}, strings.Repeat("x", 30000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, conns := countingServer(t, tc.h)
			c := New(Options{})
			defer c.CloseIdle()
			tg := target(t, c, ts.URL+"/v1/chat")
			for i := range 3 {
				_, body, err := roundTrip(t.Context(), c, &Request{Target: tg})
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if body != tc.want {
					t.Fatalf("request %d: body %q, want %q", i, body, tc.want)
				}
			}
			// Read in views, whole or a few bytes at a time, the bodies
			// are the same and the connection is still reused.
			for _, most := range []int{64 << 10, 7} {
				resp, err := c.Do(t.Context(), &Request{Target: tg})
				if err != nil {
					t.Fatal(err)
				}
				body, err := readViews(resp.Body, most)
				resp.Body.Close()
				if err != nil || string(body) != tc.want {
					t.Fatalf("views of %d bytes: body %q, %v; want %q", most, body, err, tc.want)
				}
			}
			if n := conns.Load(); n != 1 {
				t.Errorf("five requests opened %d connections, want 1 reused", n)
			}
		})
	}
}

func TestRequestShape(t *testing.T) {
	type seen struct {
		method, uri, host, ua, ctype, accept, auth, custom string
		length                                             int64
		body                                               string
	}
	got := make(chan seen, 2)
	ts := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, r.Host, r.UserAgent(), r.Header.Get("Content-Type"), r.Header.Get("Accept"),
			r.Header.Get("Authorization"), r.Header.Get("X-Custom"), r.ContentLength, string(b)}
	}))
	defer ts.Close()
	c := New(Options{})
	defer c.CloseIdle()

	tg := target(t, c, ts.URL+"/v1/chat/completions?api-version=1")
	body := []byte(`{"model":"m"}`)
	if _, _, err := roundTrip(t.Context(), c, &Request{Target: tg, Header: map[string][]string{"X-Custom": {"a"}},
		ContentType: "application/json", Accept: "text/event-stream", BearerToken: "k3y", Body: body}); err != nil {
		t.Fatal(err)
	}
	want := seen{"POST", "/v1/chat/completions?api-version=1", strings.TrimPrefix(ts.URL, "http://"), "tokenprobe",
		"application/json", "text/event-stream", "Bearer k3y", "a", int64(len(body)), string(body)}
	if s := <-got; s != want {
		t.Errorf("server saw\n%+v\nwant\n%+v", s, want)
	}

	// User and password in the URL are basic auth; a Host header replaces
	// the URL's host; a User-Agent header replaces ours.
	tg = target(t, c, strings.Replace(ts.URL, "http://", "http://u:p@", 1)+"/x")
	if _, _, err := roundTrip(t.Context(), c, &Request{Target: tg, Method: "GET",
		Header: map[string][]string{"Host": {"model.example"}, "User-Agent": {"probe/1"}}}); err != nil {
		t.Fatal(err)
	}
	s := <-got
	if s.method != "GET" || s.host != "model.example" || s.ua != "probe/1" || s.auth != "Basic dTpw" || s.length != 0 {
		t.Errorf("server saw %+v", s)
	}
}

func TestLongBodyWrittenWhole(t *testing.T) {
	n := make(chan int, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		n <- len(b)
	}))
	defer ts.Close()
	c := New(Options{})
	body := bytes.Repeat([]byte("y"), 3*inlineBody+7)
	if _, _, err := roundTrip(t.Context(), c, &Request{Target: target(t, c, ts.URL), Body: body}); err != nil {
		t.Fatal(err)
	}
	if got := <-n; got != len(body) {
		t.Errorf("server read %d bytes, want %d", got, len(body))
	}
}

func TestRejectsHeaderInjection(t *testing.T) {
	c := New(Options{})
	tg := target(t, c, "http://127.0.0.1:1/")
	for _, h := range []map[string][]string{{"X-A": {"v\r\nX-B: w"}}, {"X A": {"v"}}, {"": {"v"}}} {
		if _, err := c.Do(t.Context(), &Request{Target: tg, Header: h}); err == nil || !strings.Contains(err.Error(), "invalid header") {
			t.Errorf("header %q: error %v, want invalid header", h, err)
		}
	}
}

// rawServer answers each accepted connection with serve, for responses
// net/http would not write.
func rawServer(t testing.TB, serve func(n int, c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close() // ends serve functions waiting for a next request
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { defer c.Close(); serve(n, c, bufio.NewReader(c)) })
		}
	})
	return "http://" + ln.Addr().String()
}

// readRequest consumes one request (head and Content-Length body).
func readRequest(br *bufio.Reader) error {
	req, err := http.ReadRequest(br)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, req.Body)
	return err
}

func TestRawResponses(t *testing.T) {
	for _, tc := range []struct {
		name, resp, want, err string
		status                int
	}{
		{name: "close delimited", resp: "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close", status: 200, want: "until close"},
		{name: "interim 100 skipped", resp: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", status: 200, want: "ok"},
		{name: "bare LF and odd case", resp: "HTTP/1.1 429 Too Many\ncontent-length: 1\nretry-after: 7\ntransfer-encoding: CHUNKED\n\n1;ext=1\nz\n0\ntrailer: x\n\n", status: 429, want: "z"},
		{name: "long header skipped", resp: "HTTP/1.1 200 OK\r\nX-Long: " + strings.Repeat("a", 9000) + "\r\nContent-Length: 1\r\n\r\n!", status: 200, want: "!"},
		{name: "truncated chunk", resp: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nshort", status: 200, want: "short", err: "unexpected EOF"},
		{name: "truncated length", resp: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", status: 200, want: "short", err: "unexpected EOF"},
		{name: "chunk data without its line ending", resp: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY1\r\nz\r\n0\r\n\r\n", status: 200, want: "ab", err: "missing line ending after chunk data"},
		{name: "cut at a chunk's edge", resp: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n", status: 200, want: "ab", err: "unexpected EOF"},
		{name: "cut before a chunk's line ending", resp: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab", status: 200, want: "ab", err: "unexpected EOF"},
		{name: "bad chunk size", resp: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", status: 200, err: "malformed chunk size"},
		{name: "bad status line", resp: "HTTP/2 200\r\n\r\n", err: "malformed HTTP status line"},
		{name: "gzip coding refused", resp: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", err: "unsupported Transfer-Encoding"},
		{name: "conflicting lengths", resp: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", err: "bad Content-Length"},
		{name: "head cut short", resp: "HTTP/1.1 200 OK\r\nContent-", err: "unexpected EOF"},
	} {
		// Read through Read, and through View as the SSE reader does.
		for _, read := range []struct {
			name string
			all  func(*Body) ([]byte, error)
		}{
			{"read", func(b *Body) ([]byte, error) { return io.ReadAll(b) }},
			{"views", func(b *Body) ([]byte, error) { return readViews(b, 3) }},
		} {
			t.Run(tc.name+"/"+read.name, func(t *testing.T) {
				url := rawServer(t, func(_ int, c net.Conn, br *bufio.Reader) {
					if readRequest(br) == nil {
						_, _ = io.WriteString(c, tc.resp)
					}
				})
				c := New(Options{})
				resp, err := c.Do(t.Context(), &Request{Target: target(t, c, url)})
				var body []byte
				if err == nil {
					if resp.StatusCode != tc.status {
						t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
					}
					if tc.status == 429 && string(resp.RetryAfter) != "7" {
						t.Errorf("Retry-After %q, want 7", resp.RetryAfter)
					}
					body, err = read.all(resp.Body)
					resp.Body.Close()
				}
				if string(body) != tc.want {
					t.Errorf("body %q, want %q", body, tc.want)
				}
				switch {
				case tc.err == "" && err != nil:
					t.Errorf("error %v", err)
				case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
					t.Errorf("error %v, want %q", err, tc.err)
				}
			})
		}
	}
}

func TestHeadTooLarge(t *testing.T) {
	url := rawServer(t, func(_ int, c net.Conn, br *bufio.Reader) {
		if readRequest(br) == nil {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n")
			line := "X-A: " + strings.Repeat("a", 1000) + "\r\n"
			for range 1100 {
				if _, err := io.WriteString(c, line); err != nil {
					return
				}
			}
		}
	})
	c := New(Options{})
	if _, err := c.Do(t.Context(), &Request{Target: target(t, c, url)}); !errors.Is(err, ErrHeaderTooLarge) {
		t.Errorf("error %v, want %v", err, ErrHeaderTooLarge)
	}
}

// A server that closes a kept-alive connection as the next request is
// written is not the request's fault: it is sent again on a new one. A
// server that closed it while idle is noticed before the request is sent.
func TestServerClosingKeptAliveConnections(t *testing.T) {
	ok := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	for _, tc := range []struct {
		name  string
		serve func(c net.Conn, br *bufio.Reader)
	}{
		{"closed when the next request arrives", func(c net.Conn, br *bufio.Reader) {
			if readRequest(br) == nil {
				_, _ = io.WriteString(c, ok)
			}
			_ = readRequest(br)
		}},
		{"closed while idle", func(c net.Conn, br *bufio.Reader) {
			if readRequest(br) == nil {
				_, _ = io.WriteString(c, ok)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var accepted atomic.Int64
			url := rawServer(t, func(_ int, c net.Conn, br *bufio.Reader) { accepted.Add(1); tc.serve(c, br) })
			c := New(Options{})
			tg := target(t, c, url)
			for i := range 4 {
				if _, body, err := roundTrip(t.Context(), c, &Request{Target: tg}); err != nil || body != "ok" {
					t.Fatalf("request %d: %q, %v", i, body, err)
				}
				time.Sleep(20 * time.Millisecond) // let the server's close arrive
			}
			if n := accepted.Load(); n != 4 {
				t.Errorf("%d connections for 4 requests, want 4", n)
			}
		})
	}
}

// A response that never comes must not be retried: the server may be
// working on the request.
func TestNoRetryAfterResponseBegan(t *testing.T) {
	var accepted atomic.Int64
	url := rawServer(t, func(_ int, c net.Conn, br *bufio.Reader) {
		accepted.Add(1)
		if readRequest(br) == nil {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
		if readRequest(br) == nil {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		}
	})
	c := New(Options{})
	tg := target(t, c, url)
	if _, _, err := roundTrip(t.Context(), c, &Request{Target: tg}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := roundTrip(t.Context(), c, &Request{Target: tg}); err == nil {
		t.Fatal("a response cut short after its status line succeeded")
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("%d connections, want 1 (no retry)", n)
	}
}

// heldStream answers a GET at once and any other request with one event,
// then holds the stream until release(r) is closed (a nil channel: until
// the client goes), then sends rest.
func heldStream(release func(*http.Request) <-chan struct{}, rest string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			return
		}
		_, _ = io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release(r):
			_, _ = io.WriteString(w, rest)
		case <-r.Context().Done():
		}
	}
}

// openStream sends a request under ctx and reads heldStream's first event.
func openStream(ctx context.Context, t *testing.T, c *Client, tg *Target) *Response {
	t.Helper()
	resp, err := c.Do(ctx, &Request{Target: tg})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := resp.Body.Read(buf); err != nil || string(buf[:n]) != "data: first\n\n" {
		t.Fatalf("first read %q, %v", buf[:n], err)
	}
	return resp
}

func TestCancelAbortsAStream(t *testing.T) {
	release := make(chan struct{})
	ts, conns := countingServer(t, heldStream(func(*http.Request) <-chan struct{} { return release }, ""))
	defer close(release)
	c := New(Options{})
	tg := target(t, c, ts.URL)
	ctx, cancel := context.WithCancel(t.Context())
	resp := openStream(ctx, t, c, tg)
	buf := make([]byte, 64)
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := resp.Body.Read(buf)
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("read after cancel: %v after %v", err, time.Since(start))
	}
	resp.Body.Close()
	// The aborted connection is not reused.
	if _, _, err := roundTrip(t.Context(), c, &Request{Target: tg, Method: "GET"}); err != nil {
		t.Fatal(err)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (the cancelled one closed)", n)
	}
	if _, err := c.Do(ctx, &Request{Target: tg}); !errors.Is(err, context.Canceled) {
		t.Errorf("Do with a cancelled context: %v", err)
	}
}

// TestCancelAbortsEveryStreamOfItsContext holds the watch that requests
// under one context share to its word: cancelling the context aborts each
// of its streams and no other context's, a request that ended before the
// cancel keeps its connection, and no watch outlives its connections.
func TestCancelAbortsEveryStreamOfItsContext(t *testing.T) {
	releaseB := make(chan struct{})
	ts, conns := countingServer(t, heldStream(func(r *http.Request) <-chan struct{} {
		if r.URL.Path == "/b" {
			return releaseB
		}
		return nil
	}, "data: second\n\n"))
	c := New(Options{})
	tgA, tgB := target(t, c, ts.URL+"/a"), target(t, c, ts.URL+"/b")
	ctxA, cancelA := context.WithCancel(t.Context())
	defer cancelA()
	var a, b []*Response
	for range 5 {
		a = append(a, openStream(ctxA, t, c, tgA))
	}
	for range 2 {
		b = append(b, openStream(t.Context(), t, c, tgB))
	}
	// A request under ctxA that ends before the cancel.
	if _, _, err := roundTrip(ctxA, c, &Request{Target: tgA, Method: "GET"}); err != nil {
		t.Fatal(err)
	}
	watching := func() (contexts, onA int) {
		c.wmu.Lock()
		defer c.wmu.Unlock()
		if w := c.watches[ctxA.Done()]; w != nil {
			onA = len(w.conns)
		}
		return len(c.watches), onA
	}
	if n, onA := watching(); n != 2 || onA != 5 {
		t.Fatalf("%d contexts watched, %d connections on ctxA's: want 2 and 5", n, onA)
	}
	cancelA()
	buf := make([]byte, 64)
	for i, resp := range a {
		start := time.Now()
		if _, err := resp.Body.Read(buf); err == nil || time.Since(start) > 5*time.Second {
			t.Errorf("stream %d under the cancelled context: %v after %v", i, err, time.Since(start))
		}
		resp.Body.Close()
	}
	close(releaseB)
	for i, resp := range b {
		got, err := io.ReadAll(resp.Body)
		if err != nil || string(got) != "data: second\n\n" {
			t.Errorf("stream %d under another context: %q, %v", i, got, err)
		}
		resp.Body.Close()
	}
	if n, _ := watching(); n != 0 {
		t.Errorf("%d contexts still watched after every request ended", n)
	}
	// The connection of the request that ended before the cancel serves
	// the next one: 5 + 2 + 1 opened, the aborted five closed.
	if _, _, err := roundTrip(t.Context(), c, &Request{Target: tgA, Method: "GET"}); err != nil {
		t.Fatal(err)
	}
	if n := conns.Load(); n != 8 {
		t.Errorf("%d connections, want 8 (the GET's kept)", n)
	}
}

// tagCtx is a context whose type cannot be a map key.
type tagCtx struct {
	context.Context
	tags []string
}

// wrapCtx is a context whose type can be a map key, though a value that
// holds a tagCtx cannot: the lookup panics ("hash of unhashable type").
type wrapCtx struct{ context.Context }

// TestCancelOfAContextThatIsNoMapKey aborts streams under contexts that
// cannot key a map: the client's watches are keyed by Done's channel.
func TestCancelOfAContextThatIsNoMapKey(t *testing.T) {
	ts, _ := countingServer(t, heldStream(func(*http.Request) <-chan struct{} { return nil }, ""))
	for _, tc := range []struct {
		name string
		wrap func(context.Context) context.Context
	}{
		{"a type that is no map key", func(p context.Context) context.Context { return tagCtx{Context: p, tags: []string{"a"}} }},
		{"a value that is no map key", func(p context.Context) context.Context { return wrapCtx{tagCtx{Context: p, tags: []string{"a"}}} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Options{})
			tg := target(t, c, ts.URL)
			parent, cancel := context.WithCancel(t.Context())
			defer cancel()
			ctx := tc.wrap(parent)
			var streams []*Response
			for range 2 {
				streams = append(streams, openStream(ctx, t, c, tg))
			}
			cancel()
			buf := make([]byte, 64)
			for i, resp := range streams {
				start := time.Now()
				var err error
				for err == nil && time.Since(start) < 5*time.Second {
					_, err = resp.Body.Read(buf)
				}
				if err == nil {
					t.Errorf("stream %d read on after its context was cancelled", i)
				}
				resp.Body.Close()
			}
			c.wmu.Lock()
			defer c.wmu.Unlock()
			if n := len(c.watches); n != 0 {
				t.Errorf("%d contexts watched", n)
			}
		})
	}
}

// TestCancelRacesRequestsEnding cancels a context while requests under it
// start and end on many goroutines (run with -race): each ends, aborted or
// not, and no watch is left.
func TestCancelRacesRequestsEnding(t *testing.T) {
	ts, _ := countingServer(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
	c := New(Options{})
	tg := target(t, c, ts.URL)
	for round := range 20 {
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for ctx.Err() == nil {
					_, _, _ = roundTrip(ctx, c, &Request{Target: tg, Method: "GET"})
				}
			})
		}
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		cancel()
		wg.Wait()
		c.wmu.Lock()
		n := len(c.watches)
		c.wmu.Unlock()
		if n != 0 {
			t.Fatalf("round %d: %d contexts still watched", round, n)
		}
	}
	if code, body, err := roundTrip(t.Context(), c, &Request{Target: tg, Method: "GET"}); err != nil || code != 200 || body != "ok" {
		t.Errorf("after the rounds: %d %q %v", code, body, err)
	}
}

// TestDeadlineEndsARequest holds Request.Deadline to its word: a head
// that never comes and a body that stalls end at the deadline, with a
// timeout; a connection that served a request with a deadline serves the
// next one, which has none, past that deadline.
func TestDeadlineEndsARequest(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	ts, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/head":
		case "/body":
			_, _ = io.WriteString(w, "data: first\n\n")
			w.(http.Flusher).Flush()
		default:
			_, _ = io.WriteString(w, "ok")
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	c := New(Options{})
	const wait = 100 * time.Millisecond
	// Each stalled request gets the time a busy machine may take, and
	// must not be ended by the server: it stalls until the test ends.
	timeout := func(name string, err error, start time.Time) {
		t.Helper()
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: %v, want os.ErrDeadlineExceeded", name, err)
		}
		if took := time.Since(start); took < wait {
			t.Errorf("%s: ended after %v, before its deadline", name, took)
		}
	}
	start := time.Now()
	_, err := c.Do(t.Context(), &Request{Target: target(t, c, ts.URL+"/head"), Deadline: start.Add(wait)})
	timeout("a head that never comes", err, start)

	start = time.Now()
	resp, err := c.Do(t.Context(), &Request{Target: target(t, c, ts.URL+"/body"), Deadline: start.Add(wait)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	timeout("a body that stalls", err, start)
	resp.Body.Close()

	before := conns.Load()
	tg := target(t, c, ts.URL+"/ok")
	if _, body, err := roundTrip(t.Context(), c, &Request{Target: tg, Method: "GET", Deadline: time.Now().Add(wait)}); err != nil || body != "ok" {
		t.Fatalf("a request within its deadline: %q, %v", body, err)
	}
	time.Sleep(2 * wait)
	if _, body, err := roundTrip(t.Context(), c, &Request{Target: tg, Method: "GET"}); err != nil || body != "ok" {
		t.Fatalf("the next request, without a deadline, past the last one's: %q, %v", body, err)
	}
	if n := conns.Load() - before; n != 1 {
		t.Errorf("%d connections for the two requests, want 1", n)
	}
}

func TestDialErrors(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	c := New(Options{})
	_, err := c.Do(t.Context(), &Request{Target: target(t, c, "http://"+addr)})
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		t.Errorf("refused connection: %v, want a dial error", err)
	}
	for _, bad := range []string{"ftp://x/", "http:///nohost", "://"} {
		if _, err := c.Target(bad); err == nil {
			t.Errorf("target %q accepted", bad)
		}
	}
}

func TestTLS(t *testing.T) {
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "proto %s", r.Proto)
	}))
	defer ts.Close()
	roots := ts.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs

	c := New(Options{TLS: &tls.Config{RootCAs: roots}})
	tg := target(t, c, ts.URL)
	for range 2 {
		if _, body, err := roundTrip(t.Context(), c, &Request{Target: tg}); err != nil || body != "proto HTTP/1.1" {
			t.Fatalf("%q, %v", body, err)
		}
	}
	// Without the test CA the handshake fails with a certificate error.
	c = New(Options{})
	_, err := c.Do(t.Context(), &Request{Target: target(t, c, ts.URL)})
	var certErr *tls.CertificateVerificationError
	if !errors.As(err, &certErr) {
		t.Errorf("unknown CA: %v, want a certificate verification error", err)
	}
}

func TestIdleConnectionsExpire(t *testing.T) {
	ts, conns := countingServer(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	c := New(Options{IdleTimeout: 30 * time.Millisecond})
	tg := target(t, c, ts.URL)
	for range 2 {
		if _, _, err := roundTrip(t.Context(), c, &Request{Target: tg}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(60 * time.Millisecond)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (the idle one expired)", n)
	}
	c.CloseIdle()
}

// TestIdleConnectionsCloseWithoutTraffic: connections kept for reuse are
// closed past the idle timeout even when no request comes to find them,
// as between a daemon's runs.
func TestIdleConnectionsCloseWithoutTraffic(t *testing.T) {
	const streams = 3
	var closed atomic.Int64
	arrived := make(chan struct{}, streams)
	release := make(chan struct{})
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		arrived <- struct{}{}
		<-release // every request on a connection of its own
		_, _ = io.WriteString(w, "ok")
	}))
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	c := New(Options{IdleTimeout: 50 * time.Millisecond})
	tg := target(t, c, ts.URL)
	var wg sync.WaitGroup
	for range streams {
		wg.Go(func() {
			if _, _, err := roundTrip(t.Context(), c, &Request{Target: tg}); err != nil {
				t.Error(err)
			}
		})
	}
	for range streams {
		<-arrived
	}
	close(release)
	wg.Wait()
	// No request follows: only the reaper closes them. The wait is
	// bounded by what the server sees, at most 10 s on a busy machine.
	end := time.Now().Add(10 * time.Second)
	for closed.Load() < streams && time.Now().Before(end) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := closed.Load(); n != streams {
		t.Fatalf("the server saw %d of %d idle connections closed, 10 s past a 50 ms idle timeout", n, streams)
	}
	tg.h.mu.Lock()
	defer tg.h.mu.Unlock()
	if len(tg.h.idle) != 0 || tg.h.reaperArmed {
		t.Errorf("%d connections kept, reaper armed %v: want none, disarmed", len(tg.h.idle), tg.h.reaperArmed)
	}
}

func TestReapClosesOnlyTheStale(t *testing.T) {
	c := New(Options{IdleTimeout: time.Minute})
	h := &host{c: c}
	now := time.Now()
	var peers []net.Conn
	for _, age := range []time.Duration{3 * time.Minute, 2 * time.Minute, time.Second} {
		ours, theirs := net.Pipe()
		t.Cleanup(func() { ours.Close(); theirs.Close() })
		cn := newConn(h, ours, ours)
		cn.idleSince = now.Add(-age)
		h.idle = append(h.idle, cn)
		peers = append(peers, theirs)
	}
	h.reaper = time.AfterFunc(time.Hour, func() {})
	h.reaperArmed = true
	h.reap()
	for i, p := range peers {
		_ = p.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_, err := p.Read(make([]byte, 1))
		if stale := i < 2; stale != errors.Is(err, io.EOF) {
			t.Errorf("connection %d: read %v, want EOF %v (closed only when idle past the timeout)", i, err, stale)
		}
	}
	if len(h.idle) != 1 || !h.reaperArmed {
		t.Fatalf("%d kept, armed %v: want the fresh one kept and the reaper armed for it", len(h.idle), h.reaperArmed)
	}
	h.idle[0].idleSince = now.Add(-time.Hour)
	h.reap()
	if len(h.idle) != 0 || h.reaperArmed {
		t.Errorf("%d kept, armed %v: want none, disarmed", len(h.idle), h.reaperArmed)
	}
	h.reaper.Stop()
}

// cannedServer answers every request on a connection with the same bytes,
// allocating nothing itself, so that AllocsPerRun sees the client alone.
func cannedServer(t testing.TB, resp string) string {
	return rawServer(t, func(_ int, c net.Conn, _ *bufio.Reader) {
		buf := make([]byte, 4096)
		out := []byte(resp)
		for {
			// Requests here are small and arrive in one read.
			if _, err := c.Read(buf); err != nil {
				return
			}
			if _, err := c.Write(out); err != nil {
				return
			}
		}
	})
}

func TestAllocationsPerRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("counts allocations over many requests")
	}
	stream := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"d\r\ndata: first\n\n\r\ne\r\ndata: second\n\n\r\n0\r\n\r\n"
	c := New(Options{})
	tg := target(t, c, cannedServer(t, stream))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// With a traceparent, as every probe request carries one.
	req := &Request{Target: tg, ContentType: "application/json", Accept: "text/event-stream", BearerToken: "k", Body: []byte(`{"a":1}`),
		TraceID: [16]byte{1, 15: 2}, SpanID: [8]byte{3, 7: 4}, Sampled: true}
	buf := make([]byte, 1024)
	one := func(ctx context.Context) {
		resp, err := c.Do(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := resp.Body.Read(buf); err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
				break
			}
		}
		resp.Body.Close()
	}
	one(ctx) // opens the connection
	if n := testing.AllocsPerRun(200, func() { one(context.Background()) }); n != 0 {
		t.Errorf("%v allocations per request on a kept-alive connection, want none", n)
	}
	// A deadline is the connection's: none for it either.
	if n := testing.AllocsPerRun(200, func() {
		req.Deadline = time.Now().Add(time.Minute)
		one(context.Background())
	}); n != 0 {
		t.Errorf("%v allocations per request with a deadline, want none", n)
	}
	req.Deadline = time.Time{}
	// The cancellation of a request on a cancellable context is
	// context.AfterFunc's, which allocates twice.
	if n := testing.AllocsPerRun(200, func() { one(ctx) }); n > 2 {
		t.Errorf("%v allocations per request with a cancellable context, want at most 2", n)
	}
}

// BenchmarkRequest is one streamed request on a kept-alive connection:
// the request written, the head parsed, a two-event chunked body read and
// the connection given back. The canned server's side is included.
func BenchmarkRequest(b *testing.B) {
	stream := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"d\r\ndata: first\n\n\r\ne\r\ndata: second\n\n\r\n0\r\n\r\n"
	c := New(Options{})
	defer c.CloseIdle()
	tg, err := c.Target(cannedServer(b, stream) + "/v1/chat/completions")
	if err != nil {
		b.Fatal(err)
	}
	req := &Request{Target: tg, ContentType: "application/json", Accept: "text/event-stream", Body: []byte(`{"model":"m","stream":true}`)}
	buf := make([]byte, 1024)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Do(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := resp.Body.Read(buf); err != nil {
				if !errors.Is(err, io.EOF) {
					b.Fatal(err)
				}
				break
			}
		}
		resp.Body.Close()
	}
}
