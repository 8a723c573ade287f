package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/runonce"
)

// A study in two shards from the command line: the second takes its index
// from JOB_COMPLETION_INDEX and waits for --start-at; merge joins them,
// and warns that they did not start at once.
func TestShardsAndMergeFromTheCommandLine(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tokenprobe.yaml")
	writeFile(t, cfg, `
endpoints:
  - name: sim
    simulator: {slots: 4, decode_base: 1ms}
profiles:
  - name: study
    load: {concurrency: 4, requests: 20}
    workload: {output_tokens: {mean: 4}}
`)
	if code := run([]string{"run", "-c", cfg, "--shard.count", "2", "--progress-interval", "0"}); code != runonce.ExitConfig {
		t.Errorf("--shard.count without an index: exit %d, want 2", code)
	}
	shard := func(name string, args ...string) string {
		art := filepath.Join(dir, name)
		if code := run(append([]string{"run", "-c", cfg, "--shard.count", "2", "--progress-interval", "0", "--artifacts-dir", art}, args...)); code != runonce.ExitOK {
			t.Fatalf("shard %s: exit %d", name, code)
		}
		m, _ := filepath.Glob(filepath.Join(art, "*"))
		return m[0]
	}
	a := shard("a", "--shard.index", "0")
	t.Setenv("JOB_COMPLETION_INDEX", "1")
	startAt := time.Now().Add(3 * time.Second)
	b := shard("b", "--start-at", startAt.Format(time.RFC3339Nano))
	if time.Now().Before(startAt) {
		t.Error("the second shard did not wait for --start-at")
	}
	out := filepath.Join(dir, "merged")
	code, stdout := stdoutOf(t, "merge", a, b, "--out", out)
	if code != 0 || !strings.Contains(stdout, "study on sim: 2 shards, 20 requests") || !strings.Contains(stdout, "warning: the shards' first requests were") {
		t.Fatalf("merge: exit %d\n%s", code, stdout)
	}
	if _, err := os.Stat(filepath.Join(out, "study-sim", "records.jsonl")); err != nil {
		t.Error(err)
	}
	// A shard cut short fails the merge, naming its file; --partial
	// merges the other and says what it left out.
	records := filepath.Join(b, "study-sim", "records.jsonl")
	data, err := os.ReadFile(records)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(records, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _ := stdoutOf(t, "merge", a, b, "--out", filepath.Join(dir, "cut")); code != runonce.ExitConfig {
		t.Errorf("a cut shard: exit %d, want %d", code, runonce.ExitConfig)
	}
	code, stdout = stdoutOf(t, "merge", a, b, "--out", filepath.Join(dir, "partial"), "--partial")
	if code != 0 || !strings.Contains(stdout, "study on sim: 1 shards, 10 requests") || !strings.Contains(stdout, "left out 1 of 2 shards (--partial): "+b) {
		t.Fatalf("merge --partial: exit %d\n%s", code, stdout)
	}
}
