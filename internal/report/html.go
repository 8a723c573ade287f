package report

import (
	"bytes"
	"fmt"
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
	Dists   []template.HTML
}

// HTML writes a self-contained report of runs: no script and no link to
// fetch, so it opens anywhere, attached to a CI job or mailed.
func HTML(w io.Writer, title string, runs []stats.Summary, levelNames []string, at time.Time) error {
	var data struct {
		Title  string
		At     string
		Runs   []htmlRun
		Across []template.HTML
	}
	data.Title, data.At = title, at.Format("2006-01-02 15:04:05 MST")
	for i := range runs {
		s := runs[i]
		var text bytes.Buffer
		Text(&text, &s, levelNames[i])
		data.Runs = append(data.Runs, htmlRun{Summary: s, Level: levelNames[i], Text: text.String(),
			Curves: CliffCharts(&s, levelNames[i]), Dists: Distributions(&s)})
	}
	data.Across = Across(runs, levelNames)
	return page.Execute(w, data)
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"rateLimitLine": RateLimitLine,
	"mul100":        func(v float64) float64 { return v * 100 },
	// verdict is the class a run's verdict is drawn in: an attainment
	// under its objective is never drawn as a pass, nor one without
	// enough evidence as a failure.
	"verdict": func(s stats.Summary) string {
		switch {
		case s.Passed:
			return "passed"
		case s.Undecided:
			return "undecided"
		}
		return "failed"
	},
	"attainmentClass": AttainmentClass,
	"msOf":            Millis,
	"breakdown":       Breakdown,
	// levels says what load a run ran at: one level, or a staged run's
	// range, so that a staged run is never headed by its first level.
	"levels": func(s stats.Summary, name string) string {
		if len(s.LevelRange) == 2 {
			return fmt.Sprintf("staged: %s %g to %g in %d stages", name, s.LevelRange[0], s.LevelRange[1], len(s.Stages))
		}
		return fmt.Sprintf("%s %g", name, s.Level)
	},
	"errorRate": func(s stats.Summary) string {
		if s.Success+s.Errors == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(s.Errors)/float64(s.Success+s.Errors))
	},
}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1200px}
.charts{display:flex;flex-wrap:wrap;gap:12px}
.chart{border:1px solid #ddd;border-radius:4px;background:#fff}
pre{background:#f6f8fa;padding:1em;overflow:auto;font-size:12px}
.kpi{display:flex;gap:2em;margin:.5em 0 1em}.kpi div{font-size:13px}.kpi b{display:block;font-size:20px}
.failed,.error{color:#cf222e}.passed{color:#1a7f37}.undecided{color:#9a6700}.pooled{color:inherit}
.banner{background:#ffebe9;border:1px solid #cf222e;padding:.5em;margin:.5em 0}
table{border-collapse:collapse}th,td{border-bottom:1px solid #ddd;padding:.3em .6em;text-align:left;font-size:13px}
</style></head><body>
<h1>{{.Title}}</h1><p>{{.At}}</p>
{{if gt (len .Runs) 1}}<h2>The runs side by side</h2>
<table class="across"><tr><th>profile</th><th>endpoint</th><th>load</th><th>requests</th><th>error rate</th><th>TTFT p50</th><th>TTFT p95</th><th>ITL p50</th><th>throughput</th><th>goodput</th><th>SLO attainment</th></tr>
{{range .Runs}}{{$level := .Level}}{{with .Summary}}<tr><td>{{.Profile}}</td><td>{{.Endpoint}}</td><td>{{levels . $level}}</td><td>{{.Requests}}</td><td class="{{if gt .Errors 0}}error{{end}}">{{errorRate .}}</td>
<td>{{msOf .TTFT .TTFT.P50}}</td><td>{{msOf .TTFT .TTFT.P95}}</td><td>{{msOf .ITL .ITL.P50}}</td><td>{{printf "%.2f" .RequestThroughput}}/s</td><td>{{printf "%.2f" .Goodput}}/s</td>
<td class="{{attainmentClass .}}">{{printf "%.1f" (mul100 .Attainment)}}%</td></tr>{{end}}{{end}}
</table>
{{if .Across}}<div class="charts across">{{range .Across}}{{.}}{{end}}</div>{{end}}{{end}}
{{range .Runs}}<section class="run" data-profile="{{.Summary.Profile}}">
<h2>{{.Summary.Profile}} on {{.Summary.Endpoint}} <small>({{.Summary.Model}} · {{levels .Summary .Level}})</small></h2>
{{if .Summary.Interrupted}}<p class="banner interrupted">Interrupted: the run was stopped before its end; these figures are of what it measured.</p>{{end}}
{{with .Summary.Error}}<p class="banner error">Run error: {{.}}</p>{{end}}
{{if .Summary.Verdict}}<p class="verdict {{verdict .Summary}}" data-verdict>{{.Summary.Verdict}}</p>{{end}}
{{with .Summary.Probe}}{{if .Starved}}<p class="banner starved">The probe was starved, so it cannot vouch for this run's timing: {{.Why}}.</p>{{end}}{{end}}
<div class="kpi">
<div><b>{{printf "%.2f" .Summary.Goodput}}/s</b>goodput</div>
<div><b>{{printf "%.2f" .Summary.RequestThroughput}}/s</b>throughput</div>
<div><b class="{{attainmentClass .Summary}}">{{printf "%.1f" (mul100 .Summary.Attainment)}}%</b>SLO attainment{{with .Summary.Evidence}}{{if .Counted}}<br>95% interval {{printf "%.1f" (mul100 .Attainment.Low)}} to {{printf "%.1f" (mul100 .Attainment.High)}}%{{end}}{{end}}</div>
<div><b>{{msOf .Summary.TTFT .Summary.TTFT.P50}}</b>TTFT p50</div>
<div><b>{{msOf .Summary.ITL .Summary.ITL.P50}}</b>ITL p50</div>
</div>
{{if .Summary.Failures}}<h3>Failures</h3><table class="failures"><tr><th>reason</th><th>count</th><th>status codes</th><th>most frequent message</th><th>hint</th></tr>
{{range .Summary.Failures}}<tr><td class="error">{{.Reason}}</td><td>{{.Count}}</td><td>{{range $code, $n := .Statuses}}{{$code}} ×{{$n}} {{end}}</td><td>{{.Message}} ({{.MessageCount}})</td><td>{{.Hint}}</td></tr>{{end}}
</table>{{end}}
{{if .Summary.RateLimits}}<h3>Rate limits</h3><table class="ratelimits"><tr><th>kind</th><th>what the provider's headers said, and the probe's own use</th></tr>
{{range .Summary.RateLimits}}<tr><td>{{.Kind}}</td><td>{{rateLimitLine .}}</td></tr>{{end}}
</table>{{end}}
{{if .Summary.Checks}}<h3>Answer checks</h3><table class="checks"><tr><th>check</th><th>passed</th><th>failed</th><th>first failure</th></tr>
{{range .Summary.Checks}}<tr><td>{{.Name}}</td><td>{{.Pass}}</td><td{{if .Fail}} class="error"{{end}}>{{.Fail}}</td><td>{{.FirstFailure}}</td></tr>{{end}}
</table>{{end}}
{{with .Summary.Server}}<h3>Where TTFT went</h3>{{breakdown .}}{{end}}
{{if .Curves}}<h3>Against load</h3><div class="charts curves">{{range .Curves}}{{.}}{{end}}</div>{{end}}
<h3>Distributions</h3><div class="charts">{{range .Dists}}{{.}}{{end}}</div>
<details><summary>Full report</summary><pre>{{.Text}}</pre></details>
</section>{{end}}
</body></html>`))

// AttainmentClass is the class an attainment figure is drawn in: never
// a pass under its objective. A search's pooled attainment, over steps
// that overshoot its capacity on purpose, is no verdict: under the
// objective it is drawn plain ("pooled"), its verdict being the capacity.
func AttainmentClass(s stats.Summary) string {
	under := s.Objective > 0 && s.Attainment < s.Objective
	switch {
	case under && s.Search != nil:
		return "pooled"
	case s.Undecided:
		return "undecided"
	case s.Passed && !under:
		return "passed"
	}
	return "failed"
}
