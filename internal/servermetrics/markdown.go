package servermetrics

import (
	"fmt"
	"strings"
)

// Markdown renders Table as the table docs/MEASUREMENT.md shows (`make
// docs` writes it there; a test keeps the two equal).
func Markdown() string {
	kinds := []Kind{VLLM, SGLang, TGI, LlamaCpp, NIM, TRTLLM, Dynamo}
	var b strings.Builder
	b.WriteString("| read as |")
	for _, k := range kinds {
		fmt.Fprintf(&b, " %s |", k)
	}
	b.WriteString("\n| --- |")
	b.WriteString(strings.Repeat(" --- |", len(kinds)))
	b.WriteString("\n")
	for _, r := range Roles() {
		fmt.Fprintf(&b, "| %s |", r)
		for _, k := range kinds {
			var names []string
			for _, s := range Table[k][r] {
				n := "`" + s.Name
				for l, v := range s.Match {
					n += fmt.Sprintf(`{%s="%s"}`, l, v)
				}
				n += "`"
				if s.Note != "" {
					n += " (" + s.Note + ")"
				}
				names = append(names, n)
			}
			if len(names) == 0 {
				names = []string{"-"}
			}
			b.WriteString(" " + strings.Join(names, ", then ") + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("| TTFT clock |")
	for _, k := range kinds {
		c := Clocks[k]
		from := c.TTFTFrom
		if from == "" {
			from = "-"
		}
		fmt.Fprintf(&b, " %s (%s) |", from, c.Source)
	}
	b.WriteString("\n| population of the means |")
	for _, k := range kinds {
		p := "-"
		if r := Clocks[k].Population; r != "" {
			p = "the count of " + string(r)
		}
		b.WriteString(" " + p + " |")
	}
	b.WriteString("\n")
	return b.String()
}
