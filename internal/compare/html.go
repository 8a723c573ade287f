package compare

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/report"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Pair is two runs of one profile and endpoint, compared.
type Pair struct {
	Key       string
	Base, New *Run
	Rows      []Row
}

// Gate is the --fail-on rules and their decisions.
type Gate struct {
	Rules     []Rule
	Decisions []Decision
}

// ruleVerdict is one rule's line on the page: its outcome over every
// pair (failed over not enough evidence over passed), and each decision
// that was not a pass.
type ruleVerdict struct {
	Rule    string
	Outcome string
	Lines   []string
}

func (g Gate) verdicts() []ruleVerdict {
	var out []ruleVerdict
	for _, r := range g.Rules {
		v := ruleVerdict{Rule: r.String(), Outcome: Passed}
		for _, d := range g.Decisions {
			if d.Rule.String() != r.String() {
				continue
			}
			switch {
			case d.Outcome == Failed:
				v.Outcome = Failed
			case d.Outcome == Undecided && v.Outcome != Failed:
				v.Outcome = Undecided
			}
			if d.Outcome != Passed {
				v.Lines = append(v.Lines, d.Line())
			}
		}
		out = append(out, v)
	}
	return out
}

// distributionCharts draw the baseline's distributions beside the new
// run's, one CDF a metric, with the baseline's SLO where it sets one.
func distributionCharts(base, next *stats.Summary) []template.HTML {
	var out []template.HTML
	for _, m := range []struct {
		name, kind, short string
		base, new         stats.Dist
	}{{"Time to first token", "ttft", "TTFT", base.TTFT, next.TTFT}, {"Inter-token latency", "itl", "ITL", base.ITL, next.ITL},
		{"Request latency", "request_latency", "request latency", base.E2E, next.E2E}} {
		var slo report.Threshold
		if v, ok := base.SLOThresholds[m.kind]; ok {
			slo = report.Threshold{Value: v, Label: fmt.Sprintf("SLO: %s %s", m.short, stats.FormatMillis(v))}
		}
		out = append(out, report.CDF(m.name+": baseline and new", strings.ToLower(m.name)+" (ms)",
			[]report.Dist{{Name: "baseline", Color: "#57606a", D: m.base}, {Name: "new", Color: "#cf222e", D: m.new}}, slo))
	}
	return out
}

// HTML writes the comparison as a self-contained page: the gate's verdict
// per rule, then per pair of runs the table of changes and the two runs'
// distributions drawn together.
func HTML(w io.Writer, pairs []Pair, g Gate, at time.Time) error {
	type view struct {
		Pair
		Charts []template.HTML
	}
	var data struct {
		At    string
		Gate  []ruleVerdict
		Pairs []view
	}
	data.At = at.Format("2006-01-02 15:04:05 MST")
	data.Gate = g.verdicts()
	for _, p := range pairs {
		data.Pairs = append(data.Pairs, view{Pair: p, Charts: distributionCharts(&p.Base.Summary, &p.New.Summary)})
	}
	return page.Execute(w, data)
}

var page = template.Must(template.New("compare").Funcs(template.FuncMap{
	"value": value, "pct": pct,
	"verdict": func(r Row) string {
		switch {
		case math.IsNaN(r.Low):
			return "n/a"
		case r.Significant && (r.Change > 0) == r.HigherIsBetter:
			return "better"
		case r.Significant:
			return "worse"
		}
		return "noise"
	},
}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>tokenprobe compare</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1200px}
table{border-collapse:collapse}th,td{border-bottom:1px solid #ddd;padding:.3em .6em;text-align:right;font-size:13px}
td:first-child,th:first-child{text-align:left}
.worse,.failed{color:#cf222e;font-weight:600}.better,.passed{color:#1a7f37}.noise,.n\/a{color:#777}.not_enough_evidence{color:#9a6700;font-weight:600}
.charts{display:flex;flex-wrap:wrap;gap:12px}.chart{border:1px solid #ddd;border-radius:4px}
</style></head><body>
<h1>tokenprobe compare</h1><p>{{.At}}</p>
{{if .Gate}}<h2>Gate (--fail-on)</h2>
<table class="gate"><tr><th>rule</th><th>verdict</th></tr>
{{range .Gate}}<tr class="rule {{.Outcome}}" data-rule="{{.Rule}}" data-outcome="{{.Outcome}}"><td>{{.Rule}}</td><td>{{if .Lines}}{{range $i, $f := .Lines}}{{if $i}}<br>{{end}}{{$f}}{{end}}{{else}}passed: every change within it, beyond the runs' noise{{end}}</td></tr>
{{end}}</table>{{end}}
{{range .Pairs}}<section class="pair" data-key="{{.Key}}">
<h2>{{.Key}}</h2>
<p>baseline {{.Base.Dir}} ({{len .Base.Records}} requests) · new {{.New.Dir}} ({{len .New.Records}} requests)</p>
<table><tr><th>metric</th><th>baseline</th><th>new</th><th>change</th><th>95% interval</th><th></th></tr>
{{range .Rows}}<tr class="{{verdict .}}"><td>{{.Label}}</td><td>{{value .Base .Unit}}</td><td>{{value .New .Unit}}</td><td>{{pct .Change}}</td><td>[{{pct .Low}}, {{pct .High}}]</td><td>{{verdict .}}</td></tr>
{{end}}</table>
<div class="charts">{{range .Charts}}{{.}}{{end}}</div>
</section>{{end}}
</body></html>`))
