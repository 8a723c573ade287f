package setup

import (
	"strings"
	"testing"

	"github.com/tokenprobe/tokenprobe/config"
)

// A profile whose streams cannot all be open under the open-file limit
// is refused before it runs, at its load, naming the limit and how to
// raise it; one that fits, or an open loop without a cap, is not.
func TestCheckOpenFiles(t *testing.T) {
	cfg, err := config.Parse("tokenprobe.yaml", []byte(`endpoints:
  - {name: sim, simulator: {}}
profiles:
  - name: small
    load: {concurrency: 100, requests: 10}
  - name: big
    load: {stages: [{concurrency: 10, requests: 10}, {concurrency: 50000, duration: 1m}]}
  - name: ramp
    load: {concurrency: 10, ramp_to: 2000, duration: 1m}
  - name: open
    load: {rate: 5000, duration: 1m}
  - name: capped
    load: {rate: 5000, max_concurrency: 3000, duration: 1m}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		profile string
		streams int
	}{{"small", 100}, {"big", 50000}, {"ramp", 2000}, {"open", 0}, {"capped", 3000}} {
		if got := StreamsOf(cfg.Profile(c.profile)); got != c.streams {
			t.Errorf("%s: %d streams, want %d", c.profile, got, c.streams)
		}
	}
	err = CheckOpenFiles(cfg, cfg.Profiles, 1024)
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	for _, want := range []string{
		"tokenprobe.yaml:7:5: profiles[1].load: 50000 streams at once need about 50064 open files, and this process may open 1024: raise the limit (ulimit -n 65536",
		"profiles[2].load: 2000 streams", "profiles[4].load: 3000 streams",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("no %q in:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "profiles[0]") || strings.Contains(msg, "profiles[3]") {
		t.Errorf("a profile that fits, or an uncapped open loop, refused:\n%s", msg)
	}
	if err := CheckOpenFiles(cfg, cfg.Profiles, 1<<20); err != nil {
		t.Errorf("under a limit of a million: %v", err)
	}
	if OpenFileLimit() == 0 {
		t.Error("the open-file limit cannot be read")
	}
}
