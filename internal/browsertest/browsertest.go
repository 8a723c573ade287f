// Package browsertest finds a headless Chromium and renders pages with it,
// for the tests that read a page as a real browser builds it.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Find returns the browser, or "" where there is none; with
// TOKENPROBE_REQUIRE_BROWSER set (as .ci/run sets it) a missing browser
// fails the test instead.
func Find(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("TOKENPROBE_REQUIRE_BROWSER") != "" {
		t.Fatal("no chromium on PATH, and TOKENPROBE_REQUIRE_BROWSER is set")
	}
	return ""
}

// Chromium is Find, skipping the test where there is no browser.
func Chromium(t testing.TB) string {
	t.Helper()
	p := Find(t)
	if p == "" {
		t.Skip("no chromium on PATH (apt-get install chromium)")
	}
	return p
}

// Render loads url in the headless browser with extra flags
// (--dump-dom: the DOM it built) and returns what it printed.
func Render(t testing.TB, browser, url string, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir()}, extra...)
	out, err := exec.CommandContext(ctx, browser, append(args, url)...).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return string(out)
}
