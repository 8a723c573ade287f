package kubetest

import (
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func obj(t *testing.T, doc string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// A field a CRD's schema does not declare is pruned on write, as the
// ServiceMonitor's endpoints[].scrapeProtocols was: Compare names it.
func TestCompareFindsAPrunedField(t *testing.T) {
	sent := obj(t, `
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: tokenprobe, labels: {a: b}}
spec:
  endpoints:
  - {port: http, interval: 15s, scrapeProtocols: [PrometheusProto]}
`)
	stored := obj(t, `
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: tokenprobe, namespace: x, uid: u, labels: {a: b}, generation: 1}
spec:
  endpoints:
  - {port: http, interval: 15s}
`)
	got := Compare(sent, stored)
	if want := []string{".spec.endpoints[0].scrapeProtocols: sent, not stored (dropped)"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	stored["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)["scrapeProtocols"] = []any{"PrometheusProto"}
	if got := Compare(sent, stored); len(got) != 0 {
		t.Fatalf("kept: %q", got)
	}
}

// What the API server documents as the same is the same: quantities
// written another way, stringData moved into data, empty maps and lists
// left out, defaults added; a changed value or a list cut short is not.
func TestCompareKnowsTheServersRewrites(t *testing.T) {
	sent := obj(t, `
apiVersion: v1
kind: Secret
metadata: {name: keys, annotations: {}}
stringData: {OPENAI_API_KEY: sk-x}
`)
	stored := obj(t, `
apiVersion: v1
kind: Secret
metadata: {name: keys, namespace: n}
type: Opaque
data: {OPENAI_API_KEY: c2steA==}
`)
	if got := Compare(sent, stored); len(got) != 0 {
		t.Errorf("a Secret's stringData: %q", got)
	}
	stored["data"].(map[string]any)["OPENAI_API_KEY"] = "b3RoZXI="
	if got := Compare(sent, stored); len(got) != 1 || !strings.HasPrefix(got[0], ".data.OPENAI_API_KEY: sent") {
		t.Errorf("a Secret's changed value: %q", got)
	}

	sent = obj(t, `
kind: StatefulSet
spec:
  template:
    spec:
      containers:
      - name: probe
        args: [serve, --a]
        env: []
        resources: {requests: {cpu: "0.5", memory: 64Mi}, limits: {memory: 1Gi}}
`)
	stored = obj(t, `
kind: StatefulSet
spec:
  template:
    spec:
      containers:
      - name: probe
        args: [serve, --a]
        terminationMessagePath: /dev/termination-log
        resources: {requests: {cpu: 500m, memory: 64Mi}, limits: {memory: 1024Mi}}
`)
	if got := Compare(sent, stored); len(got) != 0 {
		t.Errorf("quantities, an empty list, a default: %q", got)
	}
	stored["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"] = []any{"serve"}
	if got := Compare(sent, stored); !slices.Equal(got, []string{".spec.template.spec.containers[0].args: sent 2 items, stored 1"}) {
		t.Errorf("a list cut short: %q", got)
	}
}

// The plain manifests and the chart render, and split into documents as
// kubectl splits them.
func TestVariantsRender(t *testing.T) {
	names := map[string]bool{}
	for _, v := range Variants("../..") {
		if v.Error != nil {
			t.Fatalf("%s: %v", v.From, v.Error)
		}
		names[v.Name] = true
		if len(splitDocs(v.Docs)) == 0 {
			t.Errorf("%s: no document", v.From)
		}
	}
	for _, want := range []string{"chart-default", "chart-example", "chart-daemonset", "chart-study", "chart-location", "manifests", "alerts"} {
		if !names[want] {
			t.Errorf("no variant %s (have %v)", want, names)
		}
	}
}
