// Package merge joins the artifacts of one study run in shards (`tokenprobe
// run --shard.index I --shard.count N`, one per pod of an Indexed Job)
// into the artifacts of one run: the records joined, and every figure
// computed again from them, never averaged across shards.
package merge

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/report"
	"github.com/tokenprobe/tokenprobe/internal/rundir"
	"github.com/tokenprobe/tokenprobe/internal/sink/records"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// MaxStartSpread is how far apart the shards' first requests may be
// before the merge warns: beyond it the shards did not load the endpoint
// at once (a missed --start-at, a slow pod), and the joined figures mix
// times of unequal load.
const MaxStartSpread = 2 * time.Second

// Run is one shard's run of one profile against one endpoint.
type Run = rundir.Loaded

// Load reads the runs under dir as compare reads them (rundir.Find): a
// run's folder, a `tokenprobe run` folder holding one per profile, or an
// --artifacts-dir holding `tokenprobe run` folders (its newest).
func Load(dir string) ([]*Run, error) {
	resolved, _, err := rundir.Find(dir)
	if err != nil {
		return nil, err
	}
	return rundir.Load(resolved)
}

// Merged is one profile and endpoint across its shards.
type Merged struct {
	Summary stats.Summary
	Records []records.Record
	// Shards are the runs it joins, in the order given.
	Shards []*Run
	// StartSpread is how far apart the shards' first requests were.
	StartSpread time.Duration
}

// Key names a profile and endpoint.
func Key(s *stats.Summary) string { return s.Profile + " on " + s.Endpoint }

// Check refuses what must not be merged: the same shard given twice (by
// folder, or by its index among the same count), and shards of one
// profile and endpoint that differ in what they ran (their shard count,
// model, SLO or objective): figures joined from them would be of no one
// run.
func Check(runs []*Run) error {
	seen := map[string]string{}
	for _, r := range runs {
		abs, err := filepath.Abs(r.Dir)
		if err != nil {
			abs = r.Dir
		}
		if resolved, err := filepath.EvalSymlinks(abs); err == nil {
			abs = resolved
		}
		if prev, ok := seen[abs]; ok {
			return fmt.Errorf("%s is given twice (as %s and %s): each shard once", abs, prev, r.Dir)
		}
		seen[abs] = r.Dir
	}
	by := map[string][]*Run{}
	for _, r := range runs {
		by[Key(&r.Summary)] = append(by[Key(&r.Summary)], r)
	}
	for k, shards := range by {
		first := shards[0]
		index := map[int]string{}
		for _, sh := range shards {
			s := &sh.Summary
			if s.Shard != nil {
				if prev, ok := index[s.Shard.Index]; ok {
					return fmt.Errorf("%s: %s and %s are both shard %d of %d: the same shard twice?", k, prev, sh.Dir, s.Shard.Index, s.Shard.Count)
				}
				index[s.Shard.Index] = sh.Dir
			}
			if why := differs(&first.Summary, s); why != "" {
				return fmt.Errorf("%s: %s and %s ran different definitions (%s): not shards of one study", k, first.Dir, sh.Dir, why)
			}
		}
	}
	return nil
}

// differs says how b's definition differs from a's, or "".
func differs(a, b *stats.Summary) string {
	count := func(s *stats.Summary) int {
		if s.Shard == nil {
			return 1
		}
		return s.Shard.Count
	}
	switch {
	case count(a) != count(b):
		return fmt.Sprintf("shards of %d and of %d", count(a), count(b))
	case a.Model != b.Model:
		return fmt.Sprintf("model %q and %q", a.Model, b.Model)
	case a.Objective != b.Objective:
		return fmt.Sprintf("objective %g and %g", a.Objective, b.Objective)
	case !maps.Equal(a.SLOThresholds, b.SLOThresholds):
		return fmt.Sprintf("SLO %v and %v", a.SLOThresholds, b.SLOThresholds)
	case a.LevelName != b.LevelName:
		return fmt.Sprintf("load by %q and by %q", a.LevelName, b.LevelName)
	}
	return ""
}

// Merge joins runs by profile and endpoint, in the order each first
// appears. Every figure comes from the joined records: percentiles over
// every request of every shard, rates over the union of their windows,
// a stage table by load level, and the knee found again.
func Merge(runs []*Run) []Merged {
	var order []string
	by := map[string][]*Run{}
	for _, r := range runs {
		k := Key(&r.Summary)
		if by[k] == nil {
			order = append(order, k)
		}
		by[k] = append(by[k], r)
	}
	out := make([]Merged, 0, len(order))
	for _, k := range order {
		out = append(out, join(by[k]))
	}
	return out
}

func join(shards []*Run) Merged {
	first := shards[0].Summary
	m := Merged{Shards: shards}
	var earliest, latest time.Time
	for i, sh := range shards {
		// Ids are a shard's own: each shard's get its index in front.
		for _, rec := range sh.Records {
			rec.ID = uint64(i)<<48 | rec.ID
			m.Records = append(m.Records, rec)
		}
		if s := sh.Summary.Start; !s.IsZero() {
			if earliest.IsZero() || s.Before(earliest) {
				earliest = s
			}
			if s.After(latest) {
				latest = s
			}
		}
	}
	m.StartSpread = latest.Sub(earliest)
	slices.SortStableFunc(m.Records, func(a, b records.Record) int { return a.Start.Compare(b.Start) })
	all := stats.NewAggregator(first.Profile, first.Endpoint, first.Model, 0, first.Objective)
	all.SetMaxWrongRatio(first.MaxWrongRatio) // the shards' tolerance, as their runs had it
	if pc := first.PrefixCache; pc != nil {
		all.SetPrefixCache(pc.MinSpeedup) // each triple is one shard's: their ids stay apart
	}
	levels := map[float64]*stats.Aggregator{}
	set := slo.FromValues(first.SLOThresholds, first.Objective)
	for i := range m.Records {
		rec := &m.Records[i]
		r, v := Request(rec)
		// By how much a miss missed: what the shards' probe delays may
		// excuse (the record keeps the verdict, not the margin).
		v.Miss = set.Evaluate(&r).Miss
		if v.Good {
			v.Miss = 0
		}
		all.Add(&r, v)
		if levels[rec.Level] == nil {
			levels[rec.Level] = stats.NewAggregator(first.Profile, first.Endpoint, first.Model, rec.Level, first.Objective)
		}
		levels[rec.Level].Add(&r, v)
	}
	// The study's timing is as good as its most starved shard's.
	var worst *stats.Probe
	for _, sh := range shards {
		if p := sh.Summary.Probe; p != nil && (worst == nil || p.DelayP99Ms > worst.DelayP99Ms) {
			worst = p
		}
	}
	if worst != nil {
		// Its reading, judged again against the merged figures.
		p := *worst
		p.Starved, p.Why = false, ""
		worst = &p
		all.SetProbe(p)
	}
	s := all.Summary()
	s.SLOThresholds, s.LevelName, s.Location = first.SLOThresholds, first.LevelName, first.Location
	s.Merged = &stats.Merged{Shards: len(shards), StartSpreadMs: float64(m.StartSpread) / float64(time.Millisecond)}
	if len(levels) == 1 {
		for l := range levels {
			s.Level = l
		}
	} else {
		// Each level is read against the probe's delay during that level
		// (the worst shard's, from its summary's stages), as the run read
		// it: the whole run's p99 of one level's stall took the low end of
		// another level's cliff ratio below its bar, and the merged run of
		// one shard lost the cliff its run had proven (beside eight busy
		// loops).
		during := map[float64]*stats.Probe{}
		for _, sh := range shards {
			for _, st := range sh.Summary.Stages {
				if p := st.Probe; p != nil && (during[st.Level] == nil || p.DelayP99Ms > during[st.Level].DelayP99Ms) {
					during[st.Level] = p
				}
			}
		}
		for level, a := range levels {
			if p := during[level]; p != nil {
				q := *p
				q.Starved, q.Why = false, ""
				a.SetProbe(q)
			} else if worst != nil {
				a.SetProbe(*worst)
			}
			st := a.Summary()
			st.SLOThresholds = s.SLOThresholds
			s.Stages = append(s.Stages, st)
		}
		slices.SortFunc(s.Stages, func(a, b stats.Summary) int { return cmp.Compare(a.Level, b.Level) })
		s.LevelRange = []float64{s.Stages[0].Level, s.Stages[len(s.Stages)-1].Level}
		k := stats.FindKnee(s.Stages, s.Objective)
		s.Knee = &k
	}
	// A shard that could not be carried out leaves the study short: the
	// merged run says so and passes nothing.
	for i, sh := range shards {
		if e := sh.Summary.Error; e != "" && s.Error == "" {
			s.Error, s.Aborted = fmt.Sprintf("shard %d: %s", i, e), sh.Summary.Aborted
		}
		s.Interrupted = s.Interrupted || sh.Summary.Interrupted
	}
	if s.Error != "" || s.Interrupted {
		s.Passed, s.Undecided = false, false
	}
	s.Verdict = s.VerdictLine()
	m.Summary = s
	return m
}

// Request is a record as the measured request it was written from, with
// its SLO verdict: what the aggregator reads of it.
func Request(rec *records.Record) (result.Request, slo.Verdict) {
	d := func(ms *float64) time.Duration {
		if ms == nil {
			return 0
		}
		return time.Duration(*ms * float64(time.Millisecond))
	}
	r := result.Request{
		ID: rec.ID, Profile: rec.Profile, Endpoint: rec.Endpoint, Model: rec.Model, Level: rec.Level,
		Start: rec.Start, Scheduled: rec.Start.Add(-time.Duration(rec.DispatchLagMs * float64(time.Millisecond))), ScheduledInStage: d(&rec.ScheduledMs),
		Err: rec.Error, HTTPStatus: rec.HTTPStatus, Retried: rec.Retried, ContentChunks: rec.ContentChunks,
		InputTokens: rec.InputTokens, IntendedInputTokens: rec.IntendedInputTokens, CachedInputTokens: rec.CachedInputTokens, OutputTokens: rec.OutputTokens,
		ServedModel: rec.ServedModel, FinishReason: rec.FinishReason, Checks: rec.Checks, Reused: rec.Reused,
		TTFT: d(rec.TTFTMs), TTST: d(rec.TTSTMs), TTFO: d(rec.TTFOMs), HasTTFO: rec.TTFOMs != nil, E2E: d(rec.RequestLatencyMs),
		DNS: d(rec.DNSMs), Connect: d(rec.ConnectMs), TLS: d(rec.TLSMs), FirstByte: d(rec.FirstByteMs),
		// Only a streamed request has a TTFT; a request with none was
		// not streamed, or failed before its first chunk.
		Streaming: rec.TTFTMs != nil,
	}
	r.End = r.Start.Add(r.E2E)
	for _, o := range result.Outcomes {
		if o.String() == rec.Outcome {
			r.Outcome = o
		}
	}
	r.Reason, _ = result.ParseReason(rec.Reason)
	if rec.CacheTriple != nil {
		r.CachePhase, r.CacheTriple = result.ParseCachePhase(rec.CachePhase), *rec.CacheTriple
	}
	if rec.InputSource == result.SourceUsage.String() {
		r.InputSource = result.SourceUsage
	}
	for _, g := range rec.InterChunkMs {
		r.Gaps = append(r.Gaps, d(&g))
	}
	v := slo.Verdict{Counted: r.Counted(), Good: rec.Good}
	for _, k := range slo.Kinds {
		if met, ok := rec.SLO[k.String()]; ok {
			v.Checked[k], v.Met[k] = true, met
		}
	}
	return r, v
}

// Write puts the merged runs into dir as `tokenprobe run` writes one
// invocation: a folder per profile and endpoint (records.jsonl,
// summary.json, report.txt, and both as CSV) and, beside them, summary.json of all and
// report.html.
func Write(dir string, ms []Merged, at time.Time) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var all []stats.Summary
	var levelNames []string
	for _, m := range ms {
		// The names come from the shards' summaries: whatever they say,
		// the folder stays under dir.
		sub, err := rundir.NewDir(dir, SafeName(m.Summary.Profile+"-"+m.Summary.Endpoint))
		if err != nil {
			return err
		}
		if err := writeRecords(filepath.Join(sub, "records.jsonl"), m.Records); err != nil {
			return err
		}
		name := levelName(&m.Summary)
		if err := errors.Join(rundir.WriteJSON(filepath.Join(sub, "summary.json"), m.Summary), writeReport(filepath.Join(sub, "report.txt"), &m.Summary, name),
			rundir.WriteCSV(sub, &m.Summary)); err != nil {
			return err
		}
		all, levelNames = append(all, m.Summary), append(levelNames, name)
	}
	if err := rundir.WriteJSON(filepath.Join(dir, "summary.json"), all); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "report.html"))
	if err != nil {
		return err
	}
	if err := report.HTML(f, fmt.Sprintf("tokenprobe merge: %d shards", len(ms[0].Shards)), all, levelNames, at); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// SafeName is name as one folder's name: every character but letters,
// digits, '.', '_' and '-' becomes '_', and a name of dots alone (".",
// "..") gains a leading '_'. "../../x" is ".._.._x": never a path.
func SafeName(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !safeByte(c) {
			b[i] = '_'
		}
	}
	s := string(b)
	if strings.Trim(s, ".") == "" {
		s = "_" + s
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

func safeByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

func levelName(s *stats.Summary) string {
	if s.LevelName == "" {
		return "load level"
	}
	return s.LevelName
}

func writeRecords(path string, recs []records.Record) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for i := range recs {
		if err := enc.Encode(&recs[i]); err != nil {
			f.Close()
			return err
		}
	}
	return errors.Join(w.Flush(), f.Close())
}

func writeReport(path string, s *stats.Summary, levelName string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	report.Text(f, s, levelName)
	return f.Close()
}
