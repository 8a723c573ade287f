package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

// `--help` lists a command's flags under the headings of flagGroups, in
// their order, each flag once, and the rest under "Flags".
func TestHelpGroupsTheFlags(t *testing.T) {
	var out bytes.Buffer
	app := kingpin.New("t", "").UsageWriter(&out).Terminate(nil)
	groupedUsage(app)
	cmd := app.Command("run", "")
	for _, f := range []string{"url", "concurrency", "input-tokens", "goodput", "profile", "debug.trace", "other-flag"} {
		cmd.Flag(f, "help of "+f).String()
	}
	_, _ = app.Parse([]string{"run", "--help"})
	text := out.String()
	last := -1
	for _, want := range []string{"Endpoint (a profile from flags):\n  --url", "Load:\n  --concurrency", "Workload:\n  --input-tokens",
		"SLO:\n  --goodput", "Configuration and output:\n  --profile", "Debugging:\n  --debug.trace", "Flags:\n"} {
		i := strings.Index(text, want)
		if i < 0 || i < last {
			t.Fatalf("no %q after the heading before it:\n%s", want, text)
		}
		last = i
	}
	if strings.Count(text, "--url") != 1 || !strings.Contains(text[last:], "--other-flag") {
		t.Fatalf("flags listed twice, or the ungrouped one missing:\n%s", text)
	}
}

// The headings are the run command's: another command's flag of the same
// name is listed under "Flags".
func TestHelpGroupsOnlyTheRunCommand(t *testing.T) {
	var out bytes.Buffer
	app := kingpin.New("t", "").UsageWriter(&out).Terminate(nil)
	groupedUsage(app)
	app.Command("sim", "").Flag("model", "the model served").String()
	_, _ = app.Parse([]string{"sim", "--help"})
	if text := out.String(); strings.Contains(text, "Endpoint (a profile from flags)") || !strings.Contains(text, "Flags:") {
		t.Fatalf("sim's --model under the run's heading:\n%s", text)
	}
}

// Help goes to stdout, where it was asked for: `tokenprobe run --help |
// less` shows it (it went to stderr, and the pager showed nothing).
func TestHelpIsOnStdout(t *testing.T) {
	cmd := command(t, "", "run", "--help")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("run --help: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "usage: tokenprobe run") || stderr.Len() > 0 {
		t.Fatalf("stdout %.200q, stderr %.200q", stdout.String(), stderr.String())
	}
}
