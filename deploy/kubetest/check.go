package kubetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/tokenprobe/tokenprobe/deploy/render"
)

// NamespacePrefix begins the name of every namespace Check makes.
const NamespacePrefix = "tokenprobe-test-"

// Variant is one set of objects tokenprobe ships: the chart rendered with a
// values file, the plain manifests, or the files in alerts/.
type Variant struct {
	Name  string // the namespace's suffix
	From  string // what it was rendered from, for the report
	Docs  string // the YAML stream as a user applies it
	Error error  // rendering failed
}

// Variants renders everything under root (the repository) that a user
// applies to a cluster, each into the namespace it will be applied in: the
// chart with its default values, deploy/helm/example-values.yaml and each
// file of the chart's ci/ folder; deploy/kubernetes/tokenprobe.yaml; and
// the Prometheus Operator, Argo Rollouts and Flagger files of alerts/.
func Variants(root string) []Variant {
	chart := filepath.Join(root, "deploy/helm/tokenprobe")
	values := []string{"", filepath.Join(root, "deploy/helm/example-values.yaml")}
	ci, _ := filepath.Glob(filepath.Join(chart, "ci/*-values.yaml"))
	values = append(values, ci...)
	var out []Variant
	for _, v := range values {
		name, from := "chart-default", "deploy/helm/tokenprobe (default values)"
		if v != "" {
			name = "chart-" + strings.TrimSuffix(strings.TrimSuffix(filepath.Base(v), ".yaml"), "-values")
			rel, _ := filepath.Rel(root, v)
			from = "deploy/helm/tokenprobe with " + rel
		}
		docs, err := render.Chart(chart, v, "tokenprobe", NamespacePrefix+name)
		out = append(out, Variant{Name: name, From: from, Docs: docs, Error: err})
	}
	files := []struct{ name, path string }{
		{"manifests", "deploy/kubernetes/tokenprobe.yaml"},
		{"alerts", "alerts/prometheusrule.yaml"},
		{"alerts", "alerts/alertmanagerconfig.yaml"},
		{"alerts", "alerts/argo-analysistemplate.yaml"},
		{"alerts", "alerts/flagger-metrictemplates.yaml"},
	}
	byName := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f.path))
		i, ok := byName[f.name]
		if !ok {
			out = append(out, Variant{Name: f.name, From: f.path})
			i = len(out) - 1
			byName[f.name] = i
		} else {
			out[i].From += ", " + f.path
		}
		if err != nil && out[i].Error == nil {
			out[i].Error = err
		}
		out[i].Docs += "\n---\n" + string(b)
	}
	return out
}

// Options say what Check may do to the cluster.
type Options struct {
	// InstallCRDs applies the CRDs in these folders first (server-side),
	// replacing any of the same name: for a test cluster, not a shared
	// one. Without them, objects of a kind the cluster lacks are listed
	// as not tried.
	InstallCRDs []string
	// Helm, when set, also installs the chart with deploy/helm's example
	// values by this helm binary and holds what it stored to what
	// `helm get manifest` says it sent.
	Helm string
	// Keep leaves the namespaces in place for a look; by default Check
	// deletes them, and their objects, at its end.
	Keep bool
	// Progress receives a line per step.
	Progress func(format string, args ...any)
}

// Applied is one object Check applied and read back.
type Applied struct {
	Variant, Namespace, Kind, Name string
	Fields                         int      // leaf fields sent, each found stored as sent
	Diffs                          []string // what the server did not keep
}

// Report is what Check did.
type Report struct {
	Applied  []Applied
	NotTried []string // objects of a kind the cluster has no CRD for
	Warnings []string // what the API server warned of (Pod Security among them)
	// CRDWarnings are what it warned of installing the CRDs: theirs.
	CRDWarnings []string
	Errors      []string // refusals and failures
}

// Failed says whether anything was refused, dropped, changed or warned of.
func (r Report) Failed() bool {
	if len(r.Errors) > 0 || len(r.Warnings) > 0 {
		return true
	}
	for _, a := range r.Applied {
		if len(a.Diffs) > 0 {
			return true
		}
	}
	return false
}

// Check applies every variant to the cluster k reaches, each in a
// namespace of its own labelled for Pod Security's restricted profile
// (enforced and warned of), by server-side apply with strict field
// validation; reads every object back and holds it to what was sent
// (Compare), and reports. A kind the API server does not know (a CRD not
// installed) is not tried, and said so.
func Check(ctx context.Context, k Kubectl, root string, opts Options) (Report, error) {
	progress := opts.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	var rep Report
	k.Stderr = func(args []string, stderr []byte) {
		for _, line := range warningLines(stderr) {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("kubectl %s: %s", strings.Join(args, " "), line))
		}
	}
	// The CRDs' own warnings (Flagger's schema names formats the API
	// server does not know) are theirs, not tokenprobe's: listed apart.
	for _, dir := range opts.InstallCRDs {
		progress("CRDs from %s", dir)
		crdk := k
		crdk.Stderr = func(_ []string, stderr []byte) {
			for _, line := range warningLines(stderr) {
				rep.CRDWarnings = append(rep.CRDWarnings, fmt.Sprintf("%s: %s", filepath.Base(dir), line))
			}
		}
		if _, err := crdk.Run(ctx, nil, "apply", "--server-side", "--force-conflicts", "--field-manager=tokenprobe-deploy-test", "-f", dir); err != nil {
			return rep, err
		}
	}
	if len(opts.InstallCRDs) > 0 {
		if _, err := k.Run(ctx, nil, "wait", "--for=condition=Established", "--timeout=2m", "crd", "--all"); err != nil {
			return rep, err
		}
	}
	known, err := kinds(ctx, k)
	if err != nil {
		return rep, err
	}
	variants := Variants(root)
	var namespaces []string
	defer func() {
		if opts.Keep || len(namespaces) == 0 {
			return
		}
		progress("deleting namespaces %s", strings.Join(namespaces, " "))
		// Also after a signal, but not for longer than a shutdown allows.
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = k.Run(cleanup, nil, append([]string{"delete", "namespace", "--wait=false"}, namespaces...)...)
	}()
	for _, v := range variants {
		if v.Error != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", v.From, v.Error))
			continue
		}
		ns := NamespacePrefix + v.Name
		var docs []map[string]any
		for _, d := range splitDocs(v.Docs) {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(d), &obj); err != nil {
				rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", v.From, err))
				continue
			}
			gk := groupKind(obj)
			if !known[gk] {
				rep.NotTried = append(rep.NotTried, fmt.Sprintf("%s %s/%s from %s: the cluster has no %s", v.Name, obj["kind"], name(obj), v.From, gk))
				continue
			}
			docs = append(docs, obj)
		}
		if len(docs) == 0 {
			continue
		}
		if err := namespace(ctx, k, ns); err != nil {
			return rep, err
		}
		namespaces = append(namespaces, ns)
		progress("%s: %d objects from %s into %s", v.Name, len(docs), v.From, ns)
		applied, errs := applyAndCompare(ctx, k, v.Name, ns, docs)
		rep.Applied = append(rep.Applied, applied...)
		rep.Errors = append(rep.Errors, errs...)
	}
	if opts.Helm != "" {
		progress("helm: install with deploy/helm/example-values.yaml")
		applied, errs := helmInstall(ctx, k, opts.Helm, root)
		if ns := NamespacePrefix + "helm"; len(applied) > 0 || len(errs) > 0 {
			namespaces = append(namespaces, ns)
		}
		rep.Applied = append(rep.Applied, applied...)
		rep.Errors = append(rep.Errors, errs...)
	}
	return rep, nil
}

// warningLines are the lines of a kubectl's or helm's standard error that
// warn: kubectl writes "Warning: ...", helm's client-go handler
// "W1207 ... warnings.go:70] ...".
func warningLines(stderr []byte) []string {
	var out []string
	for _, line := range strings.Split(string(stderr), "\n") {
		if strings.HasPrefix(line, "Warning:") || strings.Contains(line, "warnings.go:") {
			out = append(out, line)
		}
	}
	return out
}

// namespace makes ns with Pod Security's restricted profile enforced,
// warned of and audited.
func namespace(ctx context.Context, k Kubectl, ns string) error {
	doc := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels:
    app.kubernetes.io/managed-by: tokenprobe-deploy-test
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/warn: restricted
    pod-security.kubernetes.io/audit: restricted
`, ns)
	_, err := k.Run(ctx, []byte(doc), "apply", "--server-side", "--field-manager=tokenprobe-deploy-test", "-f", "-")
	return err
}

// applyAndCompare applies docs into ns as one stream, reads them back in
// one call, and compares each.
func applyAndCompare(ctx context.Context, k Kubectl, variant, ns string, docs []map[string]any) ([]Applied, []string) {
	stream, err := list(docs)
	if err != nil {
		return nil, []string{fmt.Sprintf("%s: %v", variant, err)}
	}
	if _, err := k.Run(ctx, stream, "apply", "--server-side", "--field-manager=tokenprobe-deploy-test", "--validate=strict", "-n", ns, "-f", "-"); err != nil {
		return nil, []string{fmt.Sprintf("%s: %v", variant, err)}
	}
	return readBack(ctx, k, variant, ns, docs, stream)
}

// readBack gets the objects of stream as stored and compares each with
// its doc.
func readBack(ctx context.Context, k Kubectl, variant, ns string, docs []map[string]any, stream []byte) ([]Applied, []string) {
	out, err := k.Run(ctx, stream, "get", "-n", ns, "-o", "json", "-f", "-")
	if err != nil {
		return nil, []string{fmt.Sprintf("%s: reading back: %v", variant, err)}
	}
	var list struct{ Items []map[string]any }
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, []string{fmt.Sprintf("%s: reading back: %v", variant, err)}
	}
	stored := map[string]map[string]any{}
	for _, it := range list.Items {
		stored[groupKind(it)+"/"+name(it)] = it
	}
	var applied []Applied
	var errs []string
	for _, d := range docs {
		key := groupKind(d) + "/" + name(d)
		s, ok := stored[key]
		if !ok {
			errs = append(errs, fmt.Sprintf("%s: %s applied, not read back", variant, key))
			continue
		}
		applied = append(applied, Applied{Variant: variant, Namespace: ns, Kind: fmt.Sprint(d["kind"]), Name: name(d), Fields: leaves(d), Diffs: Compare(d, s)})
	}
	return applied, errs
}

// helmInstall installs the chart with the example values by the helm
// binary, as a user does (no strict validation: helm's own), and holds
// what the server stored to the manifest helm says it sent.
func helmInstall(ctx context.Context, k Kubectl, helm, root string) ([]Applied, []string) {
	ns := NamespacePrefix + "helm"
	if err := namespace(ctx, k, ns); err != nil {
		return nil, []string{err.Error()}
	}
	run := func(args ...string) ([]byte, error) {
		return Kubectl{Path: helm, Kubeconfig: k.Kubeconfig, Stderr: k.Stderr}.Run(ctx, nil, args...)
	}
	chart := filepath.Join(root, "deploy/helm/tokenprobe")
	values := filepath.Join(root, "deploy/helm/example-values.yaml")
	if out, err := run("lint", "--strict", chart, "-f", values); err != nil {
		return nil, []string{fmt.Sprintf("helm lint: %v: %s", err, out)}
	}
	if _, err := run("upgrade", "--install", "tokenprobe", chart, "-n", ns, "-f", values); err != nil {
		return nil, []string{fmt.Sprintf("helm install: %v", err)}
	}
	manifest, err := run("get", "manifest", "tokenprobe", "-n", ns)
	if err != nil {
		return nil, []string{fmt.Sprintf("helm get manifest: %v", err)}
	}
	var docs []map[string]any
	for _, d := range splitDocs(string(manifest)) {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(d), &obj); err != nil {
			return nil, []string{fmt.Sprintf("helm get manifest: %v", err)}
		}
		docs = append(docs, obj)
	}
	stream, err := list(docs)
	if err != nil {
		return nil, []string{err.Error()}
	}
	return readBack(ctx, k, "helm", ns, docs, stream)
}

// list is docs as one v1 List, which kubectl applies and gets item by item.
func list(docs []map[string]any) ([]byte, error) {
	items := make([]any, len(docs))
	for i, d := range docs {
		items[i] = d
	}
	return json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
}

// kinds lists every group/kind the API server serves, CRDs' included.
func kinds(ctx context.Context, k Kubectl) (map[string]bool, error) {
	out, err := k.Run(ctx, nil, "api-resources", "--no-headers", "-o", "wide")
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		// NAME [SHORTNAMES] APIVERSION NAMESPACED KIND VERBS...
		for i := 1; i+2 < len(f); i++ {
			if f[i+1] == "true" || f[i+1] == "false" {
				group := ""
				if j := strings.LastIndex(f[i], "/"); j >= 0 {
					group = f[i][:j]
				}
				known[group+"/"+f[i+2]] = true
				break
			}
		}
	}
	return known, nil
}

// groupKind is "group/Kind" ("/Kind" for the core group).
func groupKind(obj map[string]any) string {
	av, _ := obj["apiVersion"].(string)
	group := ""
	if i := strings.LastIndex(av, "/"); i >= 0 {
		group = av[:i]
	}
	return group + "/" + fmt.Sprint(obj["kind"])
}

func name(obj map[string]any) string {
	m, _ := obj["metadata"].(map[string]any)
	s, _ := m["name"].(string)
	return s
}

func leaves(v any) int {
	switch x := v.(type) {
	case map[string]any:
		n := 0
		for _, e := range x {
			n += leaves(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range x {
			n += leaves(e)
		}
		return n
	case nil:
		return 0
	}
	return 1
}

// splitDocs splits a YAML stream as kubectl does, leaving out documents of
// comments alone.
func splitDocs(stream string) []string {
	var out []string
	for _, doc := range strings.Split("\n"+stream, "\n---") {
		keep := false
		for _, line := range strings.Split(doc, "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				keep = true
				break
			}
		}
		if keep {
			// The newline before the separator ends the document's last
			// line: a block scalar there keeps it.
			out = append(out, doc+"\n")
		}
	}
	return out
}

// Print writes the report as `make deploy-test` shows it.
func (r Report) Print(w func(format string, args ...any)) {
	sort.SliceStable(r.Applied, func(i, j int) bool { return r.Applied[i].Variant < r.Applied[j].Variant })
	for _, a := range r.Applied {
		state := fmt.Sprintf("kept as sent (%d fields)", a.Fields)
		if len(a.Diffs) > 0 {
			state = fmt.Sprintf("NOT kept as sent: %s", strings.Join(a.Diffs, "; "))
		}
		w("applied %s/%s in %s: %s", a.Kind, a.Name, a.Namespace, state)
	}
	for _, s := range r.NotTried {
		w("not tried: %s", s)
	}
	for _, s := range r.CRDWarnings {
		w("the CRD's own warning (not tokenprobe's): %s", s)
	}
	for _, s := range r.Warnings {
		w("WARNING %s", s)
	}
	for _, s := range r.Errors {
		w("ERROR %s", s)
	}
	diffs := 0
	for _, a := range r.Applied {
		if len(a.Diffs) > 0 {
			diffs++
		}
	}
	w("%d objects applied, %d not kept as sent, %d not tried, %d warnings, %d errors", len(r.Applied), diffs, len(r.NotTried), len(r.Warnings), len(r.Errors))
}
