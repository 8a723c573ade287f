package dashboards

import (
	"flag"
	"os"
	"regexp"
	"strconv"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the README's count of dashboard queries")

// The README's count of the dashboards' queries is the dashboards' own:
// `make docs` writes it, and this fails while it is stale (the finding:
// "all 72 queries" where there were 79).
func TestReadmeCountsTheQueries(t *testing.T) {
	n := 0
	for _, exprs := range queries(t) {
		n += len(exprs)
	}
	const path = "../README.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	count := regexp.MustCompile(`all \d+ queries pass`)
	want := "all " + strconv.Itoa(n) + " queries pass"
	if *update {
		b = count.ReplaceAll(b, []byte(want))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := count.Find(b); string(got) != want {
		t.Errorf("README.md says %q, the dashboards have %d queries: run make docs", got, n)
	}
}
