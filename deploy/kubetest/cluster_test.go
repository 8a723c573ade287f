package kubetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// testContext bounds a test by limit, and ends it a minute and a half
// before go test's own deadline (10 minutes a package by default): a wait
// starved on a busy host then fails naming what it waited for, with the
// control plane's logs, and the namespaces are still deleted, where go
// test's panic would print goroutines alone and leave the processes.
func testContext(t *testing.T, limit time.Duration) (context.Context, context.CancelFunc) {
	if d, ok := t.Deadline(); ok {
		limit = min(limit, time.Until(d)-90*time.Second)
	}
	return context.WithTimeout(context.Background(), limit)
}

// controlPlane starts a control plane from $TOKENPROBE_KUBE, or skips (fails
// with TOKENPROBE_REQUIRE_KUBE=1) without one.
func controlPlane(ctx context.Context, t *testing.T) *ControlPlane {
	t.Helper()
	bin := os.Getenv(Env)
	if bin == "" {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s is not set and %s=1: run tools/kube.sh and set %s to the folder it prints", Env, RequireEnv, Env)
		}
		t.Skipf("no control plane: %s=$(tools/kube.sh) (14 minutes on two cores the first time) runs this test", Env)
	}
	cp, err := Start(ctx, bin, t.TempDir())
	if err != nil {
		if cp != nil {
			t.Log(cp.Logs(3000))
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(cp.Logs(3000))
		}
		cp.Stop()
	})
	return cp
}

// Everything tokenprobe ships for Kubernetes, applied to a real API server
// (kube-apiserver v1.37.2 on etcd, with the controllers, the scheduler and
// kwok's fake nodes) with the CRDs from their own modules: accepted under
// strict field validation, kept field by field as sent, with no Pod
// Security warning; helm installs the chart as it renders it; the study's
// Indexed Job gets pods with completion indexes 0 to 2 that stay out of
// the daemon's Service and completes; the StatefulSet's pods get their
// ordinals; the DaemonSet lands on the GPU node alone; and `make
// deploy-test` against the same cluster exits 0, listing every object.
func TestManifestsOnARealControlPlane(t *testing.T) {
	ctx, cancel := testContext(t, 12*time.Minute)
	defer cancel()
	cp := controlPlane(ctx, t)
	k := Kubectl{Path: cp.Kubectl, Kubeconfig: cp.Kubeconfig}
	bin := os.Getenv(Env)

	// The study's claim, bound to a volume of its own before the chart.
	studyNS := NamespacePrefix + "chart-study"
	if err := namespace(ctx, k, studyNS); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, []byte(claim(studyNS)), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}

	opts := Options{Helm: cp.Helm, Keep: true, Progress: t.Logf}
	for name, version := range CRDs {
		opts.InstallCRDs = append(opts.InstallCRDs, filepath.Join(bin, "crds-"+name+"-"+version))
	}
	rep, err := Check(ctx, k, "../..", opts)
	rep.Print(t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() {
		t.Fatal("the API server refused, dropped, changed or warned of what tokenprobe ships (above)")
	}
	if len(rep.NotTried) > 0 {
		t.Errorf("objects not tried with every CRD installed: %v", rep.NotTried)
	}
	perVariant := map[string]int{}
	for _, a := range rep.Applied {
		perVariant[a.Variant]++
	}
	for _, v := range Variants("../..") {
		if perVariant[v.Name] == 0 {
			t.Errorf("nothing of %s (%s) applied", v.Name, v.From)
		}
	}
	if perVariant["helm"] == 0 {
		t.Error("nothing installed by helm")
	}

	// The study: three shards with indexes 0 to 2, complete, and no shard
	// among the daemon's Service's endpoints.
	for _, job := range []string{"tokenprobe-study", "tokenprobe-study-merge"} {
		if err := cp.WaitFor(ctx, "job/"+job+" complete", "True", "get", "job", job, "-n", studyNS, "-o", `jsonpath={.status.conditions[?(@.type=="Complete")].status}`); err != nil {
			t.Fatal(err)
		}
	}
	pods := getPods(ctx, t, k, studyNS, "job-name=tokenprobe-study")
	var indexes []string
	for _, p := range pods {
		indexes = append(indexes, p.Metadata.Annotations["batch.kubernetes.io/job-completion-index"])
		if p.Spec.NodeName == "" || !p.hasEnv("JOB_COMPLETION_INDEX") {
			t.Errorf("shard pod %s: node %q, JOB_COMPLETION_INDEX in its environment: %v", p.Metadata.Name, p.Spec.NodeName, p.hasEnv("JOB_COMPLETION_INDEX"))
		}
	}
	slices.Sort(indexes)
	if !slices.Equal(indexes, []string{"0", "1", "2"}) {
		t.Errorf("the study's pods have completion indexes %v, want 0, 1, 2", indexes)
	}
	if err := cp.WaitFor(ctx, "the study namespace's daemon ready", "1", "get", "statefulset", "tokenprobe", "-n", studyNS, "-o", "jsonpath={.status.readyReplicas}"); err != nil {
		t.Fatal(err)
	}
	endpoints := serviceEndpoints(ctx, t, k, studyNS, "tokenprobe")
	if !slices.Equal(endpoints, []string{"tokenprobe-0"}) {
		t.Errorf("the daemon's Service has endpoints %v, want the daemon's pod tokenprobe-0 alone", endpoints)
	}

	// Three replicas in a location: ordinals 0 to 2.
	locNS := NamespacePrefix + "chart-location"
	if err := cp.WaitFor(ctx, "three replicas ready", "3", "get", "statefulset", "tokenprobe", "-n", locNS, "-o", "jsonpath={.status.readyReplicas}"); err != nil {
		t.Fatal(err)
	}
	for _, p := range getPods(ctx, t, k, locNS, "app.kubernetes.io/name=tokenprobe") {
		if want := strings.TrimPrefix(p.Metadata.Name, "tokenprobe-"); p.Metadata.Labels["apps.kubernetes.io/pod-index"] != want || p.Spec.NodeName == "" {
			t.Errorf("StatefulSet pod %s: pod-index %q on node %q", p.Metadata.Name, p.Metadata.Labels["apps.kubernetes.io/pod-index"], p.Spec.NodeName)
		}
	}

	// One probe per GPU node: the GPU node alone.
	dsNS := NamespacePrefix + "chart-daemonset"
	if err := cp.WaitFor(ctx, "the DaemonSet's pod ready", "1", "get", "daemonset", "tokenprobe", "-n", dsNS, "-o", "jsonpath={.status.numberReady}"); err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for _, p := range getPods(ctx, t, k, dsNS, "app.kubernetes.io/name=tokenprobe") {
		nodes = append(nodes, p.Spec.NodeName)
	}
	if !slices.Equal(nodes, []string{GPUNode}) {
		t.Errorf("the DaemonSet's pods are on %v, want %s alone", nodes, GPUNode)
	}

	// What a user runs against their cluster, verbatim.
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make: %v", err)
	}
	cmd := exec.CommandContext(ctx, "make", "deploy-test", "KUBECONFIG="+cp.Kubeconfig)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), Env+"="+bin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make deploy-test: %v\n%s", err, out)
	}
	listed := 0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "applied ") && strings.Contains(line, ": kept as sent") {
			listed++
		}
	}
	if want := len(rep.Applied) - perVariant["helm"]; listed != want {
		t.Errorf("make deploy-test listed %d objects kept as sent, the test applied %d:\n%s", listed, want, out)
	}
	t.Logf("make deploy-test KUBECONFIG=...: exit 0, %d objects listed", listed)
}

// claim is a volume and a claim bound to it for the study's artifacts
// (study.artifactsClaim in the chart's ci/study-values.yaml).
func claim(ns string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata: {name: tokenprobe-test-study-artifacts}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteMany]
  storageClassName: ""
  persistentVolumeReclaimPolicy: Delete
  hostPath: {path: /tmp/tokenprobe-study}
  claimRef: {namespace: %[1]s, name: study-artifacts}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: study-artifacts, namespace: %[1]s}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  volumeName: tokenprobe-test-study-artifacts
  resources: {requests: {storage: 1Gi}}
`, ns)
}

type pod struct {
	Metadata struct {
		Name        string
		Labels      map[string]string
		Annotations map[string]string
	}
	Spec struct {
		NodeName   string
		Containers []struct {
			Env []struct{ Name string }
		}
	}
}

func (p pod) hasEnv(name string) bool {
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == name {
				return true
			}
		}
	}
	return false
}

func getPods(ctx context.Context, t *testing.T, k Kubectl, ns, selector string) []pod {
	t.Helper()
	out, err := k.Run(ctx, nil, "get", "pods", "-n", ns, "-l", selector, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Items []pod }
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// serviceEndpoints lists the pods behind a Service, from its EndpointSlices.
func serviceEndpoints(ctx context.Context, t *testing.T, k Kubectl, ns, service string) []string {
	t.Helper()
	out, err := k.Run(ctx, nil, "get", "endpointslices", "-n", ns, "-l", "kubernetes.io/service-name="+service, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []struct {
			Endpoints []struct {
				TargetRef struct{ Name string }
			}
		}
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			names = append(names, e.TargetRef.Name)
		}
	}
	slices.Sort(names)
	return names
}
