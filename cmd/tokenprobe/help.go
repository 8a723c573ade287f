package main

import (
	"strings"
	"text/template"

	"github.com/alecthomas/kingpin/v2"
)

// flagGroups are the headings `--help` lists flags under, in order, and
// the flags of each: a run's flags describe a profile the way
// `aiperf profile` takes them, and read best grouped as AIPerf's help
// groups them. A flag in no group is listed under "Flags".
var flagGroups = []struct {
	title string
	flags []string
}{
	{"Endpoint (a profile from flags)", []string{"url", "model", "api", "header", "api-key-env", "extra-body", "server-metrics", "server-kind"}},
	{"Load", []string{"concurrency", "request-rate", "arrival", "smoothness", "requests", "duration", "warmup-requests", "sweep", "search"}},
	{"Workload", []string{"input-tokens", "output-tokens", "dataset", "trace", "speedup", "tokenizer"}},
	{"SLO", []string{"goodput", "objective"}},
	{"Configuration and output", []string{"config.file", "profile", "endpoint", "print-config", "artifacts-dir", "export-aiperf", "progress-interval"}},
	{"Debugging", []string{"debug.cpu-profile", "debug.heap-profile", "debug.trace", "sched.slice"}},
}

// groupedUsage is kingpin's default usage with the flags under the
// headings of flagGroups.
func groupedUsage(app *kingpin.Application) {
	var sections strings.Builder
	for _, g := range flagGroups {
		sections.WriteString(`{{with FlagsIn "` + g.title + `" .Context.Flags}}` + g.title + ":\n{{.|FlagsToTwoColumns|FormatTwoColumns}}\n{{end -}}\n")
	}
	sections.WriteString(`{{with FlagsIn "" .Context.Flags}}Flags:` + "\n{{.|FlagsToTwoColumns|FormatTwoColumns}}\n{{end -}}\n")
	tmpl := strings.Replace(kingpin.DefaultUsageTemplate, "{{if .Context.Flags -}}\nFlags:\n{{.Context.Flags|FlagsToTwoColumns|FormatTwoColumns}}\n{{end -}}\n", sections.String(), 1)
	app.UsageTemplate(tmpl)
	app.UsageFuncs(template.FuncMap{"FlagsIn": func(title string, flags []*kingpin.FlagModel) []*kingpin.FlagModel {
		group := map[string]string{}
		for _, g := range flagGroups {
			for _, f := range g.flags {
				group[f] = g.title
			}
		}
		var out []*kingpin.FlagModel
		for _, f := range flags {
			if group[f.Name] == title {
				out = append(out, f)
			}
		}
		return out
	}})
}
