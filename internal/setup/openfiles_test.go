package setup

import (
	"strings"
	"testing"

	"github.com/tokenprobe/tokenprobe/internal/config"
)

// A profile whose streams cannot all be open under the open-file limit
// is refused before it runs, at its load, naming the limit, how to raise
// it and how many processes would hold it; one that fits, or an open loop
// without a cap, is not.
func TestCheckOpenFiles(t *testing.T) {
	cfg, err := config.Parse("tokenprobe.yaml", []byte(`endpoints:
  - {name: vllm, base_url: "http://127.0.0.1:8000/v1", model: m}
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
	err = CheckOpenFiles(cfg, cfg.Profiles, 1024, 1)
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	for _, want := range []string{
		"tokenprobe.yaml:7:5: profiles[1].load: 50000 streams at once need about 50064 open files, and this process may open 1024: raise the limit (ulimit -n 65536",
		// ceil(50000/52) = 962 streams and 64 more: 1026 > 1024; 53 hold it.
		"and run again, or spread them over processes (tokenprobe run --processes 53)",
		"profiles[2].load: 2000 streams", "profiles[4].load: 3000 streams",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("no %q in:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "profiles[0]") || strings.Contains(msg, "profiles[3]") {
		t.Errorf("a profile that fits, or an uncapped open loop, refused:\n%s", msg)
	}
	if err := CheckOpenFiles(cfg, cfg.Profiles, 1<<20, 1); err != nil {
		t.Errorf("under a limit of a million: %v", err)
	}
	if n := ProcessesFor(cfg, cfg.Profiles, 1024); n != 53 {
		t.Errorf("--processes auto under 1024 files: %d processes, want 53", n)
	}
	if n := ProcessesFor(cfg, cfg.Profiles, 1<<20); n != 1 {
		t.Errorf("--processes auto under a million files: %d processes, want 1", n)
	}
	if OpenFileLimit() == 0 {
		t.Error("the open-file limit cannot be read")
	}
}

// A process that runs one share of a study (a shard, or one of `run
// --processes`) needs files for its share only; a stream to a `simulator:`
// endpoint needs two, the simulator's end being in the same process.
func TestCheckOpenFilesOfAShareAndOfASimulator(t *testing.T) {
	cfg, err := config.Parse("tokenprobe.yaml", []byte(`endpoints:
  - {name: vllm, base_url: "http://127.0.0.1:8000/v1", model: m}
  - {name: sim, simulator: {}}
profiles:
  - name: remote
    endpoints: [vllm]
    load: {concurrency: 50000, duration: 1m}
  - name: local
    endpoints: [sim]
    load: {concurrency: 600, duration: 1m}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckOpenFiles(cfg, cfg.Profiles[:1], 20000, 3); err != nil {
		t.Errorf("a third of 50000 streams under 20000 files: %v", err)
	}
	err = CheckOpenFiles(cfg, cfg.Profiles[:1], 20000, 2)
	if err == nil || !strings.Contains(err.Error(), "profiles[0].load: 25000 streams at once (this process's share of 50000) need about 25064 open files, and this process may open 20000: raise the limit (ulimit -n 32768") ||
		strings.Contains(err.Error(), "--processes") {
		t.Errorf("half of 50000 streams under 20000 files: %v", err)
	}
	err = CheckOpenFiles(cfg, cfg.Profiles[1:], 1024, 1)
	if err == nil || !strings.Contains(err.Error(), "profiles[1].load: 600 streams at once need about 1264 open files (two a stream: the simulator serves them in this process), and this process may open 1024") {
		t.Errorf("600 streams to an in-process simulator under 1024 files: %v", err)
	}
}
