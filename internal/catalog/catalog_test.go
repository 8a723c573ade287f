package catalog

import (
	"flag"
	"os"
	"regexp"
	"slices"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/METRICS.md")

func TestDocsMatchTheCatalog(t *testing.T) {
	const path = "../../docs/METRICS.md"
	want := Markdown()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("docs/METRICS.md is out of date: run make docs")
	}
}

var validName = regexp.MustCompile(`^tokenprobe_[a-z_]+$`)

func TestCatalogIsWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range All {
		if !validName.MatchString(m.Name) || seen[m.Name] || m.Help == "" || m.Unit == "" {
			t.Errorf("%+v", m)
		}
		seen[m.Name] = true
		switch m.Type {
		case Counter:
			if !regexp.MustCompile(`_total$`).MatchString(m.Name) {
				t.Errorf("counter %s does not end in _total", m.Name)
			}
		case Histogram:
			if !slices.IsSorted(m.Buckets) || len(m.Buckets) == 0 {
				t.Errorf("%s buckets %v", m.Name, m.Buckets)
			}
		}
	}
	// The usual SLO thresholds read straight off a bucket.
	for _, th := range []float64{0.2, 0.5, 1, 2} {
		if !slices.Contains(TTFTBuckets, th) {
			t.Errorf("TTFT buckets lack %v", th)
		}
	}
	for _, th := range []float64{0.02, 0.05, 0.1} {
		if !slices.Contains(TokenGapBuckets, th) {
			t.Errorf("token gap buckets lack %v", th)
		}
	}
	for _, th := range []float64{1, 2, 5, 10, 30, 60} {
		if !slices.Contains(DurationBuckets, th) {
			t.Errorf("duration buckets lack %v", th)
		}
	}
}
