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

// The outcomes of a rule on a pair of runs.
const (
	Passed = "passed"
	Failed = "failed"
	// Undecided: the change's interval, widened by what the probe's own
	// delay could have moved it, holds the threshold.
	Undecided = "not_enough_evidence"
)

// Decision is one rule's verdict on one pair of runs.
type Decision struct {
	Rule Rule
	Key  string
	Row  Row
	// Outcome is Passed (the widened interval lies wholly on the right
	// side of the threshold), Failed (wholly on the wrong side), or
	// Undecided.
	Outcome string
	// Low and High are the change's 95% interval widened by the probe's
	// delay in either run (Row.BiasLow, Row.BiasHigh).
	Low, High float64
	// RequestsToDecide is, for an undecided rule, about how many
	// requests each run would need for the interval to leave the
	// threshold if the change stayed as measured; -1 when no number would
	// (Why says why).
	RequestsToDecide int
	Why              string
}

// maxRequests bounds an estimate of the requests that would decide a
// rule: past it, none practically would.
const maxRequests = 10_000_000

// Check decides every rule on rows: a rule fails only when the whole
// interval of the change, widened by what the probe's own delay in either
// run could have moved it, lies past its threshold, and passes only when
// it lies wholly within; otherwise there is not enough evidence, and the
// decision says how many requests would give it.
func Check(key string, rows []Row, rules []Rule) []Decision {
	var out []Decision
	for _, rule := range rules {
		for _, row := range rows {
			if row.Label() != rule.Label {
				continue
			}
			out = append(out, decide(key, row, rule))
		}
	}
	return out
}

func decide(key string, row Row, rule Rule) Decision {
	d := Decision{Rule: rule, Key: key, Row: row, Outcome: Undecided, Low: row.Low - row.BiasLow, High: row.High + row.BiasHigh}
	t, c := rule.Threshold, row.Change
	if math.IsNaN(c) || math.IsNaN(row.Low) || math.IsNaN(row.High) {
		d.RequestsToDecide = -1
		d.Why = "one side has no values to compare"
		return d
	}
	// worse is past the threshold on the rule's side; within on the other.
	worse := func(v float64) bool { return rule.Above && v > t || !rule.Above && v < t }
	loWorse, hiWorse := worse(d.Low), worse(d.High)
	switch {
	case loWorse && hiWorse:
		d.Outcome = Failed
		return d
	case !loWorse && !hiWorse:
		d.Outcome = Passed
		return d
	}
	// Which way more requests would decide it if the change stayed: the
	// raw interval's half-width on that side shrinks as the square root
	// of the requests; the probe's bias does not.
	var half, gap float64
	failing := worse(c)
	switch {
	case failing && rule.Above:
		half, gap = c-row.Low, c-t-row.BiasLow
	case failing:
		half, gap = row.High-c, t-c-row.BiasHigh
	case rule.Above:
		half, gap = row.High-c, t-c-row.BiasHigh
	default:
		half, gap = c-row.Low, c-t-row.BiasLow
	}
	n := float64(min(row.BaseN, row.NewN))
	switch {
	case gap <= 0 && (row.BiasLow > 0 || row.BiasHigh > 0) && math.Abs(c-t) > 0:
		d.RequestsToDecide = -1
		d.Why = "the probe's own delay could move the change past the threshold: no number of requests decides it where the probe is starved"
	case gap <= 0 || n <= 0 || math.IsInf(gap, 0):
		d.RequestsToDecide = -1
		d.Why = "the change sits on the threshold: no number of requests decides it"
	default:
		need := n * (half / gap) * (half / gap)
		if need > maxRequests {
			d.RequestsToDecide = -1
			d.Why = "over ten million requests a run would decide it"
		} else {
			d.RequestsToDecide = max(int(math.Ceil(need)), int(n)+1)
			d.Why = fmt.Sprintf("about %d requests a run would decide it if the change stayed %s", d.RequestsToDecide, pct(c))
		}
	}
	return d
}

// Line is the decision in one line, as the console and the page say it.
func (d Decision) Line() string {
	what := fmt.Sprintf("%s %s is %s (95%% interval [%s, %s]", d.Key, d.Row.Label(), pct(d.Row.Change), pct(d.Low), pct(d.High))
	if d.Row.BiasLow > 0 || d.Row.BiasHigh > 0 {
		what += ", widened by the probe's own delay"
	}
	what += ")"
	switch d.Outcome {
	case Failed:
		return fmt.Sprintf("FAILED %s: %s, wholly past it", d.Rule, what)
	case Passed:
		return fmt.Sprintf("passed %s: %s, wholly within it", d.Rule, what)
	}
	return fmt.Sprintf("NOT ENOUGH EVIDENCE %s: %s, holding the threshold: %s", d.Rule, what, d.Why)
}

// Text writes the rows of one pair of runs as a table.
func Text(w io.Writer, key string, base, next *Run, rows []Row) {
	fmt.Fprintf(w, "%s\n  base %s (%d requests)\n  new  %s (%d requests)\n", key, base.Dir, len(base.Records), next.Dir, len(next.Records))
	for _, side := range []struct {
		name string
		run  *Run
	}{{"base", base}, {"new", next}} {
		if p := side.run.Summary.Probe; p != nil && p.Starved {
			fmt.Fprintf(w, "  the probe was starved in %s (%s): the gate widens each interval by what its delay could have moved the change\n", side.name, p.Why)
		}
	}
	fmt.Fprintln(w)
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
	ExitTripped  = 1 // a --fail-on rule failed
	ExitBadInput = 2
	// ExitUndecided: no rule failed, but one had not enough evidence
	// (--not-enough-evidence=pass or =fail maps it to 0 or 1).
	ExitUndecided = 4
)

// Main compares the runs under baseDir and newDir, pairing them by
// profile and endpoint, writes the tables and the rules' decisions to w,
// and returns the exit code; undecided is the code of a gate with not
// enough evidence and no failure.
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
	var decisions []Decision
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
		decisions = append(decisions, Check(b.Key(), rows, rules)...)
	}
	for key := range byKey {
		fmt.Fprintf(w, "%s: only in %s\n\n", key, newDir)
	}
	if paired == 0 {
		fmt.Fprintf(w, "no run of %s has a run of the same profile and endpoint in %s\n", baseDir, newDir)
		return ExitBadInput
	}
	if htmlPath != "" {
		if err := writeHTML(htmlPath, pairs, Gate{Rules: rules, Decisions: decisions}); err != nil {
			fmt.Fprintln(w, err)
			return ExitBadInput
		}
		fmt.Fprintf(w, "wrote %s\n", htmlPath)
	}
	failed, undecided := 0, 0
	for _, d := range decisions {
		switch d.Outcome {
		case Failed:
			failed++
		case Undecided:
			undecided++
		}
		if d.Outcome != Passed {
			fmt.Fprintln(w, d.Line())
		}
	}
	switch {
	case failed > 0:
		return ExitTripped
	case undecided > 0:
		fmt.Fprintf(w, "not enough evidence: %d of %d decisions of %s could not tell a change past the threshold from the runs' noise (exit %d)\n", undecided, len(decisions), failOn, o.undecidedCode())
		return o.undecidedCode()
	case len(rules) > 0:
		fmt.Fprintf(w, "passed: every change's whole 95%% interval is within %s\n", failOn)
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
