//go:build unix

package runonce

import (
	"strings"
	"syscall"
	"testing"
)

// Under a low open-file limit set on this process, a profile with more
// streams than it allows is refused with the limit and how to raise it,
// before any request: not a run full of connect errors.
func TestLowOpenFileLimitIsRefusedByName(t *testing.T) {
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
		t.Skip(err)
	}
	low := was
	low.Cur = 256
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &was) })
	cfg := writeConfig(t, fastSim+`
profiles:
  - name: wide
    load: {concurrency: 500, requests: 500}
`)
	code, out, errOut := runCLI(t, Options{ConfigFile: cfg})
	if code != ExitConfig || !strings.Contains(errOut, "tokenprobe.yaml:8:5: profiles[0].load: 500 streams at once need about 1064 open files (two a stream: the simulator serves them in this process), and this process may open 256: raise the limit (ulimit -n 2048") ||
		strings.Contains(out, "Running profile") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}
