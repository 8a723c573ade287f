package stats

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
)

func failed(reason result.Reason, status int, msg, url string) *result.Request {
	return &result.Request{Outcome: result.Error, Reason: reason, HTTPStatus: status, Err: msg, URL: url}
}

// Each reason keeps its count, its status codes, its most frequent message
// (cut to MaxMessage characters) and a hint at the likely mistake.
func TestFailuresSayWhatWentWrong(t *testing.T) {
	a := NewAggregator("p", "e", "m", 1, 0)
	v := slo.Verdict{Counted: true}
	for range 3 {
		a.Add(failed(result.ReasonBadRequest, 404, "HTTP 404: not found", "http://h:8000"), v)
	}
	a.Add(failed(result.ReasonBadRequest, 405, "HTTP 405: method not allowed", "http://h:8000"), v)
	long := strings.Repeat("é", 300)
	for range 2 {
		a.Add(failed(result.ReasonConnect, 0, "dial tcp: connection refused "+long, "http://h:8000"), v)
	}
	for i := range 100 { // a request id in every message: distinct texts stay bounded
		a.Add(failed(result.ReasonServerError, 500, fmt.Sprintf("HTTP 500: request %d", i), "http://h:8000/v1"), v)
	}
	s := a.Summary()
	if len(s.Failures) != 3 {
		t.Fatalf("failures %+v", s.Failures)
	}
	conn, http4, http5 := s.Failures[0], s.Failures[1], s.Failures[2]
	if http4.Reason != "bad_request" || http4.Count != 4 || http4.Statuses["404"] != 3 || http4.Statuses["405"] != 1 ||
		http4.Message != "HTTP 404: not found" || http4.MessageCount != 3 || !strings.Contains(http4.Hint, "/v1") {
		t.Errorf("4xx: %+v", http4)
	}
	if conn.Reason != "connect" || len([]rune(conn.Message)) != MaxMessage+1 || !strings.HasSuffix(conn.Message, "…") ||
		!strings.Contains(conn.Hint, "nothing listens") {
		t.Errorf("connect: %+v", conn)
	}
	if http5.Count != 100 || len(a.failures[result.ReasonServerError].messages) != maxMessages || http5.MessageCount != 1 {
		t.Errorf("5xx: %+v, %d distinct messages kept", http5, len(a.failures[result.ReasonServerError].messages))
	}
}

func TestHints(t *testing.T) {
	for _, c := range []struct {
		reason result.Reason
		status int
		msg    string
		url    string
		want   string
	}{
		{result.ReasonBadRequest, 404, "", "http://h:8000", "without /v1"},
		{result.ReasonBadRequest, 404, "", "http://h:8000/v1", "no such route or model"},
		{result.ReasonAuth, 401, "", "http://h/v1", "API key"},
		{result.ReasonAuth, 403, "", "http://h/v1", "API key"},
		{result.ReasonQuota, 429, "", "http://h/v1", "spend limit"},
		{result.ReasonRateLimit, 429, "", "http://h/v1", "rate limited"},
		{result.ReasonOverloaded, 529, "", "http://h/v1", "overloaded"},
		{result.ReasonContentFilter, 400, "", "http://h/v1", "content policy"},
		{result.ReasonContextLength, 400, "", "http://h/v1", "context"},
		{result.ReasonModelNotFound, 404, "", "http://h:8000", "model"},
		{result.ReasonConnect, 0, "dial tcp 127.0.0.1:9: connect: connection refused", "http://h/v1", "nothing listens"},
		{result.ReasonConnect, 0, "tls: first record does not look like a TLS handshake", "https://h/v1", "TLS"},
		{result.ReasonConnect, 0, "x509: certificate signed by unknown authority", "https://h/v1", "ca_file"},
		{result.ReasonTimeout, 0, "", "http://h/v1", "timeout"},
		{result.ReasonStream, 0, "bad chunk", "http://h/v1", ""},
	} {
		if got := Hint(c.reason, c.status, c.msg, c.url); (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s %d %q %s: hint %q, want one with %q", c.reason, c.status, c.msg, c.url, got, c.want)
		}
	}
}
