package web

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/report"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

var funcs = template.FuncMap{
	"msOf":      report.Millis,
	"breakdown": report.Breakdown,
	"human":     stats.FormatMillis,
	"pct":       func(v float64) string { return fmt.Sprintf("%.1f%%", v*100) },
	"rate":      func(v float64) string { return fmt.Sprintf("%.2f/s", v) },
	// words is a result as a person reads it: not_enough_evidence is
	// "not enough evidence".
	"words": func(s string) string { return strings.ReplaceAll(s, "_", " ") },
	// attainment is a run's attainment with its 95% interval, and the
	// class its verdict draws it in: an attainment under its objective is
	// never drawn as a pass.
	"attainmentClass": func(s *stats.Summary) string {
		if c := report.AttainmentClass(*s); c != "undecided" {
			return c
		}
		return "not_enough_evidence"
	},
	"interval": func(s *stats.Summary) string {
		if s.Evidence == nil || s.Evidence.Counted == 0 {
			return ""
		}
		return fmt.Sprintf("95%% interval %s to %s of %d requests", stats.Pct(s.Evidence.Attainment.Low), stats.Pct(s.Evidence.Attainment.High), s.Evidence.Counted)
	},
	// attempted is requests per second that reached an outcome, failed or
	// not: beside throughput (successes), a run with many errors cannot
	// read as healthy.
	"attempted": func(s *stats.Summary) float64 {
		if s.DurationSeconds <= 0 {
			return 0
		}
		return float64(s.Success+s.Errors) / s.DurationSeconds
	},
	"errorRate": func(s *stats.Summary) float64 {
		if s.Success+s.Errors == 0 {
			return 0
		}
		return float64(s.Errors) / float64(s.Success+s.Errors)
	},
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return time.Since(t).Round(time.Second).String() + " ago"
	},
	"in": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		d := time.Until(t).Round(time.Second)
		if d < 0 {
			return "due"
		}
		return "in " + d.String()
	},
	"ordinal": func(n int) string {
		switch {
		case n%100 >= 11 && n%100 <= 13:
			return fmt.Sprintf("%dth", n)
		case n%10 == 1:
			return fmt.Sprintf("%dst", n)
		case n%10 == 2:
			return fmt.Sprintf("%dnd", n)
		case n%10 == 3:
			return fmt.Sprintf("%drd", n)
		}
		return fmt.Sprintf("%dth", n)
	},
	"dur": func(a, b time.Time) string {
		if b.IsZero() {
			return "running"
		}
		return b.Sub(a).Round(100 * time.Millisecond).String()
	},
}

const style = `<style>
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin-bottom:1.5em}
th,td{border-bottom:1px solid #ddd;padding:.3em .6em;text-align:left;font-size:14px}
th{background:#f4f4f4}
.passed{color:#1a7f37}.failed,.error{color:#cf222e;font-weight:600}.running,.queued{color:#0969da}.cancelled{color:#777}
.not_enough_evidence{color:#9a6700;font-weight:600}
.num{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#f6f8fa;padding:1em;overflow:auto;font-size:13px}
.warn{background:#fff8c5;padding:.5em}
.charts{display:flex;flex-wrap:wrap;gap:10px}.chart{border:1px solid #ddd;border-radius:4px}
.sub{color:#57606a;font-size:12px}
</style>`

var statusPage = template.Must(template.New("status").Funcs(funcs).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>tokenprobe</title><meta http-equiv="refresh" content="10">` + style + `</head><body>
<h1>tokenprobe</h1>
<p>Version {{.Version}} · configuration loaded {{ago .ReloadAt}} · <a href="/metrics">metrics</a> · <a href="/config">configuration</a> · <a href="/api/v1/runs">runs API</a></p>
{{if .GPU}}<p id="gpu-status">GPU source {{.GPUSource}}: {{if .GPUProblem}}<span class="warn">down: {{.GPUProblem}}</span> (probing goes on; GPU series and figures are absent){{else}}reading{{end}}</p>{{end}}
{{with .ReloadErr}}<p class="warn" id="reload-error">The reload {{ago $.ReloadTried}} failed and the configuration loaded {{ago $.ReloadAt}} is still running: {{.}}</p>{{end}}
<h2>Profiles</h2>
<table id="jobs">
<tr><th>profile</th><th>load · schedule · SLO</th><th>state</th><th>last run</th><th>result</th><th class="num">goodput</th>
<th class="num" title="successful requests per second, of all attempted">throughput (attempted)</th><th class="num">attainment</th><th class="num">error rate</th>
<th class="num">TTFT p50 / p95</th><th class="num">ITL p50 / p95</th><th>where TTFT went</th></tr>
{{range .Jobs}}<tr class="job" data-profile="{{.Profile}}" data-endpoint="{{.Endpoint}}">
<td><b>{{.Profile}}</b> on {{.Endpoint}}<div class="sub">{{.Model}}</div></td><td class="plan">{{.Load}}<div class="sub">{{.Schedule}} · SLO {{.SLO}}</div></td>
<td>{{if .State.Running}}<span class="running">running</span>{{else if .Queued}}{{with .Queued}}<span class="queued" data-queued="{{.ID}}"><a href="/runs/{{.ID}}">#{{.ID}}</a> queued, {{ordinal .Position}} in line</span><div class="sub">behind {{.Behind}}</div>{{end}}{{else if .State.Paused}}paused: {{.State.Paused}}{{else if and .State.Aborts .Manual}}<span class="error">{{.State.Aborts}} aborted runs in a row</span>{{else if .State.Aborts}}<span class="error backoff">backing off: {{.State.Aborts}} aborted runs in a row; next run {{in .State.BackoffUntil}}</span>{{else}}idle{{end}}
<div class="sub">next: {{if .Manual}}when asked{{else if .State.Aborts}}{{in .State.BackoffUntil}}{{else}}{{in .State.Next}}{{end}}</div></td>
{{with .Last}}<td><a href="/runs/{{.ID}}">#{{.ID}}</a> {{ago .End}}</td><td class="{{.Result}}">{{words .Result}}{{with .Summary}}{{with .Probe}}{{if .Starved}}<div class="sub probe-starved" title="{{.Why}}">probe starved</div>{{end}}{{end}}{{end}}</td>
{{with .Summary}}<td class="num goodput">{{rate .Goodput}}</td><td class="num throughput">{{rate .RequestThroughput}} ({{rate (attempted .)}})</td><td class="num attainment {{attainmentClass .}}" title="{{interval .}}">{{pct .Attainment}}</td>
<td class="num error-rate{{if gt .Errors 0}} error{{end}}">{{pct (errorRate .)}}</td>
<td class="num">{{msOf .TTFT .TTFT.P50}} / {{msOf .TTFT .TTFT.P95}}</td><td class="num">{{msOf .ITL .ITL.P50}} / {{msOf .ITL .ITL.P95}}</td>
<td class="ttft-went">{{with .Server}}{{with .Breakdown}}<span title="{{.Verdict}}">mostly {{.Dominant}}: queue {{human .Mean.Queue}}{{with .Mean.Prefill}} · prefill {{human .}}{{end}} · elsewhere {{if lt .Mean.Elsewhere 0.0}}not measurable{{else}}{{human .Mean.Elsewhere}}{{end}}</span>{{else}}<span title="{{.Note}}{{.Err}}">no split</span>{{end}}{{end}}</td>{{end}}
{{else}}<td colspan="9">no run yet</td>{{end}}
</tr>{{end}}
</table>
{{if .Charts}}<h2>Against load and over time</h2>
{{range .Charts}}<section class="charts-of" data-job="{{.Profile}}"><h3>{{.Profile}}</h3><div class="charts">{{range .Curve}}{{.}}{{end}}{{range .Trend}}{{.}}{{end}}</div></section>{{end}}{{end}}
<h2>Recent runs</h2>
{{template "runs" .Recent}}
{{if .Failed}}<h2>Older failed runs</h2>
<p>Kept after newer runs rolled them out of the list above.</p>
{{template "runs" .Failed}}{{end}}
</body></html>
{{define "runs"}}<table class="runs">
<tr><th>run</th><th>profile</th><th>endpoint</th><th>trigger</th><th>started</th><th>took</th><th>result</th>
<th class="num">requests</th><th class="num">errors</th><th class="num">goodput</th><th class="num">attainment</th><th class="num">TTFT p50</th><th class="num">TTFT p99</th><th class="num">ITL p50</th><th>error</th></tr>
{{range .}}<tr><td><a href="/runs/{{.ID}}">#{{.ID}}</a></td><td>{{.Profile}}</td><td>{{.Endpoint}}</td><td>{{.Trigger}}</td>{{if eq .Result "queued"}}<td>asked {{.Asked.Format "2006-01-02 15:04:05"}}</td><td></td>
<td class="queued">queued, {{ordinal .Position}} in line<div class="sub">behind {{.Behind}}</div></td>{{else}}<td>{{.Start.Format "2006-01-02 15:04:05"}}</td><td>{{dur .Start .End}}</td>
<td class="{{.Result}}">{{words .Result}}</td>{{end}}
{{with .Summary}}<td class="num">{{.Requests}}</td><td class="num">{{.Errors}}</td><td class="num">{{rate .Goodput}}</td><td class="num attainment {{attainmentClass .}}" title="{{interval .}}">{{pct .Attainment}}</td>
<td class="num">{{msOf .TTFT .TTFT.P50}}</td><td class="num">{{msOf .TTFT .TTFT.P99}}</td><td class="num">{{msOf .ITL .ITL.P50}}</td>{{else}}<td colspan="7"></td>{{end}}<td class="run-error">{{with .Error}}{{.}}{{end}}{{with .ArtifactsError}}<br>artifacts not written: {{.}}{{end}}{{with .Summary}}{{with .Failures}}{{with index . 0}}<br>{{.Reason}} ×{{.Count}}: {{.Message}}{{with .Hint}}<br><i>{{.}}</i>{{end}}{{end}}{{end}}{{range .Checks}}{{if .Fail}}<br>wrong answers: {{.Name}} ×{{.Fail}}: {{.FirstFailure}}{{end}}{{end}}{{end}}</td></tr>
{{else}}<tr><td colspan="15">No runs yet.</td></tr>{{end}}
</table>{{end}}`))

var runPage = template.Must(template.New("run").Funcs(funcs).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>tokenprobe run #{{.Run.ID}}</title>` + style + `</head><body>
<p><a href="/">← status</a></p>
{{with .Run}}<h1>Run #{{.ID}}: {{.Profile}} on {{.Endpoint}}</h1>
{{if eq .Result "queued"}}<p class="queued" data-queued>Asked for {{.Asked.Format "2006-01-02 15:04:05 MST"}} ({{.Trigger}}) and queued until its endpoint is free: {{ordinal .Position}} in line, behind {{.Behind}}. This page shows the run once it starts.</p>{{else if .Start.IsZero}}<p><span class="{{.Result}}">{{words .Result}}</span> before it started{{with .Error}}: {{.}}{{end}}</p>{{else}}<p>Started {{.Start.Format "2006-01-02 15:04:05 MST"}} by {{.Trigger}}, took {{dur .Start .End}}: <span class="{{.Result}}">{{words .Result}}</span>{{with .Error}} ({{.}}){{end}}</p>{{end}}{{with .Summary}}{{with .Verdict}}<p class="verdict" data-verdict>{{.}}</p>{{end}}{{with .Probe}}<p class="probe{{if .Starved}} warn{{end}}" data-probe-starved="{{.Starved}}">{{if .Starved}}The probe was starved, so it cannot vouch for this run's timing: {{.Why}}. A miss its own delay could account for is not counted against the server, and the run feeds no baseline.{{else}}The probe ran promptly: its own delay p99 {{human .DelayP99Ms}} (max {{human .DelayMaxMs}}){{if ge .StealPercent 0.0}}, CPU steal {{printf "%.1f" .StealPercent}}%{{end}}.{{end}}</p>{{end}}{{end}}{{with .ArtifactsError}}<p class="error">Its artifacts were not written: {{.}}</p>{{end}}{{end}}
{{with .Run.Summary}}{{if .Failures}}<h2>Failures</h2>
<table id="failures"><tr><th>reason</th><th class="num">count</th><th>status codes</th><th>most frequent message</th><th>hint</th></tr>
{{range .Failures}}<tr><td class="error">{{.Reason}}</td><td class="num">{{.Count}}</td><td>{{range $code, $n := .Statuses}}{{$code}} ×{{$n}} {{end}}</td><td>{{.Message}} ({{.MessageCount}} of {{.Count}})</td><td>{{.Hint}}</td></tr>{{end}}
</table>{{end}}
{{if .Checks}}<h2>Answer checks</h2><table id="checks"><tr><th>check</th><th class="num">passed</th><th class="num">failed</th><th>first failure</th></tr>
{{range .Checks}}<tr><td>{{.Name}}</td><td class="num">{{.Pass}}</td><td class="num{{if .Fail}} error{{end}}">{{.Fail}}</td><td>{{.FirstFailure}}</td></tr>{{end}}
</table>{{end}}
{{with .Server}}<h2>Where TTFT went</h2>{{breakdown .}}{{end}}{{end}}
{{if .Charts}}<h2>Charts</h2><div class="charts" id="run-charts">{{range .Charts}}{{.}}{{end}}</div>{{end}}
{{if .Report}}<h2>Report</h2><pre id="report">{{.Report}}</pre>{{end}}
<h2>Log</h2>
<table><tr><th>time</th><th>level</th><th>message</th><th>details</th></tr>
{{range .Run.Log}}<tr><td>{{.Time.Format "15:04:05.000"}}</td><td>{{.Level}}</td><td>{{.Message}}</td><td>{{.Attrs}}</td></tr>{{end}}
</table>
</body></html>`))
