// Package browsertest finds a headless Chromium and renders pages with it,
// for the tests that read a page as a real browser builds it.
package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
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

// labelCheck finds, in the page as the browser lays it out, every chart
// label that overlaps another label of its chart or runs past the
// chart's edge, and every text clipped by its box (a bar's segment).
const labelCheck = `<script>
(() => {
  const probs = [];
  const box = e => e.getBoundingClientRect();
  const hit = (a, c) => a.width > 0 && c.width > 0 && a.left < c.right - 0.5 && c.left < a.right - 0.5 && a.top < c.bottom - 0.5 && c.top < a.bottom - 0.5;
  for (const svg of document.querySelectorAll('svg')) {
    const s = box(svg);
    const name = svg.getAttribute('aria-label') || 'a chart';
    const texts = [...svg.querySelectorAll('text')].map(t => ({t: t.textContent, b: box(t)}));
    for (const x of texts) {
      if (x.b.width > 0 && (x.b.left < s.left - 0.5 || x.b.right > s.right + 0.5 || x.b.top < s.top - 0.5 || x.b.bottom > s.bottom + 0.5)) {
        probs.push(name + ': "' + x.t + '" runs past the chart');
      }
    }
    for (let i = 0; i < texts.length; i++) {
      for (let j = i + 1; j < texts.length; j++) {
        if (hit(texts[i].b, texts[j].b)) probs.push(name + ': "' + texts[i].t + '" overlaps "' + texts[j].t + '"');
      }
    }
  }
  for (const e of document.querySelectorAll('*')) {
    const st = getComputedStyle(e);
    if ((st.overflow === 'hidden' || st.overflowX === 'hidden') && e.textContent.trim() !== '' && e.scrollWidth > e.clientWidth + 1) {
      probs.push('"' + e.textContent.trim() + '" is clipped by its box');
    }
  }
  document.body.setAttribute('data-label-problems', JSON.stringify(probs));
})();
</script>`

// LabelProblems lays page (a whole HTML document) out in the browser, at
// width pixels, and returns its labels that overlap, run past their chart
// or are clipped.
func LabelProblems(t testing.TB, browser, page string, width int) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "page.html")
	i := strings.LastIndex(page, "</body>")
	if i < 0 {
		i = len(page)
	}
	if err := os.WriteFile(path, []byte(page[:i]+labelCheck+page[i:]), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := Render(t, browser, "file://"+path, fmt.Sprintf("--window-size=%d,900", width), "--dump-dom")
	m := regexp.MustCompile(`data-label-problems="([^"]*)"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the page's labels were not checked:\n%.500s", dom)
	}
	var probs []string
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &probs); err != nil {
		t.Fatalf("the label check's answer %q: %v", m[1], err)
	}
	return probs
}
