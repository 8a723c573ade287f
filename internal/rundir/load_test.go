package rundir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What users pass: an --artifacts-dir holding one invocation is taken,
// one holding several takes the newest (a second in the same second
// included) and says so, and one holding none lists what it holds.
func TestFindTakesWhatUsersPass(t *testing.T) {
	dir := t.TempDir()
	run := func(parts ...string) {
		p := filepath.Join(append([]string{dir}, parts...)...)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		_ = os.WriteFile(filepath.Join(p, "records.jsonl"), nil, 0o644)
		_ = os.WriteFile(filepath.Join(p, "summary.json"), []byte(`{"profile":"p","endpoint":"e"}`), 0o644)
	}
	run("one", "20261125-065334", "p-e")
	got, note, err := Find(filepath.Join(dir, "one"))
	if err != nil || got != filepath.Join(dir, "one", "20261125-065334") || note != "" {
		t.Fatalf("one run: %q %q %v", got, note, err)
	}
	run("several", "20261125-065334", "p-e")
	run("several", "20261125-065334-2", "p-e")
	run("several", "20261125-065301", "p-e")
	got, note, err = Find(filepath.Join(dir, "several"))
	if err != nil || got != filepath.Join(dir, "several", "20261125-065334-2") || !strings.Contains(note, "holds 3 runs") {
		t.Fatalf("several runs: %q %q %v", got, note, err)
	}
	if got, _, err := Find(filepath.Join(dir, "one", "20261125-065334")); err != nil || got != filepath.Join(dir, "one", "20261125-065334") {
		t.Fatalf("an invocation's folder: %q %v", got, err)
	}
	_ = os.MkdirAll(filepath.Join(dir, "empty", "notes"), 0o755)
	if _, _, err := Find(filepath.Join(dir, "empty")); err == nil || !strings.Contains(err.Error(), "it holds: notes") {
		t.Fatalf("no run: %v", err)
	}
}
