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
// The one exception is a leaf that imports nothing of tokenprobe's:
// internal/regexcost, the bound every user expression passes, said once
// for the configuration's checks and the datasets' expectations.
func TestImportsNoTokenprobePackage(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if strings.HasPrefix(imp, "github.com/tokenprobe/tokenprobe") && imp != "github.com/tokenprobe/tokenprobe/internal/regexcost" {
			t.Errorf("config imports %s", imp)
		}
	}
}
