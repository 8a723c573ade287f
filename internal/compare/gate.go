package compare

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/rundir"
)

// Rule is one --fail-on condition: a metric's change beyond a threshold,
// and beyond the runs' noise.
type Rule struct {
	Label     string  // ttft.p95, goodput
	Above     bool    // ">": fail on a rise; "<": on a fall
	Threshold float64 // relative: 0.10 for +10%
	text      string
}

func (r Rule) String() string { return r.text }

// Labels lists every metric a rule may name.
func Labels() []string {
	var out []string
	for _, pr := range perRequest {
		for _, st := range Stats {
			out = append(out, pr.name+"."+st)
		}
	}
	for _, r := range rates {
		out = append(out, r.Name)
	}
	return out
}

// ParseRules reads "ttft.p95>+10%,goodput<-5%".
func ParseRules(s string) ([]Rule, error) {
	known := map[string]bool{}
	for _, l := range Labels() {
		known[l] = true
	}
	var out []Rule
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		i := strings.IndexAny(part, "<>")
		if i <= 0 {
			return nil, fmt.Errorf("%q: give METRIC>+N%% or METRIC<-N%%, such as ttft.p95>+10%%", part)
		}
		r := Rule{Label: strings.TrimSpace(part[:i]), Above: part[i] == '>', text: part}
		if !known[r.Label] {
			return nil, fmt.Errorf("%q: no metric %q (one of %s)", part, r.Label, strings.Join(Labels(), ", "))
		}
		num := strings.TrimSpace(part[i+1:])
		if !strings.HasSuffix(num, "%") {
			return nil, fmt.Errorf("%q: the threshold is a relative change in percent, such as +10%%", part)
		}
		v, err := strconv.ParseFloat(strings.TrimSuffix(num, "%"), 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %q is not a percentage", part, num)
		}
		r.Threshold = v / 100
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%q: no rule", s)
	}
	return out, nil
}

// Tripped is a rule a pair of runs broke.
type Tripped struct {
	Rule Rule
	Key  string
	Row  Row
}

// Check returns the rules broken by rows: a change past the threshold
// whose whole 95% interval lies past zero too, so that the runs' own
// noise never fails a gate.
func Check(key string, rows []Row, rules []Rule) []Tripped {
	var out []Tripped
	for _, rule := range rules {
		for _, row := range rows {
			if row.Label() != rule.Label || math.IsNaN(row.Change) || !row.Significant {
				continue
			}
			if rule.Above && row.Change > rule.Threshold || !rule.Above && row.Change < rule.Threshold {
				out = append(out, Tripped{Rule: rule, Key: key, Row: row})
			}
		}
	}
	return out
}

// Text writes the rows of one pair of runs as a table.
func Text(w io.Writer, key string, base, next *Run, rows []Row) {
	fmt.Fprintf(w, "%s\n  base %s (%d requests)\n  new  %s (%d requests)\n\n", key, base.Dir, len(base.Records), next.Dir, len(next.Records))
	fmt.Fprintf(w, "  %-22s %14s %14s %9s %20s  %s\n", "metric", "base", "new", "change", "95% interval", "")
	for _, r := range rows {
		verdict := "noise"
		switch {
		case math.IsNaN(r.Low):
			verdict = "n/a"
		case r.Significant && (r.Change > 0) == r.HigherIsBetter:
			verdict = "better"
		case r.Significant:
			verdict = "WORSE"
		}
		fmt.Fprintf(w, "  %-22s %14s %14s %9s %20s  %s\n", r.Label(), value(r.Base, r.Unit), value(r.New, r.Unit),
			pct(r.Change), "["+pct(r.Low)+", "+pct(r.High)+"]", verdict)
	}
	fmt.Fprintln(w)
}

func value(v float64, unit string) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	switch unit {
	case "%":
		return fmt.Sprintf("%.1f%%", v)
	case "ms":
		return fmt.Sprintf("%.2f ms", v)
	}
	return fmt.Sprintf("%.3f %s", v, unit)
}

func pct(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", 100*v)
}

// Exit codes of `tokenprobe compare`.
const (
	ExitOK       = 0
	ExitTripped  = 1 // a --fail-on rule broke
	ExitBadInput = 2
)

// Main compares the runs under baseDir and newDir, pairing them by
// profile and endpoint, writes the tables and the broken rules to w, and
// returns the exit code.
func Main(w io.Writer, baseDir, newDir, failOn, htmlPath string, o Options) int {
	var rules []Rule
	if failOn != "" {
		var err error
		if rules, err = ParseRules(failOn); err != nil {
			fmt.Fprintf(w, "--fail-on %v\n", err)
			return ExitBadInput
		}
	}
	var base, news []*Run
	for _, side := range []struct {
		dir  *string
		runs *[]*Run
	}{{&baseDir, &base}, {&newDir, &news}} {
		dir, note, err := rundir.Find(*side.dir)
		if err == nil {
			*side.runs, err = rundir.Load(dir)
		}
		if err != nil {
			fmt.Fprintln(w, err)
			return ExitBadInput
		}
		if note != "" {
			fmt.Fprintln(w, note)
		}
		*side.dir = dir
	}
	byKey := map[string]*Run{}
	for _, r := range news {
		byKey[r.Key()] = r
	}
	var tripped []Tripped
	var pairs []Pair
	paired := 0
	for _, b := range base {
		n := byKey[b.Key()]
		if n == nil {
			fmt.Fprintf(w, "%s: only in %s\n\n", b.Key(), baseDir)
			continue
		}
		delete(byKey, b.Key())
		paired++
		rows := Compare(b, n, o)
		Text(w, b.Key(), b, n, rows)
		pairs = append(pairs, Pair{Key: b.Key(), Base: b, New: n, Rows: rows})
		tripped = append(tripped, Check(b.Key(), rows, rules)...)
	}
	for key := range byKey {
		fmt.Fprintf(w, "%s: only in %s\n\n", key, newDir)
	}
	if paired == 0 {
		fmt.Fprintf(w, "no run of %s has a run of the same profile and endpoint in %s\n", baseDir, newDir)
		return ExitBadInput
	}
	if htmlPath != "" {
		if err := writeHTML(htmlPath, pairs, Gate{Rules: rules, Tripped: tripped}); err != nil {
			fmt.Fprintln(w, err)
			return ExitBadInput
		}
		fmt.Fprintf(w, "wrote %s\n", htmlPath)
	}
	for _, t := range tripped {
		fmt.Fprintf(w, "FAILED %s: %s %s is %s (95%% interval [%s, %s], beyond the runs' noise)\n",
			t.Rule, t.Key, t.Row.Label(), pct(t.Row.Change), pct(t.Row.Low), pct(t.Row.High))
	}
	if len(tripped) > 0 {
		return ExitTripped
	}
	if len(rules) > 0 {
		fmt.Fprintf(w, "passed: no change beyond %s and the runs' noise\n", failOn)
	}
	return ExitOK
}

func writeHTML(path string, pairs []Pair, g Gate) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := HTML(f, pairs, g, time.Now()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
