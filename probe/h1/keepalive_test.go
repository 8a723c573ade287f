package h1

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/realserver"
)

// send sends req, reads its body to the end and says whether it went on a
// kept connection and whether it was sent twice.
func send(t *testing.T, c *Client, req *Request) (reused, retried bool) {
	t.Helper()
	resp, err := c.Do(t.Context(), req)
	if err != nil {
		t.Error(err)
		return false, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d", resp.StatusCode)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Error(err)
	}
	return resp.Phases.Reused, resp.Retried
}

// sendAtOnce sends n requests at once and counts those that went on a
// kept connection and those sent twice.
func sendAtOnce(t *testing.T, c *Client, n int, req func() *Request) (reused, retried int) {
	t.Helper()
	var r, rt atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			a, b := send(t, c, req())
			if a {
				r.Add(1)
			}
			if b {
				rt.Add(1)
			}
		})
	}
	wg.Wait()
	return int(r.Load()), int(rt.Load())
}

// waitKeptClosed waits until the server has closed every connection kept
// for tg, as a peek at each socket sees it, at most within: the wait is
// bounded by what it observes, not by the server's timeout.
func waitKeptClosed(t *testing.T, tg *Target, within time.Duration) int {
	t.Helper()
	end := time.Now().Add(within)
	for {
		tg.h.mu.Lock()
		n, open := len(tg.h.idle), 0
		for _, cn := range tg.h.idle {
			if cn.alive() {
				open++
			}
		}
		tg.h.mu.Unlock()
		if open == 0 {
			return n
		}
		if time.Now().After(end) {
			t.Fatalf("%d of %d kept connections still open %s on", open, n, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A server that closes connections idle past a timeout (uvicorn's 5 s,
// which vLLM and SGLang run on) keeps them until then: a daemon's next run,
// coming after the timeout, finds its kept connections closed. It must
// open new ones and keep those, not take the server for one that closes
// every connection after its response and stop keeping any for minutes.
func TestAServerIdleTimeoutIsNotClosingEveryConnection(t *testing.T) {
	const streams = 4
	arrived := make(chan struct{}, streams)
	var release atomic.Pointer[chan struct{}]
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		arrived <- struct{}{}
		<-*release.Load() // every request of a batch on a connection of its own
		_, _ = io.WriteString(w, "ok")
	}))
	// Past closedSoon, as every server that keeps connections closes them.
	ts.Config.IdleTimeout = closedSoon * 3 / 2
	ts.Start()
	t.Cleanup(ts.Close)
	c := New(Options{})
	t.Cleanup(c.CloseIdle)
	tg := target(t, c, ts.URL)
	batch := func() (reused, retried int) {
		rel := make(chan struct{})
		release.Store(&rel)
		done := make(chan [2]int)
		go func() {
			r, rt := sendAtOnce(t, c, streams, func() *Request { return &Request{Target: tg} })
			done <- [2]int{r, rt}
		}()
		for range streams {
			<-arrived
		}
		close(rel)
		res := <-done
		return res[0], res[1]
	}
	batch()
	if n := waitKeptClosed(t, tg, 30*time.Second); n != streams {
		t.Fatalf("%d connections kept, want %d", n, streams)
	}
	// The premise: each was kept past closedSoon when found closed. A
	// client stalled on a busy machine may have put one back well after
	// the server's idle timer started; wait out what is left, at most
	// closedSoon.
	tg.h.mu.Lock()
	newest := tg.h.idle[len(tg.h.idle)-1].idleSince
	tg.h.mu.Unlock()
	time.Sleep(closedSoon - time.Since(newest))
	if reused, _ := batch(); reused != 0 {
		t.Fatalf("%d requests on connections the server had closed", reused)
	}
	if reused, retried := batch(); reused != streams || retried != 0 {
		t.Fatalf("the batch after: %d of %d requests on a kept connection, %d sent twice; want all kept, none twice: "+
			"the server's idle timeout was taken for a server that closes every connection", reused, streams, retried)
	}
}

// llama.cpp's server (de3ff81) keeps an answer's connection for 5 s
// (Keep-Alive: timeout=5, max=100) unless the answer was streamed: then it
// closes it 0.1 ms after the last chunk, still advertising keep-alive.
func TestLlamaServerKeepAlive(t *testing.T) {
	s := realserver.LlamaServer(t)
	request := func(c *Client, stream bool, tokens int) func() *Request {
		tg := target(t, c, s.URL+"/v1/chat/completions")
		body := []byte(`{"model":"` + s.Model + `","messages":[{"role":"user","content":"hi"}],"max_tokens":` +
			strconv.Itoa(tokens) + `,"stream":` + strconv.FormatBool(stream) + `}`)
		return func() *Request { return &Request{Target: tg, ContentType: "application/json", Body: body} }
	}

	t.Run("streamed, closed after each answer", func(t *testing.T) {
		c := New(Options{})
		t.Cleanup(c.CloseIdle)
		req := request(c, true, 2)
		var retried int
		for i := range 12 {
			reused, twice := send(t, c, req())
			if twice {
				retried++
			}
			// By then the client has seen closesAfterEach connections
			// closed and keeps none: no request goes on a kept one.
			if i >= 6 && (reused || twice) {
				t.Fatalf("request %d: on a kept connection %v, sent twice %v, after the server closed every one", i+1, reused, twice)
			}
		}
		if retried > closesAfterEach {
			t.Errorf("%d of 12 requests sent twice, want at most the first %d", retried, closesAfterEach)
		}
	})

	t.Run("not streamed, closed when idle 5 s", func(t *testing.T) {
		c := New(Options{})
		t.Cleanup(c.CloseIdle)
		req := request(c, false, 16)
		tg := req().Target
		// Six at once, on six connections as they overlap: more than
		// closesAfterEach to find closed, and no more than the HTTP
		// threads the server starts at -np 4 (n_parallel + 2 in its
		// server.cpp, + 4 in later trees), so that none waits for a
		// thread another connection's keep-alive holds.
		sendAtOnce(t, c, 6, req)
		kept := waitKeptClosed(t, tg, 60*time.Second)
		if kept <= closesAfterEach {
			t.Fatalf("%d connections kept from 6 requests at once, want over %d", kept, closesAfterEach)
		}
		sendAtOnce(t, c, 6, req)
		if reused, retried := sendAtOnce(t, c, 6, req); reused == 0 || retried != 0 {
			t.Fatalf("right after the idle timeout's closes: %d of 6 requests on a kept connection, %d sent twice; "+
				"want kept ones, none twice", reused, retried)
		}
	})
}
