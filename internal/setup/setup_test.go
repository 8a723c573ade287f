package setup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A file a configuration names that cannot be read, or a GPU field
// tokenprobe does not export, is an error at the field that names it, with
// its line and column, as config's own errors are.
func TestFilesAndFieldsAreChecked(t *testing.T) {
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "bad.jsonl"), []byte("{not json\n"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "bad-schema.json"), []byte(`{"type": "no-such-type"}`), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "bad-tools.json"), []byte(`[{"type": "function", "function": {"name": "f", "parameters": {"type": 7}}}]`), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "costly-schema.json"), []byte(`{"type": "object", "properties": {"a": {"type": "string", "pattern": "a.{0,1000}b"}}}`), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "tools.json"), []byte(`[{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]`), 0o644)
	for name, c := range map[string]struct{ yaml, want string }{
		"tokenizer missing": {`endpoints:
  - name: sim
    simulator: {}
profiles:
  - name: p
    endpoints: [sim]
    workload:
      tokenizer: no-such-tokenizer.json
`, ":8:7: profiles[0].workload.tokenizer: DIR/no-such-tokenizer.json: no such file (give a tokenizer.json"},
		"dataset unreadable": {`endpoints:
  - {name: sim, simulator: {}}
profiles:
  - name: p
    workload:
      dataset: {file: bad.jsonl}
`, ":6:17: profiles[0].workload.dataset.file: "},
		"trace missing": {`endpoints:
  - {name: sim, simulator: {}}
profiles:
  - name: p
    workload:
      trace: {file: no-such-trace.jsonl}
`, ":6:15: profiles[0].workload.trace.file: "},
		"json schema missing": {`endpoints:
  - {name: sim, simulator: {}}
profiles:
  - name: p
    checks:
      json_schema: no-such-schema.json
`, ":6:7: profiles[0].checks.json_schema: open DIR/no-such-schema.json: no such file or directory"},
		"json schema invalid": {`endpoints:
  - {name: sim, simulator: {}}
profiles:
  - name: p
    checks: {json_schema: bad-schema.json}
`, ":5:14: profiles[0].checks.json_schema: "},
		"tools invalid": {`endpoints:
  - {name: sim, simulator: {}}
profiles:
  - name: p
    checks: {tools: bad-tools.json}
`, ":5:14: profiles[0].checks.tools: DIR/bad-tools.json: tool f: parameters: not a valid JSON Schema: "},
		"a tool twice": {`endpoints:
  - {name: sim, simulator: {}}
profiles:
  - name: p
    checks: {tools: tools.json}
`, `:5:14: profiles[0].checks.tools: DIR/tools.json: tool 1: a second function named "f"`},
		// A schema's pattern runs on every answer as a check's expression
		// does: a.{0,1000}b passed check and took 13 CPU seconds.
		"a costly pattern in a schema": {`endpoints:
  - {name: sim, simulator: {}}
profiles:
  - name: p
    checks: {json_schema: costly-schema.json}
`, `:5:14: profiles[0].checks.json_schema: the pattern "a.{0,1000}b" compiles to 2004 instructions, over the 200 allowed`},
		// Ten expressions, each within its own bound, took 13 CPU seconds
		// on one 0.9 MB answer: one budget for them all.
		"ten costly expressions": {`endpoints:
  - {name: sim, simulator: {}}
profiles:
  - name: p
    checks:
      not_matches: ['x.{0,30}y', 'x.{0,30}z', 'y.{0,30}x', 'y.{0,30}z', 'z.{0,30}x', 'z.{0,30}y', 'q.{0,30}r', 'r.{0,30}q', 'q.{0,30}s', 's.{0,30}q']
`, `:5:5: profiles[0].checks: judging one answer runs expressions of 640 instructions in all (not_matches 640), over the 400 allowed: about 3.8 s of CPU a MB of answer at worst`},
		"simulator answers invalid": {`endpoints:
  - name: sim
    simulator: {answers: bad.jsonl}
profiles:
  - name: p
`, `:3:17: endpoints[0].simulator.answers: DIR/bad.jsonl:1: invalid character 'n' looking for beginning of object key string`},
		"unknown gpu field": {`endpoints:
  - {name: sim, simulator: {}}
gpu:
  source: dcgm
  fields: [DCGM_FI_DEV_GPU_UTIL, DCGM_FI_NO_SUCH_FIELD]
profiles:
  - name: p
`, `:5:34: gpu.fields[1]: "DCGM_FI_NO_SUCH_FIELD" is not a DCGM field tokenprobe exports`},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".yaml")
			_ = os.WriteFile(file, []byte(c.yaml), 0o644)
			want := file + strings.ReplaceAll(c.want, "DIR", dir)
			for _, load := range []func() error{
				func() error { _, err := LoadFile(file); return err },
				func() error { _, _, err := CheckFile(file); return err },
			} {
				err := load()
				if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
					t.Errorf("got %v\nwant %s...", err, want)
				}
			}
		})
	}
}

// The example configurations shipped in configs/ are all valid, the files
// they name included.
func TestShippedExamples(t *testing.T) {
	files, _ := filepath.Glob("../../configs/*.yaml")
	if len(files) == 0 {
		t.Skip("no configs/ yet")
	}
	t.Setenv("OPENAI_API_KEY", "sk-example")
	t.Setenv("NIM_API_KEY", "sk-example")
	t.Setenv("ANTHROPIC_API_KEY", "sk-example")
	t.Setenv("AZURE_OPENAI_API_KEY", "sk-example")
	for _, f := range files {
		if _, err := LoadFile(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// A workload file is read once, at load, and not again by the runs that
// use it, until it changes.
func TestWorkloadFilesAreReadOnce(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "prompts.jsonl")
	_ = os.WriteFile(data, []byte(`{"text": "hello there"}`+"\n"), 0o644)
	file := filepath.Join(dir, "tokenprobe.yaml")
	_ = os.WriteFile(file, []byte("endpoints:\n  - {name: sim, simulator: {}}\nprofiles:\n  - {name: p, workload: {dataset: {file: prompts.jsonl}}}\n"), 0o644)
	before := singleTurn.reads
	cfg, err := LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := NewRun(cfg.Profiles[0], nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := singleTurn.reads - before; n != 1 {
		t.Fatalf("read %d times for a load and three runs, want once", n)
	}
	// An edited file is read again by the next run.
	later := time.Now().Add(time.Second)
	_ = os.WriteFile(data, []byte(`{"text": "hello there"}`+"\n"+`{"text": "and again"}`+"\n"), 0o644)
	_ = os.Chtimes(data, later, later)
	run, err := NewRun(cfg.Profiles[0], nil, nil)
	if err != nil || singleTurn.reads-before != 2 || run.Workload == nil {
		t.Fatalf("after an edit: %v, %d reads", err, singleTurn.reads-before)
	}
}
