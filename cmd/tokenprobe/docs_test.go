package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tokenprobe/tokenprobe/alerts"
	"github.com/tokenprobe/tokenprobe/internal/catalog"
)

// TestHelpLong is not a test: run by TestDocsClaimsAreTrue in a process of
// its own, it prints every command's flags and exits, as `--help-long`
// does.
func TestHelpLong(t *testing.T) {
	if os.Getenv("TOKENPROBE_PRINT_HELP_LONG") == "" {
		t.Skip("run by TestDocsClaimsAreTrue")
	}
	os.Exit(run([]string{"--help-long"}))
}

// foreignFlags are flags the docs name that belong to other programs, with
// the program: a flag a doc names is tokenprobe's or one of these.
var foreignFlags = map[string]string{
	"enable-feature": "prometheus", "web.enable-otlp-receiver": "prometheus", "web.enable-remote-write-receiver": "prometheus", "storage.tsdb.path": "prometheus",
	"enable-request-id-headers": "vllm", "tool-call-parser": "vllm serve, sglang", "port": "vllm serve, llama-server", "metrics": "llama-server",
	"set": "helm", "values": "helm", "namespace": "helm", "create-namespace": "helm", "timeout": "helm",
	"rm": "docker", "network": "docker", "build-arg": "docker", "count": "go test", "run": "go test",
	"tool": "valgrind", "callgrind-out-file": "valgrind", "query-gpu": "nvidia-smi", "format": "nvidia-smi", "lms": "nvidia-smi", "served-model-name": "vllm serve", "alias": "llama-server", "host": "llama-server", "no-jinja": "llama-server", "chat-template": "llama-server", "force-dummy-tokenizer": "llm-d-inference-sim",
	"enable-prefix-caching": "vllm serve", "disable-radix-cache": "sglang", "enable-kvcache": "llm-d-inference-sim", "prefill-time-per-token": "llm-d-inference-sim", "block-size": "llm-d-inference-sim", "prefill-overhead": "llm-d-inference-sim",
}

var (
	codeSpan   = regexp.MustCompile("`[^`\n]+`")
	flagRef    = regexp.MustCompile(`(?:^|[\s(\[=])--([a-z][a-z0-9.-]*[a-z0-9])`)
	metricRef  = regexp.MustCompile(`\btokenprobe[_:][a-z0-9_:]+[a-z0-9]\b`)
	pathRef    = regexp.MustCompile(`^(alerts|configs|dashboards|deploy|docs|tools|cmd|probe|sink|e2e|internal|sim|web|report|runner|runonce|setup|servermetrics|compare|rundir|catalog|config|daemon|gpu|scheduler)/[A-Za-z0-9_./-]+$`)
	mdLink     = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	helpFlags  = regexp.MustCompile(`--(?:\[no-\])?([a-z][a-z0-9.-]*)`)
	fenceStart = "```"
)

// Every flag, metric and path README.md and docs/ name in code is one the
// code has, and every link to a file of the repository leads to one: a
// doc that names a flag, a metric or a file the code lacks fails here.
func TestDocsClaimsAreTrue(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelpLong$")
	cmd.Env = append(os.Environ(), "TOKENPROBE_PRINT_HELP_LONG=1")
	help, _ := cmd.CombinedOutput()
	flags := map[string]bool{}
	for _, m := range helpFlags.FindAllStringSubmatch(string(help), -1) {
		flags[m[1]] = true
	}
	if !flags["url"] || !flags["fail-on"] || !flags["web.listen-address"] {
		t.Fatalf("tokenprobe's flags not read from --help-long:\n%.500s", help)
	}
	// aiperf's flags, each either taken or refused by name (aiperf.go).
	for _, f := range aiperfFlags {
		for _, n := range f.names {
			flags[strings.TrimPrefix(n, "--")] = true
		}
	}
	// The benchmark harness's flags, from its source (a module of its own).
	bench, err := os.ReadFile(filepath.Join("..", "..", "tools", "bench", "cmd", "tokenprobe-bench", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`Flag\("([a-z0-9.-]+)"`).FindAllStringSubmatch(string(bench), -1) {
		flags[m[1]] = true
	}
	metrics := map[string]bool{}
	for n := range catalog.Names() {
		metrics[n] = true
	}
	for _, g := range alerts.Generate(alerts.Defaults()).Groups {
		for _, r := range g.Rules {
			metrics[r.Record] = true
		}
	}
	root := filepath.Join("..", "..")
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append(docs, filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md"))
	checked := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, doc)
		fenced := false
		for i, line := range strings.Split(string(b), "\n") {
			where := name + ":" + strconv.Itoa(i+1)
			if strings.HasPrefix(strings.TrimSpace(line), fenceStart) {
				fenced = !fenced
				continue
			}
			var code []string
			if fenced {
				code = []string{line}
			} else {
				for _, s := range codeSpan.FindAllString(line, -1) {
					code = append(code, strings.Trim(s, "`"))
				}
			}
			for _, c := range code {
				for _, m := range flagRef.FindAllStringSubmatch(c, -1) {
					checked++
					f := m[1]
					if !flags[f] && !flags[strings.TrimPrefix(f, "no-")] && foreignFlags[f] == "" {
						t.Errorf("%s: --%s is no flag of tokenprobe's (nor in foreignFlags)", where, f)
					}
				}
				for _, m := range metricRef.FindAllString(c, -1) {
					checked++
					if !metrics[m] && !strings.HasPrefix(m, "tokenprobe_sim_") { // the simulator's own series
						t.Errorf("%s: %s is no metric of the catalog nor a recording rule", where, m)
					}
				}
				if !fenced && pathRef.MatchString(c) && !strings.ContainsAny(c, "<>*") {
					checked++
					if _, err := os.Stat(filepath.Join(root, c)); err != nil {
						t.Errorf("%s: %s does not exist", where, c)
					}
				}
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				if _, err := os.Stat(filepath.Join(filepath.Dir(doc), target)); err != nil {
					t.Errorf("%s: the link to %s leads nowhere", where, target)
				}
			}
		}
	}
	t.Logf("%d claims checked in %d files", checked, len(docs))
}

// How long a command takes is stated once, measured, in CONTRIBUTING.md's
// table of test tiers (and make bench's in its own generated section):
// the docs gave `.ci/run` as 33 and as 10 to 15 minutes, `make bench` as
// 17 and 27, and `go test ./...` as 5 against 15 to 22 measured. A line
// elsewhere that names one of these commands with a time in minutes is
// refused, unless it records a measurement with its date.
func TestCommandDurationsAreStatedOnce(t *testing.T) {
	commands := []string{"go test ./...", ".ci/run", "make bench", "make fuzz", "make e2e", "make real-servers", "make lint", "make race"}
	minutes := regexp.MustCompile(`\b\d+(\.\d+)?( to \d+)? ?(minutes|min)\b`)
	dated := regexp.MustCompile(`\b20\d\d-\d\d-\d\d\b`)
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md", "../../Makefile")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if !minutes.MatchString(line) || dated.MatchString(line) {
				continue
			}
			for _, c := range commands {
				if strings.Contains(line, c) {
					t.Errorf("%s:%d names `%s` with a duration: state it in CONTRIBUTING.md's table (measured) and link there\n%s", f, i+1, c, line)
				}
			}
		}
	}
	b, err := os.ReadFile("../../CONTRIBUTING.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "| time here (2 cores, measured") {
		t.Error("CONTRIBUTING.md's table of test tiers does not say when its times were measured")
	}
}
