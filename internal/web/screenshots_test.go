package web

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/browsertest"
	"github.com/tokenprobe/tokenprobe/internal/report"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

var screenshots = flag.Bool("screenshots", false, "regenerate the screenshots in docs/img (make screenshots)")

// TestScreenshots regenerates the pictures of the README and docs from the
// current code (make screenshots): the status page, a run's page and the
// report of the demo's staircase, taken by headless Chromium.
func TestScreenshots(t *testing.T) {
	if !*screenshots {
		t.Skip("make screenshots regenerates docs/img")
	}
	browser := browsertest.Chromium(t)
	demo, err := os.ReadFile(filepath.Join("..", "..", "configs", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, string(demo), true)
	for _, p := range []string{"baseline", "staircase"} {
		// The schedule may be running a profile on the endpoint: 409 until
		// it ends.
		started := false
		for deadline := time.Now().Add(2 * time.Minute); !started && time.Now().Before(deadline); time.Sleep(time.Second) {
			code, _ := f.do(t, "POST", "/api/v1/runs?profile="+p)
			started = code == 202
		}
		if !started || f.waitForRunWithin(p, 2*time.Minute) == nil {
			t.Fatalf("no run of %s", p)
		}
	}
	staircase := f.waitForRun(t, "staircase")
	img := filepath.Join("..", "..", "docs", "img")
	shot := func(name, url string, width, height int) {
		browsertest.Render(t, browser, url, "--hide-scrollbars", fmt.Sprintf("--window-size=%d,%d", width, height), "--screenshot="+filepath.Join(img, name))
		t.Logf("wrote docs/img/%s", name)
	}
	shot("status-page.png", f.srv.URL+"/", 1760, 1200)
	shot("run-page.png", fmt.Sprintf("%s/runs/%d", f.srv.URL, staircase.ID), 1280, 1600)
	page := filepath.Join(t.TempDir(), "report.html")
	out, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := report.HTML(out, "tokenprobe run: demo.yaml", []stats.Summary{*staircase.Summary}, []string{"concurrency"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	out.Close()
	shot("report-staircase.png", "file://"+page, 1280, 1400)
}
