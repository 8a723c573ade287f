// Command render writes deploy/kubernetes/tokenprobe.yaml from the chart.
package main

import (
	"fmt"
	"os"

	"github.com/tokenprobe/tokenprobe/deploy/render"
)

func main() {
	out, err := render.Chart("helm/tokenprobe", "", "tokenprobe", "monitoring")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile("kubernetes/tokenprobe.yaml", []byte(Header+out), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// Header marks the generated file.
const Header = "# Generated from deploy/helm/tokenprobe by `make manifests` (default values, release tokenprobe,\n# namespace monitoring); do not edit.\n"
