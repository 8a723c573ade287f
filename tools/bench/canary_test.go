package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A late request is set beside the harness's sleeps that overlapped its
// wait, and only those.
func TestCanaryLateDuring(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	c := &canary{late: []lateWake{{due: ms(10), woke: ms(12)}, {due: ms(50), woke: ms(70)}, {due: ms(100), woke: ms(103)}}}
	for _, tc := range []struct {
		from, to int
		want     time.Duration
	}{
		{0, 9, 0},                       // before any
		{11, 20, 2 * time.Millisecond},  // the first woke inside it
		{40, 60, 20 * time.Millisecond}, // the second was due inside it
		{0, 200, 20 * time.Millisecond}, // the worst of all three
		{71, 99, 0},                     // between them
	} {
		if got := c.lateDuring(ms(tc.from), ms(tc.to)); got != tc.want {
			t.Errorf("[%d, %d] ms: %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}

// The latest request is read from a run's records: its lag and when it
// was due (sent minus lag).
func TestLatestRequest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.jsonl")
	lines := []string{
		`{"id":1,"start":"2026-11-27T10:00:00.000Z","dispatch_lag_ms":0.5}`,
		`{"id":2,"start":"2026-11-27T10:00:01.030Z","dispatch_lag_ms":23.25}`,
		`{"id":3,"start":"2026-11-27T10:00:02.001Z","dispatch_lag_ms":1}`,
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := latestRequest(path)
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Date(2026, 11, 27, 10, 0, 1, 30e6, time.UTC)
	if l.Lag != 23250*time.Microsecond || !l.Due.Equal(sent.Add(-l.Lag)) {
		t.Errorf("latest %+v, want 23.25 ms late, due at %v", l, sent.Add(-23250*time.Microsecond))
	}
	if err := os.WriteFile(path, []byte("{\"start\": 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := latestRequest(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a broken record: %v, want an error naming the file", err)
	}
}
