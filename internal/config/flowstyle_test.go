package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// Every scalar in a one-line {...} map of the shipped examples, made
// the wrong type in turn, is blamed on its own key, at the key's line
// and column: the flow style the examples use everywhere locates its
// errors as the block style does.
func TestFlowStyleErrorsNameTheirKeyInEveryExample(t *testing.T) {
	files, _ := filepath.Glob("../../configs/*.yaml")
	if len(files) == 0 {
		t.Fatal("no configs/*.yaml")
	}
	for _, v := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "NIM_API_KEY", "AZURE_OPENAI_API_KEY"} {
		t.Setenv(v, "sk-flow-style-test")
	}
	tried := 0
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(src, &doc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		lines := strings.SplitAfter(string(src), "\n")
		for _, s := range flowScalars(&doc, "") {
			if strings.HasPrefix(s.path, "extra_body.") {
				continue // free-form JSON: a list is as good as a scalar there
			}
			// A list where a scalar belongs: wrong for every scalar field.
			line := lines[s.value.Line-1]
			col := s.value.Column - 1
			if s.value.Style != 0 || !strings.HasPrefix(line[col:], s.value.Value) {
				continue // quoted: left alone, its text is not where Column points
			}
			mutated := append([]string{}, lines...)
			mutated[s.value.Line-1] = line[:col] + "[1, 2]" + line[col+len(s.value.Value):]
			_, err := Parse(filepath.Base(file), []byte(strings.Join(mutated, "")))
			tried++
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Errorf("%s: %s made a list: %v, want a located error", file, s.path, err)
				continue
			}
			e := errs[0]
			where := fmt.Sprintf(":%d:%d: ", s.key.Line, s.key.Column)
			if !strings.Contains(e.Error(), where) || !strings.HasSuffix(e.Field, s.path) {
				t.Errorf("%s: %s made a list: %q, want it at %s naming %s", file, s.path, e.Error(), where, s.path)
			}
		}
	}
	if tried < 50 {
		t.Errorf("only %d flow-style values tried: the walk found too few", tried)
	}
}

type flowScalar struct {
	path       string // the key's path, ending in the key: slo.ttft
	key, value *yaml.Node
}

// flowScalars lists the scalar values of every flow-style mapping under
// n, each with the path of its key relative to the nearest list item.
func flowScalars(n *yaml.Node, path string) []flowScalar {
	var out []flowScalar
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			out = append(out, flowScalars(c, "")...)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			if n.Style&yaml.FlowStyle != 0 && v.Kind == yaml.ScalarNode {
				out = append(out, flowScalar{p, k, v})
			}
			out = append(out, flowScalars(v, p)...)
		}
	}
	return out
}
