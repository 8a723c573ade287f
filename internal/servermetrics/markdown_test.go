package servermetrics

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the table in docs/MEASUREMENT.md")

const (
	docs       = "../../docs/MEASUREMENT.md"
	begin, end = "<!-- server metrics table: make docs -->\n", "<!-- end of the server metrics table -->\n"
)

// docs/MEASUREMENT.md shows the table the code reads servers with.
func TestDocsHoldTheTable(t *testing.T) {
	b, err := os.ReadFile(docs)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i, j := strings.Index(text, begin), strings.Index(text, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q", docs, begin, end)
	}
	want := text[:i+len(begin)] + Markdown() + text[j:]
	if *update {
		if err := os.WriteFile(docs, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if text != want {
		t.Fatal("docs/MEASUREMENT.md's server metrics table is out of date: run make docs")
	}
}
