package compare

import (
	"html/template"
	"io"
	"math"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/stats"
	"github.com/tokenprobe/tokenprobe/report"
)

// Pair is two runs of one profile and endpoint, compared.
type Pair struct {
	Key       string
	Base, New *Run
	Rows      []Row
}

// distributionCharts draw the baseline's distributions beside the new
// run's, one chart a metric.
func distributionCharts(base, next *stats.Summary) []template.HTML {
	xs := []string{"min", "p50", "p75", "p90", "p95", "p99", "max"}
	ladder := func(d stats.Dist) []float64 {
		if d.Count == 0 {
			return []float64{math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()}
		}
		return []float64{d.Min, d.P50, d.P75, d.P90, d.P95, d.P99, d.Max}
	}
	var out []template.HTML
	for _, m := range []struct {
		name      string
		base, new stats.Dist
	}{{"Time to first token", base.TTFT, next.TTFT}, {"Inter-token latency", base.ITL, next.ITL}, {"Request latency", base.E2E, next.E2E}} {
		out = append(out, report.LineChart(m.name+": baseline and new", " ms", xs,
			[]report.Series{{Name: "baseline", Color: "#57606a", Values: ladder(m.base)}, {Name: "new", Color: "#cf222e", Values: ladder(m.new)}}, nil))
	}
	return out
}

// HTML writes the comparison as a self-contained page: per pair of runs,
// the table of changes and the two runs' distributions drawn together.
func HTML(w io.Writer, pairs []Pair, at time.Time) error {
	type view struct {
		Pair
		Charts []template.HTML
	}
	var data struct {
		At    string
		Pairs []view
	}
	data.At = at.Format("2006-01-02 15:04:05 MST")
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
.worse{color:#cf222e;font-weight:600}.better{color:#1a7f37}.noise,.n\/a{color:#777}
.charts{display:flex;flex-wrap:wrap;gap:12px}.chart{border:1px solid #ddd;border-radius:4px}
</style></head><body>
<h1>tokenprobe compare</h1><p>{{.At}}</p>
{{range .Pairs}}<section class="pair" data-key="{{.Key}}">
<h2>{{.Key}}</h2>
<p>baseline {{.Base.Dir}} ({{len .Base.Records}} requests) · new {{.New.Dir}} ({{len .New.Records}} requests)</p>
<table><tr><th>metric</th><th>baseline</th><th>new</th><th>change</th><th>95% interval</th><th></th></tr>
{{range .Rows}}<tr class="{{verdict .}}"><td>{{.Label}}</td><td>{{value .Base .Unit}}</td><td>{{value .New .Unit}}</td><td>{{pct .Change}}</td><td>[{{pct .Low}}, {{pct .High}}]</td><td>{{verdict .}}</td></tr>
{{end}}</table>
<div class="charts">{{range .Charts}}{{.}}{{end}}</div>
</section>{{end}}
</body></html>`))
