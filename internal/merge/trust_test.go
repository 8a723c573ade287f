package merge

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// shardPair runs the study as shards 0 and 1 of 2 and returns their run
// folders (one profile each).
func shardPair(t *testing.T) (string, string) {
	t.Helper()
	cfg := config(t)
	var out [2]string
	for i := range 2 {
		runs, err := Load(run(t, cfg, i, 2))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = runs[0].Dir
	}
	return out[0], out[1]
}

func loadAll(t *testing.T, dirs ...string) ([]*Run, error) {
	t.Helper()
	var runs []*Run
	for _, d := range dirs {
		rs, err := Load(d)
		if err != nil {
			return nil, err
		}
		runs = append(runs, rs...)
	}
	return runs, Check(runs)
}

// merge trusts nothing a shard's folder says: a cut records.jsonl, a link
// for a folder, the same shard twice, shards of different definitions
// are refused by name, and a name from a summary never leaves --out.
func TestMergeTrustsNoShard(t *testing.T) {
	a, b := shardPair(t)
	if _, err := loadAll(t, a, b); err != nil {
		t.Fatalf("two good shards: %v", err)
	}

	t.Run("the same shard twice", func(t *testing.T) {
		_, err := loadAll(t, a, a)
		if err == nil || !strings.Contains(err.Error(), "given twice") {
			t.Fatalf("%v; want the folder given twice refused", err)
		}
		copyOfA := filepath.Join(t.TempDir(), "copy")
		copyDir(t, a, copyOfA)
		if _, err := loadAll(t, a, copyOfA); err == nil || !strings.Contains(err.Error(), "both shard 0 of 2") {
			t.Fatalf("%v; want a copy of shard 0 refused as the same shard", err)
		}
	})

	t.Run("a cut records.jsonl", func(t *testing.T) {
		for name, cut := range map[string]func([]byte) []byte{
			"mid-line":        func(b []byte) []byte { return b[:len(b)-10] },
			"at a line's end": func(b []byte) []byte { return b[:strings.LastIndexByte(string(b[:len(b)-1]), '\n')+1] },
		} {
			d := filepath.Join(t.TempDir(), "cut")
			copyDir(t, b, d)
			p := filepath.Join(d, "records.jsonl")
			data, _ := os.ReadFile(p)
			if err := os.WriteFile(p, cut(data), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := loadAll(t, a, d)
			if err == nil || !strings.Contains(err.Error(), p) {
				t.Errorf("%s: %v; want an error naming %s", name, err, p)
			}
		}
	})

	t.Run("a link for a run's folder", func(t *testing.T) {
		inv := t.TempDir()
		if err := os.Symlink(b, filepath.Join(inv, "study-sim")); err != nil {
			t.Fatal(err)
		}
		if _, err := loadAll(t, a, inv); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Fatalf("%v; want the link refused", err)
		}
	})

	t.Run("different definitions", func(t *testing.T) {
		d := filepath.Join(t.TempDir(), "other")
		copyDir(t, b, d)
		editSummary(t, d, func(s *stats.Summary) { s.Objective = 0.5 })
		if _, err := loadAll(t, a, d); err == nil || !strings.Contains(err.Error(), "different definitions") {
			t.Fatalf("%v; want shards of different objectives refused", err)
		}
	})

	t.Run("a profile named ../../../ESCAPED", func(t *testing.T) {
		d := filepath.Join(t.TempDir(), "escape")
		copyDir(t, b, d)
		editSummary(t, d, func(s *stats.Summary) { s.Profile = "../../../ESCAPED" })
		runs, err := loadAll(t, d)
		if err != nil {
			t.Fatal(err)
		}
		root := t.TempDir()
		out := filepath.Join(root, "a", "b", "out")
		if err := Write(out, Merge(runs), time.Now()); err != nil {
			t.Fatal(err)
		}
		var outside []string
		_ = filepath.Walk(root, func(p string, info os.FileInfo, _ error) error {
			if !info.IsDir() && !strings.HasPrefix(p, out+string(filepath.Separator)) {
				outside = append(outside, p)
			}
			return nil
		})
		if len(outside) > 0 {
			t.Fatalf("merge wrote outside --out: %v", outside)
		}
	})
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
}

func editSummary(t *testing.T, dir string, edit func(*stats.Summary)) {
	t.Helper()
	p := filepath.Join(dir, "summary.json")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var s stats.Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	edit(&s)
	data, _ = json.Marshal(s)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
