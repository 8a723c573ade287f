package h1

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/hostile"
)

// unansweredAddr is hostile.UnansweredAddr, closed when the test ends.
func unansweredAddr(t *testing.T) string {
	t.Helper()
	addr, closeAll, err := hostile.UnansweredAddr()
	if errors.Is(err, hostile.ErrAnswered) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeAll)
	return addr
}

// A connect that is never answered ends at the connect timeout, whether
// or not the request's context can be cancelled: the connect takes its
// bound from its context's deadline, and a context that is never done
// gives it none (net.Dialer's connect reads the deadline only then).
func TestConnectTimeoutEndsAConnectNeverAnswered(t *testing.T) {
	addr := unansweredAddr(t)
	const timeout = 100 * time.Millisecond
	c := New(Options{ConnectTimeout: timeout})
	tg := target(t, c, "http://"+addr)
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"a context that can be cancelled", t.Context()},
		{"a context that is never done", context.Background()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Without a bound the kernel gives up after about two
			// minutes of SYNs; the test's own bound says it hung.
			done := make(chan error, 1)
			start := time.Now()
			go func() {
				_, err := c.Do(tc.ctx, &Request{Target: tg})
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("the connect still waited after 30s, its timeout %v", timeout)
			}
			if took := time.Since(start); took < timeout {
				t.Errorf("ended after %v, before the connect timeout %v", took, timeout)
			}
			var op *net.OpError
			var ne net.Error
			if !errors.As(err, &op) || op.Op != "dial" || !errors.As(err, &ne) || !ne.Timeout() {
				t.Errorf("%v, want a dial timeout", err)
			}
		})
	}
	// Cancelling the request's context ends the connect at once.
	c = New(Options{ConnectTimeout: time.Hour})
	tg = target(t, c, "http://"+addr)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(timeout, cancel)
	start := time.Now()
	if _, err := c.Do(ctx, &Request{Target: tg}); !errors.Is(err, context.Canceled) || time.Since(start) > 30*time.Second {
		t.Errorf("a connect whose request was cancelled: %v after %v, want context.Canceled", err, time.Since(start))
	}
	// The request's deadline, when earlier, bounds the connect instead.
	start = time.Now()
	_, err := c.Do(t.Context(), &Request{Target: tg, Deadline: start.Add(timeout)})
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || time.Since(start) > 30*time.Second {
		t.Errorf("a request's deadline before the connect timeout: %v after %v, want a timeout", err, time.Since(start))
	}
}
