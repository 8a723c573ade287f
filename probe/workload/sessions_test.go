package workload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Both of AIPerf's multi_turn shapes: a whole session on one line, and one
// turn per line grouped by session_id in file order.
func TestMultiTurnDataset(t *testing.T) {
	p := writeFile(t, "sessions.jsonl", `{"session_id": "a", "turns": [{"text": "Hi"}, {"texts": ["And", "then?"], "delay": 1500, "output_length": 7}]}
{"session_id": "b", "text": "first"}
{"session_id": "c", "text": "other"}
{"session_id": "b", "text": "second", "delay": 250.5}
`)
	sessions, err := ReadMultiTurn(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != 3 {
		t.Fatalf("%d sessions, want 3: %+v", len(sessions), sessions)
	}
	a, b := sessions[0], sessions[1]
	if a.ID != "a" || len(a.Turns) != 2 || a.Turns[1].Text != "And\nthen?" || a.Turns[1].Delay != 1500*time.Millisecond || a.Turns[1].OutputTokens != 7 {
		t.Errorf("session a: %+v", a)
	}
	if b.ID != "b" || len(b.Turns) != 2 || b.Turns[1].Text != "second" || b.Turns[1].Delay != 250500*time.Microsecond {
		t.Errorf("session b: %+v", b)
	}
	src := NewSessions(sessions, false, Lengths{Mean: 20}, true, 1)
	first := src.NextSession()
	if first.ID != "a" || first.Turns[0].OutputTokens != 20 || first.Turns[1].OutputTokens != 7 {
		t.Errorf("first session: %+v: want a, with the default answer length where none is set", first)
	}
	if sessions[0].Turns[0].OutputTokens != 0 {
		t.Error("drawing answer lengths must not change the file's sessions")
	}
	if src.NextSession().ID != "b" || src.NextSession().ID != "c" || src.NextSession().ID != "a" {
		t.Error("sequential sampling must go round the file in order")
	}
}

func TestBadMultiTurn(t *testing.T) {
	for name, c := range map[string]struct{ body, want string }{
		"no id":     {`{"text": "x"}`, ":1: session_id is required"},
		"unknown":   {`{"session_id": "a", "prompt": "x"}`, `:1: json: unknown field "prompt"`},
		"mixed":     {`{"session_id": "a", "text": "x", "turns": [{"text": "y"}]}`, ":1: give turns, or one turn's fields, not both"},
		"empty":     {`{"session_id": "a", "turns": []}`, ":1: turns is empty"},
		"bad turn":  {"\n" + `{"session_id": "a", "turns": [{"text": "ok"}, {"text": " "}]}`, ":2: turns[1]: the turn's text is empty"},
		"delay":     {`{"session_id": "a", "text": "x", "delay": -1}`, ":1: delay must not be negative"},
		"no output": {`{"session_id": "a", "text": "x", "output_length": 0}`, ":1: output_length must be at least 1"},
		"nothing":   {"", ": no sessions"},
	} {
		p := writeFile(t, "s.jsonl", c.body)
		if _, err := ReadMultiTurn(p); err == nil || !strings.HasPrefix(err.Error(), p+c.want) {
			t.Errorf("%s: got %v, want %s%s", name, err, p, c.want)
		}
	}
}

func FuzzReadMultiTurn(f *testing.F) {
	f.Add([]byte(`{"session_id": "a", "turns": [{"text": "hello", "delay": 10}]}`))
	f.Add([]byte(`{"session_id": "a", "text": "x"}` + "\n" + `{"session_id": "a", "texts": ["y"], "output_length": 2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "s.jsonl")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		sessions, err := ReadMultiTurn(p)
		if err != nil {
			return
		}
		src := NewSessions(sessions, true, Lengths{Mean: 4}, true, 1)
		for range 3 {
			s := src.NextSession()
			if s.ID == "" || len(s.Turns) == 0 {
				t.Fatalf("bad session %+v", s)
			}
			for _, turn := range s.Turns {
				if strings.TrimSpace(turn.Text) == "" || turn.OutputTokens < 1 || turn.Delay < 0 {
					t.Fatalf("bad turn %+v", turn)
				}
			}
		}
	})
}
