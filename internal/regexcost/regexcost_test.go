package regexcost

import (
	"regexp"
	"strings"
	"testing"
)

// The cost MaxInsts rests on: each expression run over 1 MB of an
// answer it never matches (its worst case), with its program's size.
//
//	go test -run '^$' -bench RegexCost ./internal/regexcost
func BenchmarkRegexCost(b *testing.B) {
	answer := strings.Repeat("a", 1<<20)
	for _, expr := range []string{`(?i)paris`, `a.{0,100}b`, `a.{0,1000}b`} {
		re := regexp.MustCompile(expr)
		b.Run(expr, func(b *testing.B) {
			b.SetBytes(int64(len(answer)))
			for b.Loop() {
				re.MatchString(answer)
			}
		})
	}
}

// The bound refuses the costly expression and takes the usual ones.
func TestRegexCost(t *testing.T) {
	for expr, refused := range map[string]bool{`(?i)paris`: false, `\d{3}-\d{4}`: false, `^\s*\{.*\}\s*$`: false, `a.{0,100}b`: true, `a.{0,1000}b`: true} {
		if got := Why(expr) != ""; got != refused {
			t.Errorf("%s: refused %v, want %v (%s)", expr, got, refused, Why(expr))
		}
	}
}
