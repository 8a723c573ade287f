package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tokenprobe/tokenprobe/internal/sink/records"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Loaded is one run's artifacts read back: its summary and its
// per-request records, for compare and merge.
type Loaded struct {
	Dir     string
	Summary stats.Summary
	Records []records.Record
}

// Key names a run across two invocations: its profile and endpoint.
func (r *Loaded) Key() string { return r.Summary.Profile + " on " + r.Summary.Endpoint }

// Load reads the runs under dir: one run's folder (summary.json and
// records.jsonl), or an invocation's folder holding one folder per run.
func Load(dir string) ([]*Loaded, error) {
	if _, err := os.Stat(filepath.Join(dir, "records.jsonl")); err == nil {
		r, err := loadRun(dir)
		if err != nil {
			return nil, err
		}
		return []*Loaded{r}, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var runs []*Loaded
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink != 0 {
			// A link could lead a merge's records anywhere, or to the
			// same shard twice: what is read is what was given.
			if st, err := os.Stat(filepath.Join(dir, e.Name(), "records.jsonl")); err == nil && st.Mode().IsRegular() {
				return nil, fmt.Errorf("%s: a symbolic link to a run's folder; give the folder itself", filepath.Join(dir, e.Name()))
			}
			continue
		}
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(sub, "records.jsonl")); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		r, err := loadRun(sub)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("%s: %w here or in its folders", dir, ErrNoRun)
	}
	return runs, nil
}

// ErrNoRun is Load's error for a folder that holds no run's artifacts, as
// opposed to one whose artifacts cannot be read.
var ErrNoRun = errors.New("no run's artifacts (records.jsonl and summary.json)")

// Find resolves what a user passes: a run's folder or a `tokenprobe run`
// folder of several is itself; an --artifacts-dir holding invocations'
// folders (one per `tokenprobe run`, named by time) is its newest, with a
// note saying which when there was a choice.
func Find(dir string) (resolved, note string, err error) {
	if _, err := Load(dir); err == nil {
		return dir, "", nil
	} else if !errors.Is(err, ErrNoRun) {
		// A run here that cannot be read (a truncated records.jsonl, a
		// record over the line limit) is an error, never skipped.
		return "", "", err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", "", err
	}
	var found []string
	for _, e := range entries {
		if e.IsDir() {
			_, err := Load(filepath.Join(dir, e.Name()))
			switch {
			case err == nil:
				found = append(found, e.Name())
			case !errors.Is(err, ErrNoRun) && !errors.Is(err, fs.ErrNotExist):
				return "", "", err
			}
		}
	}
	switch len(found) {
	case 0:
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return "", "", fmt.Errorf("%s: %w here, in its folders or theirs; it holds: %s", dir, ErrNoRun, strings.Join(names, ", "))
	case 1:
		return filepath.Join(dir, found[0]), "", nil
	}
	// Names are times, and a second run in the same second is <time>-2:
	// the newest sorts last when the suffix counts.
	slices.SortFunc(found, func(a, b string) int {
		at, an := splitRunName(a)
		bt, bn := splitRunName(b)
		if c := strings.Compare(at, bt); c != 0 {
			return c
		}
		return an - bn
	})
	newest := found[len(found)-1]
	return filepath.Join(dir, newest), fmt.Sprintf("%s holds %d runs (%s): comparing the newest, %s", dir, len(found), strings.Join(found, ", "), newest), nil
}

// splitRunName splits an invocation folder's name, <time>[-n] with the
// time as 20060102-150405 (runonce), into the time and n (1 without a
// suffix).
func splitRunName(name string) (string, int) {
	const timeLen = len("20060102-150405")
	if len(name) > timeLen+1 && name[timeLen] == '-' {
		if n, err := strconv.Atoi(name[timeLen+1:]); err == nil {
			return name[:timeLen], n
		}
	}
	return name, 1
}

func loadRun(dir string) (*Loaded, error) {
	r := &Loaded{Dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &r.Summary); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "summary.json"), err)
	}
	err = EachRecord(dir, func(rec *records.Record) error {
		r.Records = append(r.Records, *rec)
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Fewer records than the summary counts: the file was cut at a line's
	// end, or the run dropped records. Figures computed again from them
	// would be of a part.
	if n := len(r.Records); n < r.Summary.Requests {
		return nil, fmt.Errorf("%s: %d records for the %d requests its summary counts: the file is cut short, or the run could not write them all",
			filepath.Join(dir, "records.jsonl"), n, r.Summary.Requests)
	}
	return r, nil
}
