package kubetest

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"sort"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Compare holds an object as the API server stored it against what was
// sent, field by field, and returns every field sent that the server did
// not keep as sent: missing (dropped, as a CRD's schema prunes a field
// it does not declare) or changed. Fields the server adds (defaults,
// status, metadata) are not differences. A few transformations the API
// documents are not differences either:
//   - a quantity written another way ("0.5" stored as "500m");
//   - a Secret's stringData, which the server moves into data, encoded;
//   - an empty map or list the server leaves out (as it does for a field
//     whose Go type omits it when empty: nothing was lost).
//
// Compare returns the differences as "path: what" lines, sorted.
func Compare(sent, stored map[string]any) []string {
	var diffs []string
	if sent["kind"] == "Secret" && sent["apiVersion"] == "v1" {
		sent = secretData(sent)
	}
	compare("", sent, stored, &diffs)
	sort.Strings(diffs)
	return diffs
}

// secretData moves a Secret's stringData into data, base64-encoded, as
// the API server does on write.
func secretData(sent map[string]any) map[string]any {
	sd, ok := sent["stringData"].(map[string]any)
	if !ok {
		return sent
	}
	out := make(map[string]any, len(sent))
	for k, v := range sent {
		out[k] = v
	}
	delete(out, "stringData")
	data := map[string]any{}
	if d, ok := sent["data"].(map[string]any); ok {
		for k, v := range d {
			data[k] = v
		}
	}
	for k, v := range sd {
		if s, ok := v.(string); ok {
			data[k] = base64.StdEncoding.EncodeToString([]byte(s))
		}
	}
	out["data"] = data
	return out
}

func compare(path string, sent, stored any, diffs *[]string) {
	switch s := sent.(type) {
	case nil:
		return // a null sent asks for nothing
	case map[string]any:
		st, ok := stored.(map[string]any)
		if !ok {
			if stored == nil && len(s) == 0 {
				return
			}
			*diffs = append(*diffs, fmt.Sprintf("%s: sent a map, stored %s", orRoot(path), describe(stored)))
			return
		}
		for k, v := range s {
			sv, present := st[k]
			if !present {
				if v == nil || isEmpty(v) {
					continue
				}
				*diffs = append(*diffs, fmt.Sprintf("%s.%s: sent, not stored (dropped)", path, k))
				continue
			}
			compare(path+"."+k, v, sv, diffs)
		}
	case []any:
		st, ok := stored.([]any)
		if !ok {
			if stored == nil && len(s) == 0 {
				return
			}
			*diffs = append(*diffs, fmt.Sprintf("%s: sent a list of %d, stored %s", orRoot(path), len(s), describe(stored)))
			return
		}
		if len(st) != len(s) {
			*diffs = append(*diffs, fmt.Sprintf("%s: sent %d items, stored %d", orRoot(path), len(s), len(st)))
			return
		}
		for i := range s {
			compare(path+"["+strconv.Itoa(i)+"]", s[i], st[i], diffs)
		}
	default:
		if scalarEqual(sent, stored) {
			return
		}
		a, b := sent, stored
		if sa, ok := sent.(string); ok {
			if sb, ok := stored.(string); ok {
				a, b = around(sa, sb)
			}
		}
		*diffs = append(*diffs, fmt.Sprintf("%s: sent %s, stored %s", orRoot(path), describe(a), describe(b)))
	}
}

func scalarEqual(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	// Quantities: "0.5" and "500m", 1 and "1", "1024Mi" and "1Gi".
	qa, okA := quantity(a)
	qb, okB := quantity(b)
	return okA && okB && qa.Cmp(qb) == 0
}

func quantity(v any) (resource.Quantity, bool) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case float64: // JSON's only number
		s = strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(s)
	return q, err == nil
}

// around cuts two long strings to where they first differ, with a little
// before it, so that a report shows the difference.
func around(a, b string) (string, string) {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	if i <= 20 {
		return a, b
	}
	return "…" + a[i-20:], "…" + b[i-20:]
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing"
	case map[string]any:
		return "a map"
	case []any:
		return fmt.Sprintf("a list of %d", len(x))
	case string:
		if len(x) > 60 {
			x = x[:60] + "…"
		}
		return strconv.Quote(x)
	}
	return fmt.Sprint(v)
}

func orRoot(path string) string {
	if path == "" {
		return "."
	}
	return path
}
