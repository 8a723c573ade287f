package report

import (
	"bytes"
	"html/template"
	"io"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/stats"
)

type htmlRun struct {
	Summary stats.Summary
	Level   string
	Text    string
	Curves  []template.HTML
	Ladders []template.HTML
}

// HTML writes a self-contained report of runs: no script and no link to
// fetch, so it opens anywhere, attached to a CI job or mailed.
func HTML(w io.Writer, title string, runs []stats.Summary, levelNames []string, at time.Time) error {
	var data struct {
		Title string
		At    string
		Runs  []htmlRun
	}
	data.Title, data.At = title, at.Format("2006-01-02 15:04:05 MST")
	for i := range runs {
		s := runs[i]
		var text bytes.Buffer
		Text(&text, &s, levelNames[i])
		data.Runs = append(data.Runs, htmlRun{Summary: s, Level: levelNames[i], Text: text.String(),
			Curves: CliffCharts(&s, levelNames[i]), Ladders: Ladders(&s)})
	}
	return page.Execute(w, data)
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"mul100": func(v float64) float64 { return v * 100 },
}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1200px}
.charts{display:flex;flex-wrap:wrap;gap:12px}
.chart{border:1px solid #ddd;border-radius:4px;background:#fff}
pre{background:#f6f8fa;padding:1em;overflow:auto;font-size:12px}
.kpi{display:flex;gap:2em;margin:.5em 0 1em}.kpi div{font-size:13px}.kpi b{display:block;font-size:20px}
.failed{color:#cf222e}.passed{color:#1a7f37}
</style></head><body>
<h1>{{.Title}}</h1><p>{{.At}}</p>
{{range .Runs}}<section class="run" data-profile="{{.Summary.Profile}}">
<h2>{{.Summary.Profile}} on {{.Summary.Endpoint}} <small>({{.Summary.Model}})</small></h2>
<div class="kpi">
<div><b>{{printf "%.2f" .Summary.Goodput}}/s</b>goodput</div>
<div><b>{{printf "%.2f" .Summary.RequestThroughput}}/s</b>throughput</div>
<div><b class="{{if .Summary.Passed}}passed{{else}}failed{{end}}">{{printf "%.1f" (mul100 .Summary.Attainment)}}%</b>SLO attainment</div>
<div><b>{{printf "%.0f" .Summary.TTFT.P50}} ms</b>TTFT p50</div>
<div><b>{{printf "%.1f" .Summary.ITL.P50}} ms</b>ITL p50</div>
</div>
{{if .Curves}}<h3>Against load</h3><div class="charts curves">{{range .Curves}}{{.}}{{end}}</div>{{end}}
<h3>Distributions</h3><div class="charts">{{range .Ladders}}{{.}}{{end}}</div>
<details><summary>Full report</summary><pre>{{.Text}}</pre></details>
</section>{{end}}
</body></html>`))
