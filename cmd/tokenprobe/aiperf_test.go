package main

import (
	"flag"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/tokenprobe/tokenprobe/internal/runonce"
)

var update = flag.Bool("update", false, "rewrite docs/AIPERF.md")

// aiperfDoc is docs/AIPERF.md: the table of aiperfFlags.
func aiperfDoc() string {
	var b strings.Builder
	b.WriteString(`# aiperf's flags in tokenprobe run

<!-- Written by ` + "`make docs`" + ` from cmd/tokenprobe/aiperf.go; do not edit. -->

` + "`tokenprobe run`" + ` takes ` + "`aiperf profile`" + `'s command lines: each of the flags below (from
aiperf's own source, aiperf/common/config/, with the GenAI-Perf names it keeps) is either the same
as tokenprobe's, another name for one of tokenprobe's, accepted with a meaning told here, or
refused with an error that names it and what to use instead. No aiperf flag is silently ignored.
` + "`cmd/tokenprobe TestAIPerfWriteUpsCommandLines`" + ` runs the four command lines of the write-ups
this project answers, their ` + "`--url`" + ` as the write-ups write it (` + "`http://HOST:PORT`" + `, the server's root), against
the simulator and against llama.cpp's llama-server (built by ` + "`make real-servers`" + `; its lengths cut to its tiny
model's context).

## A run from flags runs as aiperf runs

aiperf's command lines are overload studies: a request that times out behind a queue is the result,
not a reason to stop. A run from flags (no ` + "`-c`" + `) therefore keeps aiperf's run semantics, and
` + "`--print-config`" + ` shows them in the configuration it prints. A configuration's profiles, which the
daemon runs against production on a schedule, keep tokenprobe's failure policy: a failing endpoint
must be neither hammered nor called green. With ` + "`-c FILE`" + ` and flags, the file's policy stands.

| | a run from flags (aiperf's) | a configuration's profile |
|---|---|---|
| request timeout | 600 s (` + "`--request-timeout-seconds`" + `) | the endpoint's ` + "`timeout`" + `, 120 s |
| requests in flight when the duration ends | 30 s to finish, then cancelled and counted as cancelled (` + "`--benchmark-grace-period`" + `, ` + "`inf`" + ` for no limit) | finish or time out (` + "`load.grace_period`" + ` to bound them) |
| timeouts and failed requests | counted and shown in the report; no abort, and no error for their share | the run is aborted when more than half of the first 20 fail (` + "`failure.abort`" + `), and is an error when more than half failed (` + "`failure.max_error_ratio`" + `) |
| the endpoint unreachable: requests fail to connect or time out, no answer for 30 s | aborted, exit 3: nothing is being measured | the same |
| no request succeeded | an error, exit 3 | the same |
| after a failed request | the worker backs off, 100 ms doubling to 5 s (aiperf does not), so that a refused connection is not retried in a tight loop | the same |
| a server's Retry-After | obeyed, up to 30 s | the same |
| an interrupt (Ctrl-C) | no new requests; those in flight have 5 s, a second interrupt quits at once | the same |

The warmup's requests are in no figure, but the failure policy counts them: a run aborted in its
warmup says so in the report's Warmup line and in ` + "`summary.json`" + `'s ` + "`warmup`" + `.

| aiperf | tokenprobe | how | note |
|---|---|---|---|
`)
	for _, f := range aiperfFlags {
		names := make([]string, len(f.names))
		for i, n := range f.names {
			names[i] = "`" + n + "`"
		}
		b.WriteString("| " + strings.Join(names, " ") + " | " + f.use + " | " + f.how + " | " + f.note + " |\n")
	}
	return b.String()
}

func TestAIPerfDocs(t *testing.T) {
	const path = "../../docs/AIPERF.md"
	want := aiperfDoc()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		t.Fatalf("docs/AIPERF.md is not the table of cmd/tokenprobe/aiperf.go: run make docs (%v)", err)
	}
}

// Every flag the table names as tokenprobe's, or as an alias, is one
// `tokenprobe run` takes; every refused one is refused.
func TestAIPerfTableIsTheParser(t *testing.T) {
	dir := t.TempDir()
	dataset := dir + "/prompts.jsonl"
	writeFile(t, dataset, `{"text": "hello"}`+"\n")
	valid := map[string]string{"--endpoint-type": "chat", "--header": "X-A: b", "--extra-inputs": "k:v", "--input-file": dataset,
		"--goodput": "time_to_first_token:500", "--tokenizer": "builtin", "--output-artifact-dir": dir, "--artifact-dir": dir}
	for _, f := range aiperfFlags {
		for _, name := range f.names {
			if !strings.HasPrefix(name, "--") {
				continue
			}
			args := []string{"run", "--print-config"}
			switch name {
			case "--model", "--model-names":
				args = append(args, "--url", "http://x/v1", name, "m")
			case "--url":
				args = append(args, "--model", "m", name, "http://x/v1")
			case "--benchmark-grace-period": // aiperf's rule: only with a duration
				args = append(args, "--url", "http://x/v1", "--model", "m", "--benchmark-duration", "10", name, "1")
			default:
				args = append(args, "--url", "http://x/v1", "--model", "m", name)
				if v, ok := valid[name]; ok {
					args = append(args, v)
				} else if !aiperfBools[name] && name != "--streaming" {
					args = append(args, "1")
				}
			}
			code, _ := stdoutOf(t, args...)
			if refused := code != 0; refused != (f.how == "refused") {
				t.Errorf("%s (%s): exit %d", name, f.how, code)
			}
		}
	}
}

// aiperf's refused short flags get the table's pointer, as its long ones
// do, not kingpin's bare "unknown short flag".
func TestAIPerfShortFlagsGetThePointer(t *testing.T) {
	for arg, want := range map[string]string{
		"-v":  "-v is aiperf's, and tokenprobe does not implement it: use --log.level=debug",
		"-vv": "-vv is aiperf's, and tokenprobe does not implement it: use --log.level=debug",
		"-b":  "-b is aiperf's, and tokenprobe does not implement it: use --batch (embeddings)",
		"-b8": "-b is aiperf's",
	} {
		stderr := os.Stderr
		r, w, _ := os.Pipe()
		os.Stderr = w
		code := run([]string{"run", "--url", "http://127.0.0.1:1", "--model", "m", arg})
		w.Close()
		os.Stderr = stderr
		b, _ := io.ReadAll(r)
		out := string(b)
		if code != runonce.ExitConfig || !strings.Contains(out, want) {
			t.Errorf("%s: exit %d, %q; want %q", arg, code, out, want)
		}
	}
}
