package setup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A schema reads nothing outside its file, says so when it is too large,
// and is refused when its $refs loop (it compiled, then failed every
// answer as a reference cycle). A $ref to /etc/passwd was read, and the
// error quoted its first byte.
func TestSchemaFilesAreBounded(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.json")
	if err := os.WriteFile(secret, []byte(`{"type": "string", "description": "planted-secret-c0ffee"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ doc, want string }{
		"a local file": {`{"$ref": "secret.json"}`, "may refer only to itself"},
		"a file URL":   {`{"$ref": "file://` + secret + `"}`, "may refer only to itself"},
		"an http URL":  {`{"$ref": "http://127.0.0.1:1/s.json"}`, "may refer only to itself"},
		"a loop":       {`{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}`, "$refs loop"},
		"itself":       {`{"$ref": "#"}`, "$refs loop"},
		// Loops only an answer's parts reach: validating {} passed them.
		"a property's loop":  {`{"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {"$ref": "#/$defs/x"}}}`, "$refs loop: file:"},
		"an item's loop":     {`{"items": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/y"}]}, "$defs": {"y": {"allOf": [{"$ref": "#/items"}]}}}`, "$refs loop"},
		"over 1 MiB":         {`{"description": "` + strings.Repeat("x", 1<<20) + `"}`, "over 1048576 bytes"},
		"a tool's loop":      {`[{"type": "function", "function": {"name": "f", "parameters": {"$ref": "#"}}}]`, "$refs loop"},
		"a tool's deep loop": {`[{"type": "function", "function": {"name": "f", "parameters": {"properties": {"a": {"not": {"$ref": "#/properties/a"}}}}}}]`, "$refs loop"},
		"a tool's local":     {`[{"type": "function", "function": {"name": "f", "parameters": {"$ref": "secret.json"}}}]`, "may refer only to itself"},
	} {
		p := filepath.Join(dir, "s.json")
		if err := os.WriteFile(p, []byte(c.doc), 0o644); err != nil {
			t.Fatal(err)
		}
		var err error
		if strings.HasPrefix(name, "a tool") {
			_, _, err = LoadTools(p)
		} else {
			_, _, err = LoadSchema(p)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "planted-secret") {
			t.Errorf("%s: %v; want an error saying %q, quoting nothing of another file", name, err, c.want)
		}
	}
	// A schema that refers to its own parts is fine, and so is one that
	// recurses through a part of the value (a tree).
	for _, doc := range []string{
		`{"$defs": {"s": {"type": "string"}}, "type": "object", "properties": {"a": {"$ref": "#/$defs/s"}}}`,
		`{"$defs": {"node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}, "$ref": "#/$defs/node"}`,
		`{"anyOf": [{"type": "null"}, {"properties": {"next": {"$ref": "#"}}}]}`,
	} {
		p := filepath.Join(dir, "ok.json")
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := LoadSchema(p); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
}
