package dashboards

import (
	"os"
	"path/filepath"
	"sort"
)

// Files returns every dashboard's JSON by file name.
func Files() (map[string][]byte, error) {
	ds, err := Dashboards()
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for name, d := range ds {
		b, err := Marshal(d)
		if err != nil {
			return nil, err
		}
		out[name] = b
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
