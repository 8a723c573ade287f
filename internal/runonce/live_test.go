package runonce

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: the side a program writes to (a
// terminal to it) and the side that reads what it wrote.
func openPTY(t *testing.T) (term, reader *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlocking the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Skipf("naming the pseudo-terminal: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("opening the pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return s, m
}

var ansi = regexp.MustCompile(`\x1b\[[0-9]*[A-Za-z]`)

// On a terminal the run shows one block that redraws itself in place; its
// last frame, read back from the terminal, has the finished run's
// figures. Without a terminal the progress is plain lines.
func TestLiveViewOnATerminal(t *testing.T) {
	term, reader := openPTY(t)
	var got bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := reader.Read(buf)
			got.Write(buf[:n])
			if err != nil || strings.Contains(got.String(), "DONE-MARK") {
				return
			}
		}
	}()
	cfg := writeConfig(t, `
endpoints:
  - name: sim
    simulator: {slots: 2, decode_base: 2ms, seed: 1}
profiles:
  - name: live
    load: {concurrency: 2, requests: 40}
    workload: {output_tokens: {mean: 8}}
    slo: {ttft: 10s, objective: 0.5}
`)
	var out bytes.Buffer
	code := Run(context.Background(), Options{ConfigFile: cfg, Out: &out, Progress: term, ProgressEvery: 50 * time.Millisecond})
	_, _ = term.WriteString("DONE-MARK\n")
	select {
	case <-read:
	case <-time.After(5 * time.Second):
		t.Fatal("the terminal's output was not read back")
	}
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, out.String())
	}
	screen := got.String()
	if !strings.Contains(screen, "\x1b[5A") {
		t.Fatalf("the block was never redrawn in place:\n%q", screen)
	}
	// The last frame: after the last move up.
	last := screen[strings.LastIndex(screen, "\x1b[5A"):]
	last = ansi.ReplaceAllString(last, "")
	for _, want := range []string{"live · concurrency 2", "[########################] 100%", "40 done · 0 in flight · 0 errors", "TTFT p50", "ITL p50", "SLO attainment 100.0%"} {
		if !strings.Contains(last, want) {
			t.Errorf("the last frame lacks %q:\n%s", want, last)
		}
	}

	// Not a terminal: plain lines, no escape sequence.
	var plain, out2 bytes.Buffer
	if code := Run(context.Background(), Options{ConfigFile: cfg, Out: &out2, Progress: &plain, ProgressEvery: 20 * time.Millisecond}); code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	if strings.Contains(plain.String(), "\x1b[") || !strings.Contains(plain.String(), " done · ") {
		t.Errorf("progress without a terminal:\n%q", plain.String())
	}
}
