package probehealth

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

// stall stops the whole process for d (SIGSTOP, then SIGCONT from a
// shell): a process the host gives no time to, as a busy machine or a
// throttled cgroup does to a probe.
func stall(t *testing.T, d time.Duration) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("stops itself with a shell's kill")
	}
	pid := os.Getpid()
	script := fmt.Sprintf("kill -STOP %d; sleep %.3f; kill -CONT %d", pid, d.Seconds(), pid)
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v %s", script, err, out)
	}
}
