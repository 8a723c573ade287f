package ratelimit

import (
	"bufio"
	"bytes"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// headers reads a testdata file: "# " lines, then a response head.
func headers(t *testing.T, name string) (http.Header, map[string]string) {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{}
	for bytes.HasPrefix(data, []byte("# ")) {
		line, rest, _ := bytes.Cut(data, []byte("\n"))
		k, v, _ := strings.Cut(string(line[2:]), ": ")
		meta[k], data = v, rest
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(data)), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.Header, meta
}

func read(h http.Header) *Reading {
	var r Reading
	for name, vs := range h {
		for _, v := range vs {
			r.Header([]byte(name), []byte(v))
		}
	}
	return &r
}

// TestDocumentedHeaders reads each provider's documented headers, with
// their names in the case they are documented in and in net/http's
// canonical case.
func TestDocumentedHeaders(t *testing.T) {
	type want struct {
		k       Kind
		f       Field
		v       float64
		present bool
	}
	for _, c := range []struct {
		file  string
		wants []want
		retry time.Duration
	}{
		{"openai.http", []want{
			{Requests, Limit, 60, true}, {Requests, Remaining, 59, true}, {Requests, Reset, 1, true},
			{Tokens, Limit, 150000, true}, {Tokens, Remaining, 149984, true}, {Tokens, Reset, 360, true},
			{InputTokens, Limit, 0, false},
		}, 0},
		{"anthropic.http", []want{
			{Requests, Limit, 50, true}, {Requests, Remaining, 49, true}, {Requests, Reset, 1, true},
			{Tokens, Limit, 120000, true}, {Tokens, Remaining, 118000, true}, {Tokens, Reset, 30, true},
			{InputTokens, Limit, 100000, true}, {InputTokens, Remaining, 99000, true}, {InputTokens, Reset, 30, true},
			{OutputTokens, Limit, 20000, true}, {OutputTokens, Remaining, 19000, true}, {OutputTokens, Reset, 6, true},
		}, 0},
		{"azure.http", []want{
			{Requests, Remaining, 9, true}, {Tokens, Remaining, 89000, true}, {Requests, Limit, 0, false},
		}, 6500 * time.Millisecond},
	} {
		h, meta := headers(t, c.file)
		now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
		if d := meta["date"]; d != "" {
			now, _ = time.Parse(time.RFC3339, d)
		}
		r := read(h)
		if !r.Any() {
			t.Errorf("%s: read nothing", c.file)
		}
		for _, w := range c.wants {
			v, ok := r.Get(w.k, w.f, now)
			if ok != w.present || v != w.v {
				t.Errorf("%s: %s field %d = %v (sent %v), want %v (sent %v)", c.file, w.k, w.f, v, ok, w.v, w.present)
			}
		}
		if r.RetryAfter != c.retry {
			t.Errorf("%s: retry-after-ms %v, want %v", c.file, r.RetryAfter, c.retry)
		}
	}
}

// TestNonsenseIsNothing: values that do not parse, negative, huge or
// long, and names that only look alike, are left out.
func TestNonsenseIsNothing(t *testing.T) {
	var r Reading
	for _, h := range [][2]string{
		{"x-ratelimit-remaining-tokens", "-5"},
		{"x-ratelimit-remaining-requests", "NaN"},
		{"x-ratelimit-limit-tokens", "1e999"},
		{"x-ratelimit-limit-requests", strings.Repeat("9", 40)},
		{"x-ratelimit-reset-tokens", strings.Repeat("1s", 1000)},
		{"x-ratelimit-remaining-input-tokens", "5"}, // OpenAI has no such kind
		{"x-ratelimit-used-tokens", "5"},
		{"anthropic-ratelimit-tokens-used", "5"},
		{"anthropic-ratelimit-bananas-limit", "5"},
		{"anthropic-ratelimit-", "5"},
		{"retry-after-ms", "-1"},
		{"retry-after-ms", "1e300"},
		{"x-request-id", "5"},
	} {
		r.Header([]byte(h[0]), []byte(h[1]))
	}
	if r.Any() {
		t.Errorf("nonsense read as %+v", r)
	}
}

func BenchmarkHeaders(b *testing.B) {
	h := [][2][]byte{}
	for _, kv := range [][2]string{
		{"x-ratelimit-limit-requests", "60"}, {"x-ratelimit-limit-tokens", "150000"},
		{"x-ratelimit-remaining-requests", "59"}, {"x-ratelimit-remaining-tokens", "149984"},
		{"x-ratelimit-reset-requests", "1s"}, {"x-ratelimit-reset-tokens", "6m0s"},
		{"content-type", "text/event-stream"}, {"x-request-id", "req_123"},
	} {
		h = append(h, [2][]byte{[]byte(kv[0]), []byte(kv[1])})
	}
	b.ReportAllocs()
	for b.Loop() {
		var r Reading
		for _, kv := range h {
			r.Header(kv[0], kv[1])
		}
	}
}
