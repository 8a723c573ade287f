// Package render renders the Helm chart with Helm's own engine, as `helm
// template` does, so the chart is checked and the plain manifests are made
// without a helm binary.
package render

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"sigs.k8s.io/yaml"
)

// Chart renders the chart at dir with the values file (optional) for a
// release, and returns the manifests as one YAML stream in file order.
func Chart(dir, valuesFile, release, namespace string) (string, error) {
	chart, err := loader.Load(dir)
	if err != nil {
		return "", err
	}
	vals := map[string]any{}
	if valuesFile != "" {
		b, err := os.ReadFile(valuesFile)
		if err != nil {
			return "", err
		}
		if err := yaml.Unmarshal(b, &vals); err != nil {
			return "", fmt.Errorf("%s: %w", valuesFile, err)
		}
	}
	if err := chartutil.ProcessDependencies(chart, vals); err != nil {
		return "", err
	}
	opts := chartutil.ReleaseOptions{Name: release, Namespace: namespace, IsInstall: true, Revision: 1}
	rv, err := chartutil.ToRenderValues(chart, vals, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return "", err
	}
	files, err := engine.Render(chart, rv)
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if strings.HasSuffix(name, ".yaml") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		body := strings.TrimSpace(files[name])
		if body == "" {
			continue
		}
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", name, body)
	}
	return b.String(), nil
}
