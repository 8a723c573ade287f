package rundir

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/sink/records"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// recordColumns are records.csv's columns: records.jsonl's fields, the
// inter-chunk gaps and per-SLO verdicts left out (lists and maps do not
// make columns; the JSON has them).
var recordColumns = []string{"id", "x_request_id", "profile", "endpoint", "model", "level", "session_id", "turn", "start",
	"scheduled_ms", "dispatch_lag_ms", "outcome", "reason", "http_status", "ttft_ms", "ttst_ms", "time_to_first_output_token_ms", "itl_ms",
	"request_latency_ms", "content_chunks", "input_tokens", "input_tokens_source", "intended_input_tokens", "output_tokens",
	"output_tokens_source", "good", "anomaly", "retried", "error"}

func optional(v *float64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(*v, 'f', -1, 64)
}

func recordRow(r *records.Record) []string {
	turn := ""
	if r.Turn != nil {
		turn = strconv.Itoa(*r.Turn)
	}
	status := ""
	if r.HTTPStatus != 0 {
		status = strconv.Itoa(r.HTTPStatus)
	}
	return []string{strconv.FormatUint(r.ID, 10), r.RequestID, r.Profile, r.Endpoint, r.Model, strconv.FormatFloat(r.Level, 'f', -1, 64),
		r.Session, turn, r.Start.Format(time.RFC3339Nano),
		strconv.FormatFloat(r.ScheduledMs, 'f', -1, 64), strconv.FormatFloat(r.DispatchLagMs, 'f', -1, 64), r.Outcome, r.Reason, status,
		optional(r.TTFTMs), optional(r.TTSTMs), optional(r.TTFOMs), optional(r.ITLMs), optional(r.RequestLatencyMs),
		strconv.Itoa(r.ContentChunks), strconv.Itoa(r.InputTokens), r.InputSource, strconv.Itoa(r.IntendedInputTokens),
		strconv.Itoa(r.OutputTokens), r.OutputSource, strconv.FormatBool(r.Good), r.Anomaly, strconv.FormatBool(r.Retried), r.Error}
}

// EachRecord calls f with every record of dir's records.jsonl, in order.
func EachRecord(dir string, f func(*records.Record) error) error {
	in, err := os.Open(filepath.Join(dir, "records.jsonl"))
	if err != nil {
		return err
	}
	defer in.Close()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		var r records.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("%s:%d: %w", in.Name(), line, err)
		}
		if err := f(&r); err != nil {
			return err
		}
	}
	return sc.Err()
}

// writeCSV writes rows to path, the header first.
func writeCSV(path string, header []string, rows func(emit func([]string) error) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(bufio.NewWriter(f))
	err = w.Write(header)
	if err == nil {
		err = rows(w.Write)
	}
	w.Flush()
	return errors.Join(err, w.Error(), f.Close())
}

// writeRecordsCSV writes records.csv beside records.jsonl.
func writeRecordsCSV(dir string) error {
	return writeCSV(filepath.Join(dir, "records.csv"), recordColumns, func(emit func([]string) error) error {
		return EachRecord(dir, func(r *records.Record) error { return emit(recordRow(r)) })
	})
}

// distributions are the summary's per-request figures by the names
// summary.json gives them, with their units.
func distributions(s *stats.Summary) []struct {
	name, unit string
	d          stats.Dist
} {
	return []struct {
		name, unit string
		d          stats.Dist
	}{
		{"ttft_ms", "ms", s.TTFT}, {"ttst_ms", "ms", s.TTST}, {"time_to_first_output_token_ms", "ms", s.TTFO},
		{"itl_ms", "ms", s.ITL}, {"inter_chunk_latency_ms", "ms", s.InterChunk}, {"request_latency_ms", "ms", s.E2E},
		{"input_sequence_length", "tokens", s.ISL}, {"output_sequence_length", "tokens", s.OSL},
		{"output_tokens_per_second_per_user", "tokens/s", s.UserTPS}, {"dispatch_lag_ms", "ms", s.DispatchLag},
	}
}

// writeSummaryCSV writes summary.csv: one row per figure of summary.json
// that is a number, a distribution's statistics in columns.
func writeSummaryCSV(dir string, s *stats.Summary) error {
	header := []string{"metric", "unit", "count", "avg", "min", "max", "std", "p50", "p75", "p90", "p95", "p99"}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	return writeCSV(filepath.Join(dir, "summary.csv"), header, func(emit func([]string) error) error {
		for _, m := range distributions(s) {
			d := m.d
			if err := emit([]string{m.name, m.unit, strconv.Itoa(d.Count), f(d.Avg), f(d.Min), f(d.Max), f(d.Std), f(d.P50), f(d.P75), f(d.P90), f(d.P95), f(d.P99)}); err != nil {
				return err
			}
		}
		for _, m := range []struct {
			name, unit string
			v          float64
		}{
			{"requests", "requests", float64(s.Requests)}, {"success", "requests", float64(s.Success)}, {"errors", "requests", float64(s.Errors)},
			{"cancelled", "requests", float64(s.Cancelled)}, {"input_tokens", "tokens", float64(s.InputTokens)}, {"output_tokens", "tokens", float64(s.OutputTokens)},
			{"benchmark_duration_s", "s", s.DurationSeconds}, {"request_throughput", "requests/s", s.RequestThroughput},
			{"output_token_throughput", "tokens/s", s.OutputTokenThroughput}, {"goodput", "requests/s", s.Goodput},
			{"good", "requests", float64(s.Good)}, {"slo_attainment", "ratio", s.Attainment},
		} {
			row := make([]string, len(header)) // the width of every row, for readers that check it
			row[0], row[1], row[3] = m.name, m.unit, f(m.v)
			if err := emit(row); err != nil {
				return err
			}
		}
		return nil
	})
}

// aiperfNames are AIPerf's names of the distributions both tools measure
// alike (docs/MEASUREMENT.md says where they differ), for its
// profile_export_aiperf.json and .csv.
var aiperfNames = map[string]struct{ name, title string }{
	"request_latency_ms":                {"request_latency", "Request Latency (ms)"},
	"ttft_ms":                           {"time_to_first_token", "Time to First Token (ms)"},
	"ttst_ms":                           {"time_to_second_token", "Time to Second Token (ms)"},
	"itl_ms":                            {"inter_token_latency", "Inter Token Latency (ms)"},
	"output_sequence_length":            {"output_sequence_length", "Output Sequence Length (tokens)"},
	"input_sequence_length":             {"input_sequence_length", "Input Sequence Length (tokens)"},
	"output_tokens_per_second_per_user": {"output_token_throughput_per_user", "Output Token Throughput Per User (tokens/sec/user)"},
}

// aiperfUnit is AIPerf's spelling of a unit.
func aiperfUnit(unit string) string {
	if unit == "tokens/s" {
		return "tokens/sec/user"
	}
	return unit
}

// WriteAIPerf writes dir's run in AIPerf's export layout, for the figures
// both tools share: profile_export_aiperf.json and .csv (the summary) and
// profile_export.jsonl (a line per request), so that notebooks and
// dashboards built on AIPerf's files read tokenprobe's.
func WriteAIPerf(dir string, s *stats.Summary) error {
	out := map[string]any{}
	type row struct {
		title string
		d     stats.Dist
	}
	var rows []row
	for _, m := range distributions(s) {
		a, ok := aiperfNames[m.name]
		if !ok || m.d.Count == 0 {
			continue
		}
		d := m.d
		out[a.name] = map[string]any{"unit": aiperfUnit(m.unit), "avg": d.Avg, "min": d.Min, "max": d.Max, "std": d.Std,
			"p50": d.P50, "p75": d.P75, "p90": d.P90, "p95": d.P95, "p99": d.P99}
		rows = append(rows, row{a.title, d})
	}
	single := func(name, unit string, v float64) { out[name] = map[string]any{"unit": unit, "avg": v} }
	single("request_throughput", "requests/sec", s.RequestThroughput)
	single("output_token_throughput", "tokens/sec", s.OutputTokenThroughput)
	single("benchmark_duration", "sec", s.DurationSeconds)
	single("request_count", "requests", float64(s.Success))
	single("total_isl", "tokens", float64(s.InputTokens))
	single("total_osl", "tokens", float64(s.OutputTokens))
	if s.Objective > 0 || len(s.PerSLO) > 0 {
		single("goodput", "requests/sec", s.Goodput)
		out["good_request_count"] = map[string]any{"unit": "requests", "avg": float64(s.Good)}
	}
	out["error_request_count"] = map[string]any{"unit": "requests", "avg": float64(s.Errors)}
	out["was_cancelled"] = s.Interrupted
	if !s.Start.IsZero() {
		out["start_time"], out["end_time"] = s.Start.Format("2006-01-02T15:04:05.999999"), s.End.Format("2006-01-02T15:04:05.999999")
	}
	if err := WriteJSON(filepath.Join(dir, "profile_export_aiperf.json"), out); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	err := writeCSV(filepath.Join(dir, "profile_export_aiperf.csv"), []string{"Metric", "avg", "min", "max", "p50", "p75", "p90", "p95", "p99", "std"},
		func(emit func([]string) error) error {
			for _, r := range rows {
				d := r.d
				if err := emit([]string{r.title, f(d.Avg), f(d.Min), f(d.Max), f(d.P50), f(d.P75), f(d.P90), f(d.P95), f(d.P99), f(d.Std)}); err != nil {
					return err
				}
			}
			return nil
		})
	if err != nil {
		return err
	}
	return writeAIPerfRecords(dir)
}

// writeAIPerfRecords writes profile_export.jsonl: AIPerf's per-request
// layout (metadata, metrics with units, error) of records.jsonl.
func writeAIPerfRecords(dir string) error {
	f, err := os.Create(filepath.Join(dir, "profile_export.jsonl"))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	value := func(v float64, unit string) map[string]any { return map[string]any{"value": v, "unit": unit} }
	err = EachRecord(dir, func(r *records.Record) error {
		start := r.Start.UnixNano()
		meta := map[string]any{"session_num": r.ID - 1, "x_request_id": r.RequestID, "turn_index": 0,
			"request_start_ns": start, "benchmark_phase": "profiling", "was_cancelled": r.Outcome == "cancelled"}
		if r.Turn != nil {
			meta["turn_index"] = *r.Turn
		}
		if r.RequestLatencyMs != nil {
			meta["request_end_ns"] = start + int64(*r.RequestLatencyMs*1e6)
		}
		line := map[string]any{"metadata": meta, "metrics": nil, "error": nil}
		if r.Outcome == "success" {
			m := map[string]any{"input_sequence_length": value(float64(r.InputTokens), "tokens"),
				"output_sequence_length": value(float64(r.OutputTokens), "tokens")}
			for name, v := range map[string]*float64{"time_to_first_token": r.TTFTMs, "time_to_second_token": r.TTSTMs,
				"request_latency": r.RequestLatencyMs, "inter_token_latency": r.ITLMs} {
				if v != nil {
					m[name] = value(*v, "ms")
				}
			}
			if len(r.InterChunkMs) > 0 {
				m["inter_chunk_latency"] = map[string]any{"value": r.InterChunkMs, "unit": "ms"}
			}
			line["metrics"] = m
		} else {
			line["error"] = map[string]any{"code": r.HTTPStatus, "type": strings.TrimSpace(r.Reason + " " + r.Outcome), "message": r.Error}
		}
		return enc.Encode(line)
	})
	return errors.Join(err, w.Flush(), f.Close())
}
