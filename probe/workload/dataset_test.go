package workload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSingleTurnDataset(t *testing.T) {
	p := filepath.Join(t.TempDir(), "prompts.jsonl")
	body := `{"text": "What is the capital of France?", "output_length": 12}

{"texts": ["Summarise this:", "The quick brown fox."]}
`
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	entries, err := ReadSingleTurn(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[1].Text != "Summarise this:\nThe quick brown fox." || entries[0].OutputTokens != 12 {
		t.Fatalf("%+v", entries)
	}
	seq := NewDataset(entries, false, Lengths{Mean: 50}, true, 1)
	a, b, c := seq.Next(), seq.Next(), seq.Next()
	if a.Text != entries[0].Text || a.MaxTokens != 12 || a.InputTokens != 6 || b.MaxTokens != 50 || c.Text != a.Text {
		t.Fatalf("sequential: %+v %+v %+v", a, b, c)
	}
	rnd := NewDataset(entries, true, Lengths{Mean: 50}, true, 1)
	seen := map[string]int{}
	for range 200 {
		seen[rnd.Next().Text]++
	}
	if len(seen) != 2 || seen[entries[0].Text] < 70 || seen[entries[1].Text] < 70 {
		t.Fatalf("random sampling: %v", seen)
	}
}

func TestBadDatasets(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct{ body, want string }{
		"unknown": {`{"prompt": "x"}`, `:1: json: unknown field "prompt"`},
		"both":    {`{"text": "a", "texts": ["b"]}`, ":1: give text or texts, not both"},
		"empty":   {"\n" + `{"text": "  "}`, ":2: the prompt is empty"},
		"output":  {`{"text": "a", "output_length": 0}`, ":1: output_length must be at least 1"},
		"expect":  {`{"text": "a", "expect": "(paris"}`, ":1: expect: not an RE2 expression: error parsing regexp: missing closing ): `(paris`"},
		// An expectation runs on every answer,
		// as a check does, and has the same bound.
		"costly":  {"\n" + `{"text": "a", "expect": "(?i)paris"}` + "\n" + `{"text": "b", "expect": "a.{0,1000}b"}`, ":3: expect: compiles to 2004 instructions, over the 200 allowed"},
		"nothing": {"", ": no prompts"},
	} {
		p := filepath.Join(dir, name+".jsonl")
		if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSingleTurn(p); err == nil || !strings.HasPrefix(err.Error(), p+c.want) {
			t.Errorf("%s: got %v, want %s%s", name, err, p, c.want)
		}
	}
}

func FuzzReadSingleTurn(f *testing.F) {
	f.Add([]byte(`{"text": "hello", "output_length": 3}`))
	f.Add([]byte(`{"texts": ["a", "b"]}` + "\n" + `{"text": "c"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "d.jsonl")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		entries, err := ReadSingleTurn(p)
		if err != nil {
			return
		}
		d := NewDataset(entries, true, Lengths{Mean: 4}, true, 1)
		for range 3 {
			if pr := d.Next(); strings.TrimSpace(pr.Text) == "" || pr.MaxTokens < 1 {
				t.Fatalf("bad prompt %+v", pr)
			}
		}
	})
}
