package render

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1alpha1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/yaml"

	"github.com/tokenprobe/tokenprobe/alerts"
	"github.com/tokenprobe/tokenprobe/internal/config"
)

// decodeAll decodes every rendered object with its own API's Go types,
// Kubernetes' and prometheus-operator's (unknown fields are errors: the
// API server drops them or refuses them), and returns them by kind.
func decodeAll(t *testing.T, stream string) map[string][]any {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = appsv1.AddToScheme(scheme)
	_ = batchv1.AddToScheme(scheme)
	_ = monitoringv1.AddToScheme(scheme)
	_ = monitoringv1alpha1.AddToScheme(scheme)
	codec := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	out := map[string][]any{}
	for _, doc := range strings.Split(stream, "\n---\n") {
		doc = strings.TrimPrefix(strings.TrimSpace(doc), "---")
		if commentsOnly(doc) {
			continue // as kubectl skips them
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		obj, _, err := codec.Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("%s: %v\n%s", meta.Kind, err, doc)
		}
		out[meta.Kind] = append(out[meta.Kind], obj)
	}
	return out
}

func TestDefaultValues(t *testing.T) {
	out, err := Chart("../helm/tokenprobe", "", "tokenprobe", "monitoring")
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, out)
	if len(objs["StatefulSet"]) != 1 || len(objs["Service"]) != 1 || len(objs["ConfigMap"]) != 5 || len(objs["DaemonSet"]) != 0 || len(objs["Secret"]) != 0 {
		t.Fatalf("kinds: %v", keys(objs))
	}
	sts := objs["StatefulSet"][0].(*appsv1.StatefulSet)
	c := sts.Spec.Template.Spec.Containers[0]
	if !*sts.Spec.Template.Spec.SecurityContext.RunAsNonRoot || *c.SecurityContext.ReadOnlyRootFilesystem != true || c.ReadinessProbe.HTTPGet.Path != "/-/ready" {
		t.Error("security context or probes")
	}
	// Four dashboards for Grafana's sidecar, each valid JSON; the ConfigMap
	// of the configuration holds a valid tokenprobe configuration.
	var cm *corev1.ConfigMap
	dashboards := 0
	for _, o := range objs["ConfigMap"] {
		c := o.(*corev1.ConfigMap)
		if c.Labels["grafana_dashboard"] == "1" {
			for name, body := range c.Data {
				var v map[string]any
				if err := json.Unmarshal([]byte(body), &v); err != nil || v["uid"] != strings.TrimSuffix(name, ".json") {
					t.Errorf("dashboard %s: %v", name, err)
				}
				dashboards++
			}
			continue
		}
		cm = c
	}
	if dashboards != 4 || cm == nil {
		t.Fatalf("%d dashboards", dashboards)
	}
	if _, err := config.Parse("configmap/tokenprobe.yaml", []byte(cm.Data["tokenprobe.yaml"])); err != nil {
		t.Fatalf("the chart's default configuration is invalid: %v", err)
	}
}

func TestExampleValues(t *testing.T) {
	out, err := Chart("../helm/tokenprobe", "../helm/example-values.yaml", "probe", "monitoring")
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, out)
	sts := objs["StatefulSet"][0].(*appsv1.StatefulSet)
	args := strings.Join(sts.Spec.Template.Spec.Containers[0].Args, " ")
	if *sts.Spec.Replicas != 3 || !strings.Contains(args, "--shard.count=3") || !strings.Contains(args, "--web.enable-lifecycle") {
		t.Errorf("replicas %d, args %s", *sts.Spec.Replicas, args)
	}
	if len(objs["Secret"]) != 1 || len(objs["ServiceMonitor"]) != 1 || len(objs["PrometheusRule"]) != 1 || len(objs["AlertmanagerConfig"]) != 1 {
		t.Fatalf("kinds: %v", keys(objs))
	}
	// The inhibitions beside the rules: every one of alerts/alertmanager.yaml,
	// its matchers as the operator spells them.
	am := objs["AlertmanagerConfig"][0].(*monitoringv1alpha1.AlertmanagerConfig)
	if want := alerts.Inhibitions(); len(am.Spec.InhibitRules) != len(want) {
		t.Errorf("%d inhibit rules, alerts ships %d", len(am.Spec.InhibitRules), len(want))
	} else {
		for i, r := range am.Spec.InhibitRules {
			m := r.SourceMatch[0]
			if got := m.Name + string(m.MatchType) + `"` + m.Value + `"`; got != want[i].Source[0] || !slices.Equal(r.Equal, want[i].Equal) {
				t.Errorf("inhibit rule %d: source %s equal %v, want %s equal %v", i, got, r.Equal, want[i].Source[0], want[i].Equal)
			}
		}
	}
	// Native histograms first, and the classic buckets kept beside them:
	// without the flag Prometheus drops them (issue 24).
	if sm := objs["ServiceMonitor"][0].(*monitoringv1.ServiceMonitor); sm.Spec.ScrapeClassicHistograms == nil || !*sm.Spec.ScrapeClassicHistograms ||
		len(sm.Spec.ScrapeProtocols) == 0 || sm.Spec.ScrapeProtocols[0] != monitoringv1.PrometheusProto {
		t.Errorf("ServiceMonitor keeps classic histograms: %v, protocols %v", sm.Spec.ScrapeClassicHistograms, sm.Spec.ScrapeProtocols)
	}
	sec := objs["Secret"][0].(*corev1.Secret)
	if sec.StringData["OPENAI_API_KEY"] == "" || sts.Spec.Template.Spec.Containers[0].EnvFrom[0].SecretRef.Name != sec.Name {
		t.Error("the key is not wired from the Secret")
	}
	var cm *corev1.ConfigMap
	for _, o := range objs["ConfigMap"] {
		if c := o.(*corev1.ConfigMap); c.Data["tokenprobe.yaml"] != "" {
			cm = c
		}
	}
	t.Setenv("OPENAI_API_KEY", "x")
	if _, err := config.Parse("configmap/tokenprobe.yaml", []byte(cm.Data["tokenprobe.yaml"])); err != nil {
		t.Fatalf("the example configuration is invalid: %v", err)
	}
	pr := objs["PrometheusRule"][0].(*monitoringv1.PrometheusRule)
	if want := len(alerts.Generate(alerts.Defaults()).Groups); len(pr.Spec.Groups) != want {
		t.Errorf("%d rule groups, the rule file has %d", len(pr.Spec.Groups), want)
	}
}

func TestDaemonSetMode(t *testing.T) {
	values := t.TempDir() + "/v.yaml"
	_ = os.WriteFile(values, []byte("mode: daemonset\nnodeSelector: {pool: inference}\n"), 0o644)
	out, err := Chart("../helm/tokenprobe", values, "tokenprobe", "monitoring")
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, out)
	if len(objs["DaemonSet"]) != 1 || len(objs["StatefulSet"]) != 0 {
		t.Fatalf("kinds: %v", keys(objs))
	}
	ns := objs["DaemonSet"][0].(*appsv1.DaemonSet).Spec.Template.Spec.NodeSelector
	if ns["nvidia.com/gpu.present"] != "true" || ns["pool"] != "inference" {
		t.Fatalf("node selector %v", ns)
	}
}

// The chart carries the generated rules, and the plain manifests are the
// chart rendered with its defaults.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	a, _ := os.ReadFile("../../alerts/tokenprobe-rules.yaml")
	b, _ := os.ReadFile("../helm/tokenprobe/files/tokenprobe-rules.yaml")
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Error("deploy/helm/tokenprobe/files/tokenprobe-rules.yaml differs from alerts/: run make manifests")
	}
	sources, _ := filepath.Glob("../../dashboards/*.json")
	for _, src := range sources {
		a, _ := os.ReadFile(src)
		b, _ := os.ReadFile("../helm/tokenprobe/files/dashboards/" + filepath.Base(src))
		if !bytes.Equal(a, b) {
			t.Errorf("the chart's copy of %s is out of date: run make manifests", filepath.Base(src))
		}
	}
	if len(sources) != 4 {
		t.Errorf("%d dashboards", len(sources))
	}
	out, err := Chart("../helm/tokenprobe", "", "tokenprobe", "monitoring")
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := os.ReadFile("../kubernetes/tokenprobe.yaml")
	if !strings.HasSuffix(string(plain), out) {
		t.Error("deploy/kubernetes/tokenprobe.yaml is not the chart's rendering: run make manifests")
	}
}

func keys(m map[string][]any) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+string(rune('0'+len(v))))
	}
	return out
}

func commentsOnly(doc string) bool {
	for _, line := range strings.Split(doc, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// A probe per cluster: the chart's location becomes --probe.location, and
// its PrometheusRule's quorum alerts ask for prometheusRule.minLocations.
func TestLocationAndQuorum(t *testing.T) {
	values := t.TempDir() + "/v.yaml"
	_ = os.WriteFile(values, []byte("location: eu-west-1\nprometheusRule: {enabled: true, minLocations: 3}\n"), 0o644)
	out, err := Chart("../helm/tokenprobe", values, "tokenprobe", "monitoring")
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, out)
	args := objs["StatefulSet"][0].(*appsv1.StatefulSet).Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--probe.location=eu-west-1") {
		t.Errorf("args %v", args)
	}
	quorums := 0
	for _, g := range objs["PrometheusRule"][0].(*monitoringv1.PrometheusRule).Spec.Groups {
		for _, r := range g.Rules {
			name := r.Alert
			if !strings.HasSuffix(name, "Quorum") {
				continue
			}
			quorums++
			expr, desc := r.Expr.String(), r.Annotations["description"]
			if !strings.HasSuffix(strings.TrimSpace(expr), ")) >= 3") || !strings.Contains(desc, "(at least 3)") {
				t.Errorf("%s asks for another quorum than 3:\n%s\n%s", name, expr, desc)
			}
		}
	}
	if quorums != 4 {
		t.Errorf("%d quorum alerts, want 4", quorums)
	}
	// Without a location, no flag.
	out, err = Chart("../helm/tokenprobe", "", "tokenprobe", "monitoring")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "--probe.location") {
		t.Error("--probe.location without a location value")
	}
}

// A study in shards: an Indexed Job of study.shards pods, each running
// its share of the profile from the same --start-at into the shared
// claim, and a Job that waits for every shard and merges them; decoded
// strictly into batch/v1. Without study.enabled, neither.
func TestStudyJobs(t *testing.T) {
	values := t.TempDir() + "/v.yaml"
	_ = os.WriteFile(values, []byte("study: {enabled: true, shards: 3, profile: capacity, startAt: '2026-11-25T10:00:00Z', artifactsClaim: study-artifacts}\nserviceMonitor: {enabled: true}\n"), 0o644)
	out, err := Chart("../helm/tokenprobe", values, "tokenprobe", "monitoring")
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, out)
	jobs := map[string]*batchv1.Job{}
	for _, o := range objs["Job"] {
		j := o.(*batchv1.Job)
		jobs[j.Name] = j
	}
	study, merge := jobs["tokenprobe-study"], jobs["tokenprobe-study-merge"]
	if study == nil || merge == nil {
		t.Fatalf("%d jobs, want tokenprobe-study and tokenprobe-study-merge", len(jobs))
	}
	if study.Spec.CompletionMode == nil || *study.Spec.CompletionMode != batchv1.IndexedCompletion || *study.Spec.Completions != 3 || *study.Spec.Parallelism != 3 {
		t.Errorf("study job: %+v", study.Spec)
	}
	args := study.Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"run", "--profile=capacity", "--shard.count=3", "--start-at=2026-11-25T10:00:00Z", "--artifacts-dir=/artifacts/shard-$(JOB_COMPLETION_INDEX)"} {
		if !slices.Contains(args, want) {
			t.Errorf("shard args %v lack %s", args, want)
		}
	}
	margs := merge.Spec.Template.Spec.Containers[0].Args
	if !slices.Equal(margs[len(margs)-3:], []string{"/artifacts/shard-0", "/artifacts/shard-1", "/artifacts/shard-2"}) || margs[0] != "merge" || !slices.Contains(margs, "--wait=2h") {
		t.Errorf("merge args %v", margs)
	}
	for _, j := range []*batchv1.Job{study, merge} {
		v := j.Spec.Template.Spec.Volumes
		if len(v) != 2 || v[1].PersistentVolumeClaim == nil || v[1].PersistentVolumeClaim.ClaimName != "study-artifacts" {
			t.Errorf("%s volumes %+v", j.Name, v)
		}
	}
	// The daemon's Service and ServiceMonitor select its pods and no
	// shard's: a shard listed as the daemon's endpoint is scraped as one.
	sel := labels.SelectorFromSet(objs["Service"][0].(*corev1.Service).Spec.Selector)
	smSel, err := metav1.LabelSelectorAsSelector(&objs["ServiceMonitor"][0].(*monitoringv1.ServiceMonitor).Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(objs["StatefulSet"][0].(*appsv1.StatefulSet).Spec.Template.Labels)) {
		t.Error("the Service does not select the daemon's pods")
	}
	if !smSel.Matches(labels.Set(objs["Service"][0].(*corev1.Service).Labels)) {
		t.Error("the ServiceMonitor does not select the daemon's Service")
	}
	for _, j := range []*batchv1.Job{study, merge} {
		if l := labels.Set(j.Spec.Template.Labels); sel.Matches(l) {
			t.Errorf("the daemon's Service selects %s's pods (%v)", j.Name, l)
		}
	}
	// Without a claim the chart says what is missing.
	_ = os.WriteFile(values, []byte("study: {enabled: true, profile: capacity}\n"), 0o644)
	if _, err := Chart("../helm/tokenprobe", values, "tokenprobe", "monitoring"); err == nil || !strings.Contains(err.Error(), "study.artifactsClaim") {
		t.Errorf("a study without a claim: %v", err)
	}
	out, _ = Chart("../helm/tokenprobe", "", "tokenprobe", "monitoring")
	if strings.Contains(out, "kind: Job") {
		t.Error("a Job without study.enabled")
	}
}
