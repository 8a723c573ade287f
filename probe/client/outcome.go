package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/redact"
	"github.com/tokenprobe/tokenprobe/probe/apierror"
	"github.com/tokenprobe/tokenprobe/probe/result"
)

func (c *Client) fail(r *result.Request, reason result.Reason, err error) {
	r.End = time.Now()
	r.Outcome, r.Reason = result.Error, reason
	if reason == result.ReasonNone {
		r.Outcome = result.Cancelled
	}
	if err != nil {
		// net/http quotes the request's URL, query and all, as %q. It is
		// redacted where it stands: a url.Error inside another error (a
		// token endpoint's, under "not signed: ...") keeps what wraps it.
		msg := err.Error()
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			msg = strings.ReplaceAll(msg, strconv.Quote(ue.URL), strconv.Quote(redact.URL(ue.URL)))
		}
		// Errors of the transports quote what servers sent too.
		r.Err = c.secrets.String(msg)
	}
}

// maxErrorBody is how much of an error answer's body an error quotes.
const maxErrorBody = 512

// errorBodyWait bounds the read of an error answer's body: it is only
// quoted, and a server that sends less than it announced would otherwise
// hold the request, and its load slot, until the request's timeout.
const errorBodyWait = time.Second

func (c *Client) failStatus(q call, r *result.Request, resp response) {
	// Read what the reason is read from (a provider's error body, 16 KiB
	// at most), and past the excerpt by the longest secret, so that one
	// crossing its edge is seen whole and redacted. The request's
	// deadline bounds the wait too.
	var body bytes.Buffer
	wait := errorBodyWait
	if !q.deadline.IsZero() {
		wait = max(min(wait, time.Until(q.deadline)), time.Millisecond)
	}
	stalled := readBounded(&body, resp.body, int64(max(apierror.MaxBody, maxErrorBody+c.secrets.Longest())), wait)
	snippet := c.secrets.Excerpt(bytes.TrimSpace(body.Bytes()), maxErrorBody)
	if stalled {
		snippet += " (the body did not end within " + wait.Round(time.Millisecond).String() + "; connection closed)"
	}
	reason, gw := apierror.Classify(resp.status, body.Bytes())
	msg := fmt.Sprintf("HTTP %d: %s", resp.status, snippet)
	if gw != "" {
		// Its own answer, not the model server's passed on: where to look.
		msg = fmt.Sprintf("HTTP %d from %s itself: %s", resp.status, gw, snippet)
	}
	if len(resp.retryAfter) > 0 {
		msg += " (Retry-After: " + c.secrets.Excerpt(resp.retryAfter, 80) + ")"
	}
	c.fail(r, reason, errors.New(msg))
	r.RetryAfter = ParseRetryAfter(resp.retryAfter, r.End)
	if rl := resp.rateLimit; rl != nil && rl.RetryAfter > 0 {
		// retry-after-ms (Azure, OpenAI) says the same in milliseconds.
		r.RetryAfter = rl.RetryAfter
	}
}

// readBounded copies up to n bytes of body to dst, waiting wait at most,
// and reports whether the body stalled: neither ended nor gave n bytes in
// time. probe/h1's body takes a read deadline; net/http's is closed by a
// timer, which ends a read in progress and the connection with it.
func readBounded(dst io.Writer, body io.ReadCloser, n int64, wait time.Duration) (stalled bool) {
	if d, ok := body.(interface{ SetReadDeadline(time.Time) error }); ok {
		if err := d.SetReadDeadline(time.Now().Add(wait)); err == nil {
			// A connection kept for the next request must not keep the bound.
			defer func() { _ = d.SetReadDeadline(time.Time{}) }()
		}
		_, err := io.Copy(dst, io.LimitReader(body, n))
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout()
	}
	var fired atomic.Bool
	t := time.AfterFunc(wait, func() { fired.Store(true); _ = body.Close() })
	_, err := io.Copy(dst, io.LimitReader(body, n))
	t.Stop()
	return fired.Load() && err != nil
}

// ParseRetryAfter reads a Retry-After header (RFC 9110 10.2.3): a number
// of seconds, or an HTTP date taken against now. Anything else, a date in
// the past included, is 0: no wait asked.
func ParseRetryAfter(v []byte, now time.Time) time.Duration {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return 0
	}
	if n, err := strconv.ParseUint(string(v), 10, 32); err == nil {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(string(v)); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// signError is a request the endpoint's Signer could not sign: no
// credentials, a token endpoint that refused. Nothing was sent.
type signError struct{ err error }

func (e *signError) Error() string { return "not signed: " + e.err.Error() }
func (e *signError) Unwrap() error { return e.err }

// classify maps a transport error to a reason. ReasonNone means the
// workload cancelled the request.
func (c *Client) classify(q call, err error) result.Reason {
	// A request that could not be signed is auth, whether the token
	// endpoint refused or never answered within the request's time; one
	// the run itself cancelled (an interrupt) stays cancelled.
	if se := (*signError)(nil); errors.As(err, &se) && (q.ctx.Err() == nil || errors.Is(context.Cause(q.ctx), errRequestTimeout) || q.pastDeadline()) {
		return result.ReasonAuth
	}
	if q.ctx.Err() != nil {
		if errors.Is(context.Cause(q.ctx), errRequestTimeout) {
			return result.ReasonTimeout
		}
		return result.ReasonNone
	}
	if q.pastDeadline() {
		return result.ReasonTimeout
	}
	if se := (*signError)(nil); errors.As(err, &se) {
		return result.ReasonAuth
	}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var tlsErr *tls.RecordHeaderError
	var certErr *tls.CertificateVerificationError
	var urlErr *url.Error
	switch {
	case errors.As(err, &dnsErr), errors.As(err, &tlsErr), errors.As(err, &certErr),
		errors.Is(err, syscall.ECONNREFUSED):
		return result.ReasonConnect
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return result.ReasonConnect
	case errors.As(err, &urlErr) && urlErr.Timeout():
		return result.ReasonTimeout
	case strings.Contains(err.Error(), "tls:"):
		return result.ReasonConnect
	}
	return result.ReasonStream
}
