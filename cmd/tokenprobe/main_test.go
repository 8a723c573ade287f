package main

import (
	"testing"

	"github.com/tokenprobe/tokenprobe/runonce"
)

func TestCheckExitCodes(t *testing.T) {
	if code := run([]string{"check", "-c", "../../configs/demo.yaml"}); code != 0 {
		t.Errorf("valid config: exit %d", code)
	}
	if code := run([]string{"check", "-c", "../../config/testdata/invalid/unknown_field.yaml"}); code != runonce.ExitConfig {
		t.Errorf("invalid config: exit %d, want %d", code, runonce.ExitConfig)
	}
	if code := run([]string{"run"}); code != runonce.ExitConfig {
		t.Errorf("missing flag: exit %d, want %d", code, runonce.ExitConfig)
	}
}
