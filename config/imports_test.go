package config

import (
	"go/build"
	"strings"
	"testing"
)

// config is the schema and nothing else: it imports no tokenprobe
// package, so that no other package is one import away from a cycle with
// it, and reading a configuration does not pull in the engine. Checks that
// need other packages or the files a configuration names belong in setup.
func TestImportsNoTokenprobePackage(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if strings.HasPrefix(imp, "github.com/tokenprobe/tokenprobe") {
			t.Errorf("config imports %s", imp)
		}
	}
}
