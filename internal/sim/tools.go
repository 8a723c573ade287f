package sim

import (
	"encoding/json"
	"strings"
)

// tool is a function a request offers: chat's {"type": "function",
// "function": {name, parameters}}, the Responses API's {"type":
// "function", name, parameters} or the Messages API's {name,
// input_schema}.
type tool struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
	Name        string          `json:"name"`
	Parameters  json.RawMessage `json:"parameters"`
	InputSchema json.RawMessage `json:"input_schema"`
}

func (t *tool) name() string {
	if t.Function.Name != "" {
		return t.Function.Name
	}
	return t.Name
}

func (t *tool) parameters() json.RawMessage {
	for _, p := range []json.RawMessage{t.Function.Parameters, t.Parameters, t.InputSchema} {
		if len(p) > 0 {
			return p
		}
	}
	return nil
}

// toolCall is the call the simulator answers a request that offers tools
// with: the function tool_choice names, or the first; none when
// tool_choice is "none".
func toolCall(tools []tool, choice json.RawMessage) (name, args string, ok bool) {
	if len(tools) == 0 {
		return "", "", false
	}
	var mode string
	var named struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	at := 0
	switch {
	case json.Unmarshal(choice, &mode) == nil && mode == "none":
		return "", "", false
	case json.Unmarshal(choice, &named) == nil && named.Type == "none":
		return "", "", false
	case named.Function.Name != "" || named.Name != "":
		want := named.Function.Name + named.Name
		for i := range tools {
			if tools[i].name() == want {
				at = i
			}
		}
	}
	var schema any
	_ = json.Unmarshal(tools[at].parameters(), &schema)
	b, _ := json.Marshal(example(schema, 0))
	return tools[at].name(), string(b), true
}

// example is a value valid against a JSON Schema of the shapes tool
// parameters use (objects of typed properties, enums, arrays, required,
// minimums and lengths); not a general schema solver.
func example(schema any, depth int) any {
	s, _ := schema.(map[string]any)
	if s == nil || depth > 8 {
		return map[string]any{}
	}
	if v, ok := s["const"]; ok {
		return v
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			return example(alts[0], depth+1)
		}
	}
	typ, _ := s["type"].(string)
	if alts, ok := s["type"].([]any); ok {
		for _, a := range alts {
			if t, _ := a.(string); t != "null" {
				typ = t
				break
			}
		}
	}
	if typ == "" {
		if _, ok := s["properties"]; ok {
			typ = "object"
		}
	}
	num := func(def float64) float64 {
		if m, ok := s["minimum"].(float64); ok {
			return m
		}
		if m, ok := s["exclusiveMinimum"].(float64); ok {
			return m + 1
		}
		return def
	}
	switch typ {
	case "string":
		n, _ := s["minLength"].(float64)
		return "sim" + strings.Repeat("x", max(int(n)-3, 0))
	case "integer":
		return int(num(1))
	case "number":
		return num(1.5)
	case "boolean":
		return true
	case "null":
		return nil
	case "array":
		n, _ := s["minItems"].(float64)
		out := []any{}
		for range max(int(n), 1) {
			out = append(out, example(s["items"], depth+1))
		}
		return out
	}
	out := map[string]any{}
	props, _ := s["properties"].(map[string]any)
	for k, p := range props {
		out[k] = example(p, depth+1)
	}
	return out
}
