// Package regexcost bounds what a user's regular expression costs a byte
// of answer: every answer check and every dataset's expect passes it, so
// that one expression cannot take seconds of CPU per answer.
package regexcost

import (
	"fmt"
	"regexp/syntax"
)

// MaxInsts bounds an answer check's expression by the size of its
// compiled program: Go's RE2 engine is linear in the answer, but its cost
// per byte grows with the program. Measured here (an answer of 1 MB that
// never matches), about 6 ms a MB for each instruction: a.{0,1000}b, 2,004
// instructions, took 11.8 s a MB; (?i)paris, 7, took 17 ms
// (BenchmarkRegexCost: go test -run '^$' -bench RegexCost ./internal/regexcost). At this bound an answer of checks.max_answer_bytes'
// default (1 MiB) costs about a second at worst.
const MaxInsts = 200

// regexSecondsPerInstMB is the measured cost above: CPU seconds a MB of
// answer for each instruction, at worst.
const regexSecondsPerInstMB = 0.006

// MaxTotalInsts bounds every expression one answer is judged by, added
// up: a check set's matches and not_matches, its JSON Schema's patterns
// and patternProperties, its tools' parameters' ones. Each alone within
// MaxInsts, ten of them took 13 CPU seconds on one 0.9 MB answer; at this
// bound an answer of 1 MiB costs about 2.4 s at worst.
const MaxTotalInsts = 400

// Insts is the size of expr's compiled program (0 where it does not
// parse: regexp.Compile says why).
func Insts(expr string) int {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return 0
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0
	}
	return len(prog.Inst)
}

// SecondsPerMB is the CPU a MB of answer costs, at worst, to run
// expressions of insts instructions in all.
func SecondsPerMB(insts int) float64 { return float64(insts) * regexSecondsPerInstMB }

// Why says why expr costs too much a byte to run on answers, or "" when
// it does not (or does not parse: regexp.Compile says why).
func Why(expr string) string {
	if n := Insts(expr); n > MaxInsts {
		return fmt.Sprintf("compiles to %d instructions, over the %d allowed: about %.1f s of CPU a MB of answer at worst (a bounded repetition such as {0,1000} is one instruction or two per count); write it with * or +, or a smaller count",
			n, MaxInsts, float64(n)*regexSecondsPerInstMB)
	}
	return ""
}
