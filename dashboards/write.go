// Package dashboards holds tokenprobe's Grafana dashboards as the JSON
// files beside it, generated from the metric catalog by package
// dashboards/gen with the grafana-foundation-sdk. The binary carries the
// files, not the generator: `tokenprobe generate dashboards` takes no
// option that would change them, and the SDK was 1.1 MB of the mapped
// binary of a daemon that never draws a dashboard. Tests here check every
// query's metrics against the catalog and every query against
// Prometheus' own parser.
package dashboards

import (
	"embed"
	"os"
	"path/filepath"
	"sort"
)

//go:embed *.json
var files embed.FS

// Files returns every dashboard's JSON by file name.
func Files() (map[string][]byte, error) {
	entries, err := files.ReadDir(".")
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := files.ReadFile(e.Name())
		if err != nil {
			return nil, err
		}
		out[e.Name()] = b
	}
	return out, nil
}

// Write writes the dashboards into dir and returns the paths.
func Write(dir string) ([]string, error) {
	files, err := Files()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths, nil
}
