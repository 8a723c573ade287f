package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/timingtest"
	"github.com/tokenprobe/tokenprobe/probe/result"
)

var traceParent = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$`)

// Every request carries a W3C traceparent with a fresh trace id, the
// one its record keeps, through both HTTP clients; the sampled flag
// follows the client's ratio.
func TestEveryRequestCarriesATraceParent(t *testing.T) { bothClients(t, testTraceParent) }

func testTraceParent(t *testing.T, newClient func(Options) *Client) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Traceparent"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\ndata: %s\n\ndata: [DONE]\n\n", chunk("a"), finish)
	}))
	defer srv.Close()
	for _, ratio := range []float64{0, 1} {
		c := newClient(Options{TraceSample: ratio})
		ids := map[string]bool{}
		for i := range 5 {
			var r result.Request
			c.Do(context.Background(), endpoint(srv.URL), Prompt{Text: "x", Stream: true}, &r)
			mu.Lock()
			tp := seen[len(seen)-1]
			mu.Unlock()
			m := traceParent.FindStringSubmatch(tp)
			switch {
			case m == nil:
				t.Fatalf("request %d: traceparent %q", i, tp)
			case m[1] != r.Trace.TraceIDString() || m[2] != r.Trace.SpanIDString():
				t.Fatalf("request %d: traceparent %q, record's ids %s %s", i, tp, r.Trace.TraceIDString(), r.Trace.SpanIDString())
			case ids[m[1]]:
				t.Fatalf("request %d: trace id %s twice", i, m[1])
			case (tp[len(tp)-1] == '1') != (ratio == 1):
				t.Fatalf("ratio %v: traceparent %q", ratio, tp)
			}
			ids[m[1]] = true
		}
	}
}

// The network's phases: a head 200 ms late is 200 ms to the first byte;
// TLS takes time on HTTPS and none on plain HTTP; a kept connection
// skips the connection's phases.
func TestPhases(t *testing.T) { bothClients(t, testPhases) }

func testPhases(t *testing.T, newClient func(Options) *Client) {
	// The server's own wait, as it happened: on a busy machine a 200 ms
	// sleep returns late, and the client is right to see that.
	var waited atomic.Int64
	handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		start := time.Now()
		time.Sleep(200 * time.Millisecond)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		waited.Store(int64(time.Since(start)))
		fmt.Fprintf(w, "data: %s\n\ndata: %s\n\ndata: [DONE]\n\n", chunk("a"), finish)
	})
	plain := httptest.NewServer(handler)
	defer plain.Close()
	secure := httptest.NewTLSServer(handler)
	defer secure.Close()
	roots := x509.NewCertPool()
	roots.AddCert(secure.Certificate())
	for _, srv := range []*httptest.Server{plain, secure} {
		https := srv == secure
		c := newClient(Options{TLS: &tls.Config{RootCAs: roots}})
		timingtest.Retry(t, 3, func(a *timingtest.Attempt) {
			c.CloseIdle()
			var first, again result.Request
			c.Do(context.Background(), endpoint(srv.URL), Prompt{Text: "x", Stream: true}, &first)
			c.Do(context.Background(), endpoint(srv.URL), Prompt{Text: "x", Stream: true}, &again)
			if first.Outcome != result.Success || again.Outcome != result.Success {
				t.Fatalf("https %v: %v %s / %v %s", https, first.Outcome, first.Err, again.Outcome, again.Err)
			}
			if first.Reused || !again.Reused || again.Connect != 0 || again.TLS != 0 || first.Connect <= 0 {
				t.Fatalf("https %v: reused %v then %v; connect %v then %v, TLS then %v", https, first.Reused, again.Reused, first.Connect, again.Connect, again.TLS)
			}
			if (first.TLS > 0) != https {
				t.Fatalf("https %v: TLS %v", https, first.TLS)
			}
			if first.FirstByte < 200*time.Millisecond || first.FirstByte > first.TTFT {
				t.Fatalf("https %v: first byte %v, TTFT %v; the head waits 200 ms, the first token after it", https, first.FirstByte, first.TTFT)
			}
			// The upper bound is the one a busy machine can break.
			const tol = 5 * time.Millisecond
			within(a, "first byte on a kept connection", again.FirstByte, time.Duration(waited.Load()), tol)
		})
	}
	// A name is resolved, and the lookup counted apart; an address is not.
	_, port, _ := net.SplitHostPort(plain.Listener.Addr().String())
	var named, addressed result.Request
	c := newClient(Options{})
	c.Do(context.Background(), endpoint("http://localhost:"+port), Prompt{Text: "x", Stream: true}, &named)
	c.Do(context.Background(), endpoint(plain.URL), Prompt{Text: "x", Stream: true}, &addressed)
	if named.Outcome != result.Success || named.DNS <= 0 || addressed.DNS != 0 {
		t.Fatalf("DNS %v for localhost (%v %s), %v for %s", named.DNS, named.Outcome, named.Err, addressed.DNS, plain.URL)
	}
}
