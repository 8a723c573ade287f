package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"github.com/alecthomas/kingpin/v2"

	"github.com/tokenprobe/tokenprobe/internal/config"
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
	{"aiperf's names for the flags above", []string{"endpoint-type", "request-count", "warmup-request-count", "synthetic-input-tokens-mean",
		"synthetic-input-tokens-stddev", "isl", "isl-stddev", "output-tokens-mean", "output-tokens-stddev", "osl", "osl-stddev", "benchmark-duration", "artifact-dir", "extra-inputs",
		"input-file", "random-seed", "request-timeout-seconds", "streaming"}},
}

var unknownFlag = regexp.MustCompile(`unknown long flag '--([^']+)'`)

// didYouMean is ", did you mean --x?" for an unknown flag that is a
// known one's near miss (edit distance 3 or less, or a prefix of it).
func didYouMean(app *kingpin.Application, args []string, err error) string {
	m := unknownFlag.FindStringSubmatch(err.Error())
	if m == nil {
		return ""
	}
	flags := app.Model().Flags
	for _, c := range app.Model().Commands {
		if slices.Contains(args, c.Name) {
			flags = append(flags, c.Flags...)
		}
	}
	best, bestD := "", 4
	for _, f := range flags {
		d := config.EditDistance(m[1], f.Name)
		if strings.HasPrefix(f.Name, m[1]) {
			d = min(d, 1)
		}
		if d < bestD || d == bestD && f.Name < best {
			best, bestD = f.Name, d
		}
	}
	if best == "" {
		return ""
	}
	return ", did you mean --" + best + "?"
}

// groupedUsage is kingpin's default usage with the flags under the
// headings of flagGroups.
func groupedUsage(app *kingpin.Application) {
	var sections strings.Builder
	for _, g := range flagGroups {
		sections.WriteString(`{{with FlagsIn "` + g.title + `" .Context.Flags .Context.SelectedCommand}}` + g.title + ":\n{{.|FlagsToTwoColumns|FormatTwoColumns}}\n{{end -}}\n")
	}
	sections.WriteString(`{{with FlagsIn "" .Context.Flags .Context.SelectedCommand}}Flags:` + "\n{{.|FlagsToTwoColumns|FormatTwoColumns}}\n{{end -}}\n")
	tmpl := strings.Replace(kingpin.DefaultUsageTemplate, "{{if .Context.Flags -}}\nFlags:\n{{.Context.Flags|FlagsToTwoColumns|FormatTwoColumns}}\n{{end -}}\n", sections.String(), 1)
	app.UsageTemplate(tmpl)
	app.UsageFuncs(template.FuncMap{"FlagsIn": func(title string, flags []*kingpin.FlagModel, cmd *kingpin.CmdModel) []*kingpin.FlagModel {
		// The groups are the run command's: another command's flag of the
		// same name (sim's --model) is under "Flags".
		group := map[string]string{}
		if cmd != nil && cmd.FullCommand == "run" {
			for _, g := range flagGroups {
				for _, f := range g.flags {
					group[f] = g.title
				}
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

var (
	missingUnit = regexp.MustCompile(`missing unit in duration "([^"]*)"`)
	badNumber   = regexp.MustCompile(`strconv\.Parse(Float|Int|Uint|Bool): parsing "([^"]*)"`)
)

// flagValueError names the flag of a value kingpin could not parse,
// which its own message does not: a duration without a unit (`--duration
// 5` reads as seconds in aiperf), or a number that is not one (`--isl
// 512,50`).
func flagValueError(args []string, err error) error {
	value, kind := "", ""
	if m := missingUnit.FindStringSubmatch(err.Error()); m != nil {
		value, kind = m[1], "duration"
	} else if m := badNumber.FindStringSubmatch(err.Error()); m != nil {
		value, kind = m[2], m[1]
	} else {
		return err
	}
	for i, a := range args {
		name, v, inline := strings.Cut(a, "=")
		if !inline && i+1 < len(args) {
			v = args[i+1]
		}
		if !strings.HasPrefix(name, "-") || v != value {
			continue
		}
		switch {
		case kind == "duration":
			return fmt.Errorf("%s: %q has no unit: give one, such as 500ms, 30s or 5m (or --benchmark-duration SECONDS)", name, v)
		case spreadFlag[name] != "" && strings.Contains(v, ","):
			return fmt.Errorf("%s: %q is not a number: %s takes the mean; give the spread with %s", name, v, name, spreadFlag[name])
		case kind == "Bool":
			return fmt.Errorf("%s: %q is not true or false", name, v)
		default:
			return fmt.Errorf("%s: %q is not a number", name, v)
		}
	}
	return err
}

// spreadFlag is, for aiperf's length flags, the flag of their spread.
var spreadFlag = map[string]string{
	"--isl": "--isl-stddev (or --input-tokens MEAN,STDDEV)", "--synthetic-input-tokens-mean": "--synthetic-input-tokens-stddev (or --input-tokens MEAN,STDDEV)",
	"--osl": "--osl-stddev (or --output-tokens MEAN,STDDEV)", "--output-tokens-mean": "--output-tokens-stddev (or --output-tokens MEAN,STDDEV)",
}
