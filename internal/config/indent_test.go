package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// A syntax error names the line the user must fix, not the line where
// the parser gave up: each case is configs/demo.yaml with one slip (the
// findings: a dedented workload: reported at line 26, a comment; a tab
// at the line above it), and a key under the wrong parent says where it
// belongs.
func TestSyntaxErrorsNameTheLineToFix(t *testing.T) {
	demo, err := os.ReadFile("../../configs/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(demo), "\n")
	lineOf := func(prefix string, nth int) int {
		for i, l := range lines {
			if strings.HasPrefix(l, prefix) {
				if nth == 0 {
					return i
				}
				nth--
			}
		}
		t.Fatalf("no %q in demo.yaml", prefix)
		return 0
	}
	for _, c := range []struct {
		name string
		at   int
		slip func(string) string
		col  int
		want string
	}{
		{"a dedented key", lineOf("    workload:", 1), func(l string) string { return l[2:] }, 3, "where the items (- ...) of profiles are: indent it to column 5"},
		{"a tab", lineOf("      seed:", 0), func(l string) string { return "\t" + l[2:] }, 1, "a tab in the indentation"},
		{"a key under the wrong parent", lineOf("    slo:", 1), func(l string) string { return "  " + l }, 7, `"slo" is no field of workload but of profiles[1]: indent it to column 5`},
		{"a dedent to no block's column", lineOf("      output_tokens:", 0), func(l string) string { return l[1:] }, 6, "indented 5 spaces, as no block around it is"},
		// The first profile dedented one space: the line below it was
		// blamed ("indented 4 spaces, under a line that opens no block").
		{"a first item dedented", lineOf("  - name:", 1), func(l string) string { return l[1:] }, 2, "indented 1 space, where the other items of profiles are: indent it to column 3"},
		{"a later item dedented", lineOf("  - name:", 2), func(l string) string { return l[1:] }, 2, "indented 1 space, as no block around it is"},
		{"a key's value and a block under it", lineOf("    load:", 1), func(string) string { return "    load: {concurrency: 1}\n      requests: 5" }, 7, "under a line that opens no block"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mutated := append([]string(nil), lines...)
			mutated[c.at] = c.slip(lines[c.at])
			_, err := Parse("demo.yaml", []byte(strings.Join(mutated, "\n")))
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("no located error: %v", err)
			}
			e := es[0]
			line := c.at + 1 + strings.Count(mutated[c.at], "\n") // the slip's last line
			if e.Line != line || e.Column != c.col || !strings.Contains(e.Msg, c.want) {
				t.Errorf("line %d column %d: %s\nwant line %d column %d: %s", e.Line, e.Column, e.Msg, line, c.col, c.want)
			}
		})
	}
}

// Every YAML file of the repository that parses has a structure the line
// reader agrees with: it flags no line of a valid file.
func TestStructureBreakAcceptsValidFiles(t *testing.T) {
	var files []string
	_ = filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) && !strings.Contains(p, "/templates/") {
			files = append(files, p)
		}
		return nil
	})
	checked := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		valid := true
		for {
			var n yaml.Node
			if err := dec.Decode(&n); err != nil {
				valid = err.Error() == "EOF"
				break
			}
		}
		if !valid {
			continue
		}
		checked++
		if line, col, why, found := structureBreak(data); found {
			t.Errorf("%s:%d:%d: %s, yet YAML parses it", f, line, col, why)
		}
	}
	if checked < 30 {
		t.Errorf("only %d YAML files checked", checked)
	}
}
