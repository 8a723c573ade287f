package client

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"1":    time.Second,
		" 30 ": 30 * time.Second,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Minute).Format(http.TimeFormat):     0, // in the past
		"":                     0,
		"-1":                   0,
		"soon":                 0,
		"1.5":                  0,
		"99999999999999999999": 0,
	} {
		if got := ParseRetryAfter([]byte(in), now); got != want {
			t.Errorf("Retry-After %q: %s, want %s", in, got, want)
		}
	}
}
