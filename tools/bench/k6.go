package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// k6Script posts the same request as the floor client and reads each
// answer to its end. k6 has no streaming reader: it takes the whole body
// and then the next iteration starts, so it is measured on chunks per
// second, CPU and memory, never on timing.
const k6Script = `import http from 'k6/http';

const url = __ENV.TP_URL + '/chat/completions';
const body = JSON.stringify({
  model: 'tokenprobe-sim',
  messages: [{ role: 'user', content: 'the of and to in is that for it as with was on be by at' }],
  max_tokens: Number(__ENV.TP_TOKENS),
  stream: true,
});
const params = { headers: { 'Content-Type': 'application/json' }, responseType: 'none', timeout: '10m' };

export const options = JSON.parse(__ENV.TP_OPTIONS);

export default function () {
  http.post(url, body, params);
}

export function handleSummary(data) {
  const m = data.metrics;
  const v = (name, field) => (m[name] ? m[name].values[field] : 0);
  return {
    [__ENV.TP_OUT]: JSON.stringify({
      requests: v('http_reqs', 'count'),
      failed: v('http_req_failed', 'passes'),
      dropped: v('dropped_iterations', 'count'),
      vus_max: v('vus_max', 'value'),
      duration_ms: data.state.testRunDurationMs,
    }),
  };
}
`

// k6Options is the scenario for a level: constant VUs for streams,
// constant arrival rate for an open loop, with as many VUs as Little's law
// says streams will be open, twice over for bursts.
func k6Options(l Load) map[string]any {
	sc := map[string]any{"duration": fmtSeconds(l.Duration), "gracefulStop": "10m"}
	if l.Streams > 0 {
		sc["executor"], sc["vus"] = "constant-vus", l.Streams
	} else {
		open := int(math.Ceil(l.openStreams()))
		sc["executor"], sc["rate"], sc["timeUnit"] = "constant-arrival-rate", int(math.Round(l.Rate)), "1s"
		sc["preAllocatedVUs"], sc["maxVUs"] = open+10, 2*open+10
	}
	return map[string]any{
		"scenarios":             map[string]any{"bench": sc},
		"discardResponseBodies": true,
		"summaryTrendStats":     []string{"avg", "p(99)", "max"},
	}
}

func fmtSeconds(d time.Duration) string { return fmt.Sprintf("%ds", int(d.Seconds())) }

func measureK6(ctx context.Context, k6 string, l Load) (Measurement, error) {
	dir, err := os.MkdirTemp("", "tokenprobe-bench-k6-")
	if err != nil {
		return Measurement{}, err
	}
	defer os.RemoveAll(dir)
	script, out := filepath.Join(dir, "bench.js"), filepath.Join(dir, "summary.json")
	if err := os.WriteFile(script, []byte(k6Script), 0o644); err != nil {
		return Measurement{}, err
	}
	optJSON, _ := json.Marshal(k6Options(l))
	cmd := exec.CommandContext(ctx, k6, "run", "--quiet", "--no-color", "--no-usage-report", script)
	cmd.Env = append(os.Environ(), "TP_URL="+l.URL, fmt.Sprintf("TP_TOKENS=%d", l.Tokens), "TP_OUT="+out, "TP_OPTIONS="+string(optJSON), "K6_NO_USAGE_REPORT=true")
	var stderr strings.Builder
	cmd.Stderr, cmd.Stdout = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		return Measurement{}, err
	}
	rss := sampleRSS(cmd.Process.Pid)
	err = cmd.Wait()
	m := Measurement{Load: l, PeakRSS: rss.Stop()}
	if err != nil {
		return m, fmt.Errorf("k6: %w: %.500s", err, stderr.String())
	}
	m.addRusage(cmd.ProcessState.SysUsage().(*syscall.Rusage))
	data, err := os.ReadFile(out)
	if err != nil {
		return m, fmt.Errorf("k6 wrote no summary: %w: %.500s", err, stderr.String())
	}
	var s struct {
		Requests   float64 `json:"requests"`
		Failed     float64 `json:"failed"`
		Dropped    float64 `json:"dropped"`
		VUsMax     float64 `json:"vus_max"`
		DurationMS float64 `json:"duration_ms"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return m, fmt.Errorf("k6 summary: %w", err)
	}
	ok := int64(s.Requests - s.Failed)
	m.Client = ClientResult{
		Kind: KindK6, Requests: int64(s.Requests), Errors: int64(s.Failed), Chunks: ok * int64(l.Tokens),
		Seconds: s.DurationMS / 1000, PeakInFlight: int64(s.VUsMax), Dropped: int64(s.Dropped),
	}
	if l.Rate > 0 {
		// An open loop's VUs are a pool, not open streams: Little's law gives those.
		m.Client.PeakInFlight = int64(math.Ceil(l.openStreams()))
	}
	return m, nil
}

func k6Version(k6 string) string {
	out, err := exec.Command(k6, "version").Output()
	if err != nil {
		return "unknown"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}
