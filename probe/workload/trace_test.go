package workload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const mooncake = "../../../shared/datasets/mooncake_conversation_trace.jsonl"

func TestReadTheSharedTrace(t *testing.T) {
	if _, err := os.Stat(mooncake); err != nil {
		t.Skip("shared datasets not beside the checkout")
	}
	rows, err := ReadMooncake(mooncake)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 12031 || rows[0].InputTokens != 6758 || rows[0].OutputTokens != 500 || len(rows[0].HashIDs) != 14 {
		t.Fatalf("%d rows, first %+v", len(rows), rows[0])
	}
	kept, offsets := Window(rows, 0, 60*time.Second, 10)
	if len(kept) != 162 || offsets[len(offsets)-1] > 6*time.Second {
		t.Fatalf("first minute: %d rows, last offset %v at 10x", len(kept), offsets[len(offsets)-1])
	}
}

// Two rows with the same first k hash_ids get prompts whose first k x 512
// tokens match, and differ after.
func TestSharedPrefixesAreIdentical(t *testing.T) {
	a := TraceRow{InputTokens: 3*BlockTokens + 100, HashIDs: []int{0, 7, 9, 11}}
	b := TraceRow{InputTokens: 2*BlockTokens + 30, HashIDs: []int{0, 7, 12}}
	pa, pb := strings.Fields(TracePrompt(a, 0)), strings.Fields(TracePrompt(b, 0))
	if len(pa) != a.InputTokens || len(pb) != b.InputTokens {
		t.Fatalf("prompt lengths %d and %d, want %d and %d", len(pa), len(pb), a.InputTokens, b.InputTokens)
	}
	k := 2 * BlockTokens
	if strings.Join(pa[:k], " ") != strings.Join(pb[:k], " ") {
		t.Fatal("the first two shared blocks differ")
	}
	if strings.Join(pa[k:k+30], " ") == strings.Join(pb[k:k+30], " ") {
		t.Fatal("the third blocks (hash 9 and 12) are equal")
	}
	// A block cut short is a prefix of the same block whole.
	short := TraceRow{InputTokens: BlockTokens + 5, HashIDs: []int{0, 7}}
	ps := TracePrompt(short, 0)
	if !strings.HasPrefix(TracePrompt(a, 0), ps) {
		t.Fatal("a cut block is not a prefix of the whole one")
	}
	// The salt changes every block.
	if TracePrompt(a, 1)[:200] == TracePrompt(a, 0)[:200] {
		t.Fatal("salt did not change the text")
	}
}

func TestBadTraces(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct{ body, want string }{
		"typo":       {`{"timestamp": 0, "input_len": 5, "output_length": 1}`, ":1: json: unknown field \"input_len\""},
		"missing":    {"\n" + `{"timestamp": 0, "output_length": 1}`, ":2: timestamp, input_length and output_length are required"},
		"hashes":     {`{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1, 2]}`, ":1: 2 hash_ids of 512 tokens do not fit input_length 10"},
		"backwards":  {`{"timestamp": 5, "input_length": 1, "output_length": 1}` + "\n" + `{"timestamp": 4, "input_length": 1, "output_length": 1}`, ":2: timestamps go backwards"},
		"empty file": {"", ": no requests"},
	} {
		p := filepath.Join(dir, name+".jsonl")
		if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadMooncake(p); err == nil || !strings.HasPrefix(err.Error(), p+c.want) {
			t.Errorf("%s: got %v, want prefix %s%s", name, err, p, c.want)
		}
	}
}

func FuzzReadMooncake(f *testing.F) {
	f.Add([]byte(`{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [0, 1]}`))
	f.Add([]byte("{\"timestamp\": 1.5, \"input_length\": 1, \"output_length\": 1}\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "t.jsonl")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		rows, err := ReadMooncake(p)
		if err != nil {
			return
		}
		for _, r := range rows {
			if r.InputTokens > 1<<16 {
				continue // prompts that large are valid, but slow to build here
			}
			if n := len(strings.Fields(TracePrompt(r, 0))); n != r.InputTokens {
				t.Fatalf("prompt of %d words for input_length %d", n, r.InputTokens)
			}
		}
	})
}

// The replay's block cache changes nothing a server sees: prompts are the
// ones TracePrompt builds, on the first pass through the trace and on
// the second, from the cache.
func TestReplayCacheGivesTheSamePrompts(t *testing.T) {
	rows := []TraceRow{
		{Timestamp: 0, InputTokens: 1200, OutputTokens: 4, HashIDs: []int{1, 2, 3}},
		{Timestamp: 5, InputTokens: 700, OutputTokens: 4, HashIDs: []int{1, 9}},
		{Timestamp: 9, InputTokens: 30, OutputTokens: 4},
	}
	r := NewReplay(rows, true, 7)
	for pass := range 2 {
		for _, row := range rows {
			if got, want := strings.Join(r.Next().Parts, " "), TracePrompt(row, 7); got != want {
				t.Fatalf("pass %d, row at %d: the cached prompt differs from TracePrompt", pass, row.Timestamp)
			}
		}
	}
	if len(r.blocks) != 2 { // 1 and 2 are whole blocks; 3 and 9 are cut short
		t.Errorf("%d blocks cached, want 2", len(r.blocks))
	}
}
