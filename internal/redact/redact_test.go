package redact

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const key = "sk-live-0123456789abcdef"

func TestStringReplacesEveryOccurrence(t *testing.T) {
	s := New(key, "", "sk-live") // a secret inside a longer one
	got := s.String(`{"echo":{"authorization":"Bearer ` + key + `"},"again":"x` + key + `y","short":"sk-live"}`)
	if strings.Contains(got, "sk-live") {
		t.Fatalf("a secret survived: %s", got)
	}
	if strings.Count(got, Marker) != 3 {
		t.Fatalf("%d markers in %s, want 3", strings.Count(got, Marker), got)
	}
	var none *Set
	if none.String(key) != key || none.Longest() != 0 {
		t.Fatal("a nil set must redact nothing")
	}
}

// A secret that crosses the excerpt's edge leaves no prefix behind.
func TestExcerptRedactsBeforeCutting(t *testing.T) {
	s := New(key)
	for cut := 1; cut < len(key); cut++ {
		text := strings.Repeat("x", 100-cut) + key + strings.Repeat("y", 50)
		got := s.Excerpt([]byte(text), 100)
		if len(got) > 100+len(Marker) || !strings.Contains(got, Marker) {
			t.Fatalf("cut %d: excerpt of %d bytes", cut, len(got))
		}
		for n := 4; n <= len(key); n++ {
			if strings.Contains(got, key[:n]) {
				t.Fatalf("cut %d: %q of the key survived in %q", cut, key[:n], got)
			}
		}
	}
}

func TestAddOnlyGrows(t *testing.T) {
	s := New("old-key-1234")
	s.Add("new-key-5678")
	if got := s.String("old-key-1234 new-key-5678"); strings.Contains(got, "key") {
		t.Fatalf("%s", got)
	}
	if s.Longest() != len("old-key-1234") {
		t.Fatalf("longest %d", s.Longest())
	}
}

func TestHandlerRedactsMessagesAndAttributes(t *testing.T) {
	var buf bytes.Buffer
	s := New(key)
	log := slog.New(Handler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}), s))
	log = log.With("preset", "with "+key)
	log.Debug("message "+key, "err", errors.New("HTTP 401: "+key), "str", key,
		slog.Group("g", "inner", key), "n", 42, "any", []string{key})
	out := buf.String()
	if strings.Contains(out, key) || strings.Count(out, Marker) != 6 {
		t.Fatalf("%s", out)
	}
	if !strings.Contains(out, "n=42") {
		t.Fatalf("other attributes must pass: %s", out)
	}
}

// A URL shown anywhere keeps its query's names, not their values.
func TestURLHidesQueryValues(t *testing.T) {
	for raw, want := range map[string]string{
		"http://localhost:8000/v1": "http://localhost:8000/v1",
		"https://x.openai.azure.com/openai/deployments/gpt-4o?api-version=2024-10-21&subscription-key=sk-1": "https://x.openai.azure.com/openai/deployments/gpt-4o?api-version=[REDACTED]&subscription-key=[REDACTED]",
		"https://user:pw@gw.example/v1": "https://gw.example/v1",
		"https://gw.example/v1?flag":    "https://gw.example/v1?flag=[REDACTED]",
		"http://[::1]:%zz/v1?key=sk-2":  "http://[::1]:%zz/v1?[REDACTED]",
	} {
		if got := URL(raw); got != want {
			t.Errorf("URL(%q) = %q, want %q", raw, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = URL("http://localhost:8000/v1") }); n != 0 {
		t.Errorf("a URL without a query: %v allocations", n)
	}
}

// A token endpoint that issues a new token per fetch grows the set by at
// most RotatingKept per owner: it kept every token, and 60 KB tokens took
// a daemon to 508 MB in a minute. The configuration's keys stay, and the
// newest tokens are still redacted.
func TestRotatingSecretsAreBounded(t *testing.T) {
	s := New("sk-configured-key")
	token := func(i int) string { return fmt.Sprintf("tok-%06d-", i) + strings.Repeat("x", 1000) }
	for i := range 10000 {
		s.AddRotating("bedrock", token(i))
		s.AddRotating("vertex", "v"+token(i))
	}
	if n := s.Len(); n != 1+2*RotatingKept {
		t.Fatalf("%d secrets held after 20,000 tokens, want the key and %d per owner", n, RotatingKept)
	}
	for _, text := range []string{"sk-configured-key", token(9999), "v" + token(9996)} {
		if got := s.String("echo " + text); got != "echo "+Marker {
			t.Errorf("%.20s... not redacted: %.40q", text, got)
		}
	}
	if got := s.String(token(0)); got == Marker {
		t.Error("the first of 10,000 tokens is still held")
	}
}
