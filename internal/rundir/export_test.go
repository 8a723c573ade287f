package rundir

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/sink/records"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// A run's folder has its records and summary as CSV beside the JSON and,
// when asked, in AIPerf's layout, each holding what the JSON holds.
func TestExports(t *testing.T) {
	dir := t.TempDir()
	r, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.AIPerf = true
	agg := stats.NewAggregator("p", "e", "m", 4, 0.9)
	t0 := time.Unix(1_800_000_000, 0)
	set := slo.Set{Thresholds: []slo.Threshold{{Kind: slo.TTFT, Max: 150 * time.Millisecond}}, Objective: 0.9}
	for i := range 5 {
		req := result.Request{ID: uint64(i + 1), Profile: "p", Endpoint: "e", Model: "m", Level: 4, Streaming: true, Outcome: result.Success,
			Scheduled: t0, Start: t0, End: t0.Add(time.Second), TTFT: time.Duration(50*(i+1)) * time.Millisecond, TTST: 10 * time.Millisecond,
			E2E: time.Second, ContentChunks: 3, OutputTokens: 3, OutputSource: result.SourceUsage, InputTokens: 20, InputSource: result.SourceUsage,
			Gaps: []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}}
		if i == 4 {
			req.Outcome, req.Reason, req.Err, req.HTTPStatus, req.Retried = result.Error, result.ReasonServerError, `HTTP 500: "boom, twice"`, 500, true
		}
		v := set.Evaluate(&req)
		agg.Add(&req, v)
		r.Sink().Observe(&req, v)
	}
	s := agg.Summary()
	if err := r.Finish(&s, "concurrency"); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, filepath.Join(dir, "records.csv"))
	if len(rows) != 6 || strings.Join(rows[0], ",") != strings.Join(recordColumns, ",") {
		t.Fatalf("records.csv: %d rows, header %v", len(rows), rows[0])
	}
	col := func(name string) int {
		for i, c := range rows[0] {
			if c == name {
				return i
			}
		}
		t.Fatalf("no column %s", name)
		return 0
	}
	if last := rows[5]; last[col("error")] != `HTTP 500: "boom, twice"` || last[col("retried")] != "true" || last[col("ttft_ms")] != "" || rows[1][col("ttft_ms")] != "50" {
		t.Fatalf("rows %v / %v", rows[1], last)
	}
	// TTFT of the four successes: 50, 100, 150, 200 ms.
	sum := readCSV(t, filepath.Join(dir, "summary.csv"))
	if sum[1][0] != "ttft_ms" || sum[1][2] != "4" || sum[1][3] != "125" {
		t.Fatalf("summary.csv ttft row %v, want 4 values averaging 125", sum[1])
	}
	var loose map[string]any
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, "profile_export_aiperf.json"))), &loose); err != nil {
		t.Fatal(err)
	}
	ttft := loose["time_to_first_token"].(map[string]any)
	if ttft["unit"] != "ms" || ttft["avg"] != s.TTFT.Avg || ttft["p99"] != s.TTFT.P99 {
		t.Fatalf("profile_export_aiperf.json time_to_first_token %v, summary %+v", ttft, s.TTFT)
	}
	if loose["error_request_count"].(map[string]any)["avg"] != 1.0 {
		t.Fatalf("error_request_count %v", loose["error_request_count"])
	}
	lines := strings.Split(strings.TrimSpace(readFile(t, filepath.Join(dir, "profile_export.jsonl"))), "\n")
	if len(lines) != 5 || !strings.Contains(lines[0], `"time_to_first_token":{"unit":"ms","value":50}`) || !strings.Contains(lines[4], `"code":500`) {
		t.Fatalf("profile_export.jsonl:\n%s", strings.Join(lines, "\n"))
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(readFile(t, path))).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rows
}

// docs/ARTIFACTS.md names every field of summary.json and records.jsonl,
// so that a field added to either is documented or this fails.
func TestArtifactsDocsNameEveryField(t *testing.T) {
	doc := readFile(t, "../../docs/ARTIFACTS.md")
	for _, v := range []any{stats.Summary{}, records.Record{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			if !strings.Contains(doc, "`"+name+"`") {
				t.Errorf("docs/ARTIFACTS.md does not name %s's field %s", typ.Name(), name)
			}
		}
	}
}
