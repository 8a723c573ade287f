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
	// blocks are the mappings walk is inside, outermost first: a key
	// unknown where it is written but a field of one of them was
	// indented under the wrong parent.
	blocks []block
}

// block is a mapping walk is inside: its path, its fields, and the column
// its keys are written at.
type block struct {
	path   string
	fields map[string]reflect.StructField
	col    int
}

// belongsAbove is the nearest enclosing mapping, other than the one
// being walked, that has a field named key.
func (l *locator) belongsAbove(key string) *block {
	for i := len(l.blocks) - 2; i >= 0; i-- {
		if _, ok := l.blocks[i].fields[key]; ok {
			return &l.blocks[i]
		}
	}
	return nil
}

// lastPart is the last field of a path: workload of profiles[1].workload.
func lastPart(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[i+1:]
	}
	return orTop(path)
}

func orTop(path string) string {
	if path == "" {
		return "the file's top level"
	}
	return path
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
		if len(n.Content) > 0 {
			l.blocks = append(l.blocks, block{path: path, fields: fields, col: n.Content[0].Column})
			defer func() { l.blocks = l.blocks[:len(l.blocks)-1] }()
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			child := join(path, k.Value)
			f, ok := fields[k.Value]
			if !ok {
				msg := "unknown field" + suggest(k.Value, fields)
				if hint, ok := hints[k.Value]; ok {
					msg = hint
				}
				if up := l.belongsAbove(k.Value); up != nil {
					msg = fmt.Sprintf("%q is no field of %s but of %s: indent it to column %d, as %s's fields are", k.Value, lastPart(path), orTop(up.path), up.col, orTop(up.path))
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

// misindented points a syntax error at the line the user must fix: the
// first line whose indentation breaks the file's structure (a tab; a
// dedent to a column no enclosing block is at; a key among a sequence's
// items; a line indented under one that opens no block). yaml.v3 reports
// where its parser gave up, which is often the start of the enclosing
// block (a `workload:` dedented on line 47 was reported at line 26, a
// comment) or the line before a tab. Where no line breaks the structure
// the parser's line stands.
func misindented(data []byte, e *Error) {
	if !strings.Contains(e.Msg, "did not find expected") && !strings.Contains(e.Msg, "tab") &&
		!strings.Contains(e.Msg, "mapping values are not allowed") && !strings.Contains(e.Msg, "could not find expected") {
		return
	}
	if line, col, why, ok := structureBreak(data); ok {
		e.Line, e.Column, e.Field = line, col, ""
		e.Msg = why + " (the YAML parser: " + e.Msg + ")"
	}
}

// structureBreak finds the first line of data whose indentation breaks
// its block structure, with why. It reads lines, not YAML: a block
// scalar's lines and a flow collection's continuation lines are skipped.
// Its cost is one pass over the file.
func structureBreak(data []byte) (line, col int, why string, found bool) {
	type open struct {
		indent  int
		seq     bool // a sequence's items sit at indent
		compact bool // a sequence at its key's own indent
		key     string
	}
	var stack []open
	opener, openerKey := true, "" // the line above opens a block (key: alone, or - alone)
	scalarAbove, depth := -1, 0
	// firstItem is the line above when it was the first item of a new
	// sequence: its line, indentation, and the indentation and key of the
	// block it is in (line -1 otherwise).
	type itemLine struct {
		line, indent, parent int
		key                  string
	}
	firstItem := itemLine{line: -1}
	lines := strings.Split(string(data), "\n")
	for i, raw := range lines {
		raw = strings.TrimRight(raw, "\r")
		trimmed := strings.TrimLeft(raw, " \t")
		lead := raw[:len(raw)-len(trimmed)]
		indent := len(lead)
		if scalarAbove >= 0 {
			if trimmed == "" || indent > scalarAbove {
				continue
			}
			scalarAbove = -1
		}
		if trimmed == "" || trimmed[0] == '#' {
			continue
		}
		if t := strings.IndexByte(lead, '\t'); t >= 0 {
			return i + 1, t + 1, "a tab in the indentation: YAML indents with spaces only", true
		}
		if depth > 0 {
			depth += brackets(trimmed)
			continue
		}
		if trimmed == "---" || trimmed == "..." || strings.HasPrefix(trimmed, "%") {
			continue
		}
		item := trimmed == "-" || strings.HasPrefix(trimmed, "- ")
		above := firstItem
		firstItem.line = -1
		top := func() *open { return &stack[len(stack)-1] }
		switch {
		case len(stack) == 0 || indent > top().indent:
			if f := above; len(stack) > 0 && !opener && f.line >= 0 && indent-2 > f.indent && itemAt(lines[i+1:], indent-2, f.parent) {
				// The first item of its sequence was dedented, not the
				// line below it: the items after it sit where its keys
				// below say it should.
				return f.line + 1, f.indent + 1, fmt.Sprintf("indented %s, where the other items of %s are: indent it to column %d", spaces(f.indent), f.key, indent-1), true
			}
			if len(stack) > 0 && !opener {
				return i + 1, indent + 1, fmt.Sprintf("indented %s, under a line that opens no block (a key with its value on its own line needs nothing after its colon)", spaces(indent)), true
			}
			if item && len(stack) > 0 {
				firstItem = itemLine{line: i, indent: indent, parent: top().indent, key: openerKey}
			}
			stack = append(stack, open{indent: indent, seq: item, key: openerKey})
		default:
			for len(stack) > 0 && top().indent > indent {
				stack = stack[:len(stack)-1]
			}
			if len(stack) == 0 || top().indent != indent {
				var cols []string
				for _, o := range stack {
					cols = append(cols, strconv.Itoa(o.indent+1))
				}
				return i + 1, indent + 1, fmt.Sprintf("indented %s, as no block around it is (they start at columns %s)", spaces(indent), strings.Join(cols, ", ")), true
			}
			if top().seq && !item {
				if top().compact {
					stack = stack[:len(stack)-1] // a key after a compact sequence ends it
					break
				}
				k := top().key
				if k == "" {
					k = "the sequence above"
				}
				return i + 1, indent + 1, fmt.Sprintf("a key at column %d, where the items (- ...) of %s are: indent it to column %d to belong to the item above, or start a new item with -", indent+1, k, indent+3), true
			}
			if !top().seq && item {
				if !opener {
					return i + 1, indent + 1, "an item (- ...) among a mapping's keys", true
				}
				stack = append(stack, open{indent: indent, seq: true, compact: true, key: openerKey})
			}
		}
		content := trimmed
		if item {
			content = strings.TrimLeft(strings.TrimPrefix(trimmed, "-"), " ")
			if content != "" && content[0] != '{' && content[0] != '[' && strings.Contains(content, ":") {
				// An item's mapping: its keys sit where its first one does.
				stack = append(stack, open{indent: indent + len(trimmed) - len(content)})
			}
		}
		key, value, isKey := cutKey(content)
		opener, openerKey = item && content == "" || isKey && nodeProps(value) == "", key
		switch {
		case isKey && (strings.HasPrefix(value, "|") || strings.HasPrefix(value, ">")):
			scalarAbove = indent
			if item {
				scalarAbove = indent + len(trimmed) - len(content)
			}
		case isKey:
			depth += brackets(value)
		default:
			depth += brackets(content)
		}
	}
	return 0, 0, "", false
}

// nodeProps is value without the anchor (&name) and tag (!!str) that
// may come before it: "&burn" alone opens a block as "" does.
func nodeProps(value string) string {
	for value != "" && (value[0] == '&' || value[0] == '!') {
		_, rest, _ := strings.Cut(value, " ")
		value = strings.TrimSpace(rest)
	}
	return value
}

// cutKey splits "key: value" (a comment after it dropped); isKey is false
// for a line that is no key.
func cutKey(s string) (key, value string, isKey bool) {
	if s == "" || s[0] == '{' || s[0] == '[' || s[0] == '"' && !strings.Contains(s, "\": ") {
		return "", "", false
	}
	k, v, ok := strings.Cut(s, ": ")
	if !ok {
		if strings.HasSuffix(s, ":") {
			return strings.TrimSuffix(s, ":"), "", true
		}
		if k, _, ok := strings.Cut(s, ": #"); ok {
			return k, "", true
		}
		return "", "", false
	}
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "#") {
		v = ""
	}
	return strings.Trim(k, `"'`), v, true
}

// brackets is how many flow brackets s opens less those it closes,
// outside quotes and comments.
func brackets(s string) int {
	n := 0
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'':
			quote = r
		case r == '#':
			return n
		case r == '{' || r == '[':
			n++
		case r == '}' || r == ']':
			n--
		}
	}
	return n
}

// spaces is n spaces in words: "1 space", "3 spaces".
func spaces(n int) string {
	if n == 1 {
		return "1 space"
	}
	return fmt.Sprintf("%d spaces", n)
}

// itemAt reports whether lines, up to the end of the block at parent's
// indentation, hold an item (- ...) at indent.
func itemAt(lines []string, indent, parent int) bool {
	for _, raw := range lines {
		trimmed := strings.TrimLeft(strings.TrimRight(raw, "\r"), " ")
		if trimmed == "" || trimmed[0] == '#' {
			continue
		}
		at := len(raw) - len(strings.TrimLeft(raw, " "))
		if at <= parent {
			return false
		}
		if at == indent && (trimmed == "-" || strings.HasPrefix(trimmed, "- ")) {
			return true
		}
	}
	return false
}
