package dashboards

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tokenprobe/tokenprobe/alerts"
	"github.com/tokenprobe/tokenprobe/internal/catalog"
	"github.com/tokenprobe/tokenprobe/internal/gpu"
)

type panel struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Targets     []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// queries returns every panel's expressions, by dashboard and panel.
func queries(t *testing.T) map[string][]string {
	t.Helper()
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no dashboard is embedded")
	}
	out := map[string][]string{}
	for name, b := range files {
		var parsed struct {
			UID    string  `json:"uid"`
			Panels []panel `json:"panels"`
		}
		if err := json.Unmarshal(b, &parsed); err != nil {
			t.Fatal(err)
		}
		if parsed.UID != strings.TrimSuffix(name, ".json") {
			t.Errorf("%s: uid %q is not stable", name, parsed.UID)
		}
		for _, p := range parsed.Panels {
			if p.Description == "" || !metricRef.MatchString(p.Description) {
				t.Errorf("%s / %s: the description does not name its metric", name, p.Title)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s / %s: no query", name, p.Title)
			}
			for _, tg := range p.Targets {
				out[name+" / "+p.Title] = append(out[name+" / "+p.Title], tg.Expr)
			}
		}
	}
	return out
}

var metricRef = regexp.MustCompile(`\b(tokenprobe[_:][a-z0-9_:]+|DCGM_[A-Z0-9_]+)\b`)

// Every metric a panel queries is one tokenprobe exports, a DCGM series,
// or a recording rule: a renamed metric breaks this test, not a panel.
func TestQueriesReadMetricsThatExist(t *testing.T) {
	known := catalog.Names()
	for _, f := range gpu.Fields {
		known[f.Name] = catalog.Metric{}
	}
	for _, g := range alerts.Generate(alerts.Defaults()).Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				known[r.Record] = catalog.Metric{}
			}
		}
	}
	for where, exprs := range queries(t) {
		for _, e := range exprs {
			for _, m := range metricRef.FindAllString(e, -1) {
				if _, ok := known[m]; !ok {
					t.Errorf("%s queries %s, which nothing exports", where, m)
				}
			}
		}
	}
}

// Every query is valid PromQL as Prometheus itself parses it: the queries,
// Grafana's variables substituted, go into a rule file for promtool.
func TestQueriesParse(t *testing.T) {
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("TOKENPROBE_REQUIRE_PROMTOOL") != "" {
			t.Fatal("promtool not on PATH")
		}
		t.Skip("promtool not on PATH")
	}
	subst := strings.NewReplacer("$__rate_interval", "5m", "$__range", "1h", "$profile", ".*", "$endpoint", ".*", "$model", ".*")
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboards\n    rules:\n")
	n := 0
	for _, exprs := range queries(t) {
		for _, e := range exprs {
			n++
			fmt.Fprintf(&b, "      - record: dashboard:query:%d\n        expr: %q\n", n, subst.Replace(e))
		}
	}
	p := filepath.Join(t.TempDir(), "queries.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "check", "rules", p).CombinedOutput(); err != nil {
		t.Fatalf("promtool: %v\n%s", err, out)
	}
	t.Logf("%d queries parse", n)
}

// Every dashboard type-checks against Grafana's own published schema: each
// is written as a TypeScript object literal typed as @grafana/schema's
// Dashboard (literal values and unknown fields are checked) and compiled
// with tsc. dashboards/typecheck holds the pinned npm packages; .ci/run
// installs them.
func TestDashboardsTypeCheckAgainstGrafanaSchema(t *testing.T) {
	tsc := filepath.Join("typecheck", "node_modules", ".bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		if os.Getenv("TOKENPROBE_REQUIRE_TSC") != "" {
			t.Fatal("dashboards/typecheck has no node_modules (npm install there), and TOKENPROBE_REQUIRE_TSC is set")
		}
		t.Skip("no dashboards/typecheck/node_modules: cd dashboards/typecheck && npm install")
	}
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	gen := filepath.Join("typecheck", "gen")
	_ = os.RemoveAll(gen)
	if err := os.MkdirAll(gen, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"--noEmit", "--strict", "--moduleResolution", "node", "--module", "commonjs", "--target", "es2020"}
	for name, body := range files {
		ident := strings.NewReplacer("-", "_", ".json", "").Replace(name)
		src := "import { Dashboard } from '@grafana/schema';\nexport const " + ident + ": Dashboard = " + string(body) + ";\n"
		p := filepath.Join(gen, ident+".ts")
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, filepath.Join("gen", ident+".ts"))
	}
	cmd := exec.Command(filepath.Join("node_modules", ".bin", "tsc"), args...)
	cmd.Dir = "typecheck"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, out)
	}
	t.Logf("%d dashboards type-check against @grafana/schema", len(files))
}

// The SLO dashboard compares the places that probe (--probe.location):
// a location variable that every request query filters on, TTFT p95 and
// goodput by location, and a table of each location's latest state.
func TestSLODashboardByLocation(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name string `json:"name"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(files["tokenprobe-slo.json"], &d); err != nil {
		t.Fatal(err)
	}
	hasVar := false
	for _, v := range d.Templating.List {
		hasVar = hasVar || v.Name == "location"
	}
	if !hasVar {
		t.Error("no location variable")
	}
	want := map[string]string{"TTFT p95 by location": "timeseries", "Goodput by location": "timeseries", "Latest state by location": "table"}
	for _, p := range d.Panels {
		if typ, ok := want[p.Title]; ok {
			if p.Type != typ || len(p.Targets) == 0 || !strings.Contains(p.Targets[0].Expr, `location=~"$location"`) ||
				!strings.Contains(p.Targets[0].Expr, "by (location") {
				t.Errorf("%s: a %s of %d queries, %q", p.Title, p.Type, len(p.Targets), p.Targets)
			}
			delete(want, p.Title)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing panels: %v", want)
	}
}
