package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// position is where a field's value was written, and the value when it
// is a scalar (to tell apart the fields of one line in flow style).
type position struct {
	line, col int
	// vcol and value are the value's column and, for a scalar, text.
	vcol  int
	value string
}

// locator knows where each field path of a file was written, so that
// validation, which works on decoded structs, can still point at a line.
type locator struct {
	file string
	pos  map[string]position
	errs Errors
	// lenient makes a secret that cannot be read (an unset variable, a
	// missing key file) a warning instead of an error: `tokenprobe check`
	// runs where the production secrets are not.
	lenient bool
	warns   Errors
	// kindLines are the lines where walk found a list or map in place of
	// a value: the decoder's own, less precise, errors there are dropped.
	kindLines map[int]bool
}

// walk records the position of every path under n and reports keys that
// no field of t accepts. It is the strict half of decoding: yaml.v3's own
// KnownFields names Go types, where users need the path they wrote.
func (l *locator) walk(n *yaml.Node, t reflect.Type, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if _, seen := l.pos[path]; !seen {
		l.pos[path] = position{line: n.Line, col: n.Column, vcol: n.Column, value: n.Value}
	}
	if want := scalarKind(t); want != "" && n.Kind != yaml.ScalarNode {
		// yaml.v3 says only "line N: cannot unmarshal !!seq into int",
		// which in flow style does not tell the fields of a line apart.
		pos := l.pos[path]
		l.errs = append(l.errs, &Error{File: l.file, Line: pos.line, Column: pos.col, Field: path,
			Msg: fmt.Sprintf("%s where %s belongs", nodeKind(n), want)})
		if l.kindLines == nil {
			l.kindLines = map[int]bool{}
		}
		l.kindLines[n.Line] = true
		return
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		// A type with its own decoding: its keys are still places its
		// errors can name ({env: ...} of a header).
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				l.pos[join(path, k.Value)] = position{line: k.Line, col: k.Column, vcol: v.Column, value: v.Value}
			}
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return // the decoder reports the type mismatch
		}
		fields := map[string]reflect.StructField{}
		yamlFields(t, fields)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			child := join(path, k.Value)
			f, ok := fields[k.Value]
			if !ok {
				msg := "unknown field" + suggest(k.Value, fields)
				if hint, ok := hints[k.Value]; ok {
					msg = hint
				}
				l.errs = append(l.errs, &Error{File: l.file, Line: k.Line, Column: k.Column, Field: child, Msg: msg})
				continue
			}
			l.pos[child] = position{line: k.Line, col: k.Column, vcol: v.Column, value: v.Value}
			l.walk(v, f.Type, child)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, item := range n.Content {
			l.walk(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			child := join(path, k.Value)
			l.pos[child] = position{line: k.Line, col: k.Column, vcol: n.Content[i+1].Column, value: n.Content[i+1].Value}
			l.walk(n.Content[i+1], t.Elem(), child)
		}
	}
}

var durationType = reflect.TypeFor[Duration]()

// scalarKind names what a value of type t is written as, for a type
// written as one scalar; "" for others (lists, maps, structs, and the
// types that decode more than one shape themselves).
func scalarKind(t reflect.Type) string {
	if t == durationType {
		return "a duration (500ms, 30s, 5m)"
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return ""
	}
	switch t.Kind() {
	case reflect.String:
		return "a text"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return ""
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a map"
	}
	return "a value"
}

// hints answer unknown keys that are common mistakes with what to do.
var hints = map[string]string{
	"api_key": "secrets are never written inline: use api_key_file or api_key_env",
	"url":     `unknown field (did you mean "base_url"?)`,
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// yamlFields collects the YAML keys of struct t, inline fields included.
func yamlFields(t reflect.Type, out map[string]reflect.StructField) {
	for i := range t.NumField() {
		f := t.Field(i)
		parts := strings.Split(f.Tag.Get("yaml"), ",")
		tag := parts[0]
		if slices.Contains(parts[1:], "inline") {
			yamlFields(f.Type, out)
			continue
		}
		if tag == "-" || !f.IsExported() {
			continue
		}
		if tag == "" {
			tag = strings.ToLower(f.Name)
		}
		out[tag] = f
	}
}

// suggest names the closest known field when a key looks like a typo.
func suggest(key string, fields map[string]reflect.StructField) string {
	best, bestD := "", 3
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if d := EditDistance(key, name); d < bestD {
			best, bestD = name, d
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return fmt.Sprintf(" (known fields: %s)", strings.Join(names, ", "))
}

// EditDistance is the Levenshtein distance of a and b: how a mistyped
// name is matched to a known one, for fields and flags alike.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// at locates path, or the nearest enclosing path that was written.
func (l *locator) at(path string) (string, position) {
	for p := path; ; {
		if pos, ok := l.pos[p]; ok {
			return path, pos
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			return path, position{}
		}
		p = p[:i]
	}
}

// errf records a validation error at path.
func (l *locator) errf(path, format string, args ...any) {
	field, pos := l.at(path)
	l.errs = append(l.errs, &Error{File: l.file, Line: pos.line, Column: pos.col, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// missing records a secret that cannot be read at path: an error, or in
// lenient mode a warning.
func (l *locator) missing(path, format string, args ...any) {
	if !l.lenient {
		l.errf(path, format, args...)
		return
	}
	field, pos := l.at(path)
	l.warns = append(l.warns, &Error{File: l.file, Line: pos.line, Column: pos.col, Field: field, Msg: fmt.Sprintf(format, args...)})
}

var (
	yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+)(?: column (\d+))?: (.*)$`)
	// yamlValue is the value a yaml.v3 type error quotes.
	yamlValue = regexp.MustCompile("cannot unmarshal !!\\w+ `([^`]*)`")
)

// decodeError turns a yaml.v3 error into located Errors, naming the field
// written on that line where there is one.
func (l *locator) decodeError(err error) {
	var msgs []string
	if te := (*yaml.TypeError)(nil); errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	for _, m := range msgs {
		e := &Error{File: l.file, Msg: strings.TrimPrefix(m, "yaml: ")}
		if sm := yamlLine.FindStringSubmatch(m); sm != nil {
			e.Line, _ = strconv.Atoi(sm[1])
			if l.kindLines[e.Line] {
				continue // walk said it, at the field
			}
			col, _ := strconv.Atoi(sm[2])
			e.Msg = sm[3]
			value := ""
			if vm := yamlValue.FindStringSubmatch(e.Msg); vm != nil {
				value = vm[1]
			}
			e.Field, e.Column = l.fieldOnLine(e.Line, col, value)
		}
		l.errs = append(l.errs, e)
	}
}

// fieldOnLine returns the field whose value was written at line and
// column (a decoder of our own names both), else the one on the line
// whose value is value (yaml.v3 quotes it), else the deepest path on the
// line: in flow style (`slo: {ttft: 500ms, itl: fast}`) a line holds
// several fields, and the first is not always the culprit.
func (l *locator) fieldOnLine(line, col int, value string) (string, int) {
	best, bestCol := "", 0
	better := func(p string) bool { return len(p) > len(best) || len(p) == len(best) && p < best }
	for _, exact := range []func(position) bool{
		func(pos position) bool { return col > 0 && pos.vcol == col },
		func(pos position) bool { return value != "" && pos.value == value },
		func(position) bool { return true },
	} {
		for p, pos := range l.pos {
			if pos.line == line && exact(pos) && better(p) {
				best, bestCol = p, pos.col
			}
		}
		if best != "" {
			return best, bestCol
		}
	}
	return best, bestCol
}

// misindented points a syntax error that yaml.v3 reports on the line of
// the block it was parsing ("did not find expected '-' indicator", often
// line 1) at the line that broke it: the first line after it that goes
// back to an indentation no line above it had, the usual slip.
func misindented(data []byte, e *Error) {
	if !strings.Contains(e.Msg, "did not find expected") {
		return
	}
	levels := map[int]bool{0: true}
	prev, prevItem := 0, false
	for i, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		indent := len(line) - len(trimmed)
		// Back to a level no line above had, or under a sequence item
		// short of its fields' column.
		if i+1 > e.Line && (indent < prev && !levels[indent] || prevItem && indent == prev+1) {
			e.Line, e.Column, e.Field = i+1, indent+1, ""
			e.Msg = fmt.Sprintf("indented %d spaces, as no block above it is (%s)", indent, e.Msg)
			return
		}
		levels[indent] = true
		prevItem = strings.HasPrefix(trimmed, "- ")
		if prevItem { // a sequence item's fields sit after its dash
			levels[indent+2] = true
		}
		prev = indent
	}
}
