package layers

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/tokenprobe/tokenprobe/"

// layer of every package: a package imports only packages of lower
// layers. Below the leaves are the rate-limit headers' reader (-2), which
// the HTTP client and the result model hold (with the regex cost and the
// child process starter, imported by leaves), and the result model (-1),
// which every layer reads. 0 is the leaves (the schema, wire formats,
// helpers), then the
// engine's parts (1, 2), the engine and the GPU sources (3), the metric
// catalog (4), the sinks (5), setup and runner (6), the commands' logic
// (7), the HTTP surface and the generators (8), and the wiring (9).
var layer = map[string]int{
	"probe/ratelimit": -2, "internal/regexcost": -2, "internal/childproc": -2,
	"probe/result":    -1,
	"internal/config": 0, "internal/scheduler": 0, "internal/sim": 0, "probe/apierror": 0, "probe/cloudauth": 0, "probe/served": 0, "internal/realserver": 0, "probe/openai": 0, "probe/sse": 0, "probe/h1": 0, "probe/load": 0, "probe/tokenizer": 0,
	"internal/hostile": 0, "internal/redact": 0, "internal/schedslice": 0, "internal/steal": 0,
	"internal/syncbuf": 0, "internal/memreturn": 0, "internal/browsertest": 0, "internal/layers": 0, "exporter/otlp/otlptest": 0,

	"probe/slo": 1, "internal/probehealth": 1, "probe/client": 1, "probe/check": 1, "internal/timingtest": 1,
	"probe/stats": 2, "probe/workload": 2,
	"probe": 3, "internal/report": 3, "internal/gpu": 3, "internal/servermetrics": 3,
	"internal/catalog": 4,
	"internal/sink":    5, "exporter/prom": 5, "exporter/otlp": 5, "internal/sink/records": 5,
	"internal/runner": 6, "internal/setup": 6, "internal/rundir": 6,
	"internal/daemon": 7, "internal/runonce": 7, "internal/compare": 7, "internal/merge": 7,
	"internal/web": 8, "alerts": 8, "dashboards": 8, "dashboards/gen": 8, "e2e": 8, "e2e/realservers": 8, "e2e/silentchanges": 8,
	"cmd/tokenprobe": 9, "internal/hostile/cmd/hostile": 9, "internal/hostile/cmd/rss": 9,
}

// readsConfig are the packages that may import config: setup turns it
// into running objects; the commands load it. The engine and the sinks
// never see it.
var readsConfig = map[string]bool{"internal/setup": true, "internal/daemon": true, "internal/runonce": true, "internal/web": true, "cmd/tokenprobe": true}

func TestImportsGoDownTheLayers(t *testing.T) {
	root := filepath.Join("..", "..")
	seen := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
			return filepath.SkipDir // a module of its own: deploy, tools/bench
		}
		pkg, err := build.ImportDir(path, 0)
		if err != nil {
			return nil // no Go files here
		}
		seen++
		own, ok := layer[rel]
		if !ok {
			t.Errorf("%s is in no layer: add it to layers_test.go (and docs/ARCHITECTURE.md)", rel)
			return nil
		}
		for _, imp := range pkg.Imports {
			dep, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			if l, ok := layer[dep]; !ok || l >= own {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports go down the layers", rel, own, dep, l)
			}
			if dep == "internal/config" && !readsConfig[rel] {
				t.Errorf("%s imports config: only setup and the commands read the configuration", rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < len(layer)-1 {
		t.Fatalf("found %d packages, the table has %d", seen, len(layer))
	}
}

// askedByName is code that asks which API an endpoint speaks: a
// comparison with one of probe/openai's APIs, or a case of a switch on
// one.
var askedByName = regexp.MustCompile(`[=!]=\s*(string\()?(openai\.)?(Chat|Completions|Responses|Messages|Embeddings|KServeGenerate)\b|\bopenai\.(Chat|Completions|Responses|Messages|Embeddings|KServeGenerate)\s*[=!]=|case\s+openai\.|\bapi\s*[=!]=\s*"`)

// An API is one file: what it is lives in its Protocol (probe/openai) and
// its simulator file (internal/sim); code elsewhere asks the protocol,
// never which API it is, so that a new API touches no engine code.
func TestNoAPIIsAskedByName(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules" || rel == "probe/openai" || rel == "internal/sim") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if askedByName.MatchString(line) {
				t.Errorf("%s:%d asks which API it is (%s): ask its openai.Protocol", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
