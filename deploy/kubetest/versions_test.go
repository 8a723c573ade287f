package kubetest

import (
	"os"
	"regexp"
	"testing"
)

// The versions tools/kube.sh builds are the ones this package names, and
// the CRDs it applies are of the versions whose Go types deploy/render
// decodes into (deploy/go.mod): one version of each, everywhere.
func TestVersionsAgree(t *testing.T) {
	script, err := os.ReadFile("../../tools/kube.sh")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	in := func(src []byte, re string) string {
		m := regexp.MustCompile(re).FindSubmatch(src)
		if m == nil {
			t.Fatalf("%s: not found", re)
		}
		return string(m[1])
	}
	for name, want := range map[string]string{`k8s=(\S+)`: Kubernetes, `etcd=(\S+)`: Etcd, `kwok=(\S+)`: Kwok, `helm=(\S+)`: Helm,
		`promop=(\S+)`: CRDs["prometheus-operator"], `rollouts=(\S+)`: CRDs["argo-rollouts"], `flagger=(\S+)`: CRDs["flagger"]} {
		if got := in(script, `(?m)\b`+name); got != want {
			t.Errorf("tools/kube.sh has %s %s, kubetest %s", name, got, want)
		}
	}
	for re, want := range map[string]string{
		`prometheus-operator/prometheus-operator/pkg/apis/monitoring (\S+)`: CRDs["prometheus-operator"],
		`github.com/argoproj/argo-rollouts (\S+)`:                           CRDs["argo-rollouts"],
		`github.com/fluxcd/flagger (\S+)`:                                   CRDs["flagger"],
		`helm.sh/helm/v3 (\S+)`:                                             Helm,
	} {
		if got := in(mod, re); got != want {
			t.Errorf("deploy/go.mod has %s, kubetest %s (%s)", got, want, re)
		}
	}
	if got := in(mod, `k8s.io/api (\S+)`); got != "v0"+Kubernetes[2:] {
		t.Errorf("deploy/go.mod has k8s.io/api %s, the control plane is %s", got, Kubernetes)
	}
}
