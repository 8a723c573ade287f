// Package rundir writes what a run leaves on disk, the same for
// `tokenprobe run` and the daemon: a folder of its own, never reused, with
// records.jsonl (written behind a queue, off the measuring path),
// summary.json and report.txt; and a parent folder's retention.
package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"

	"github.com/tokenprobe/tokenprobe/internal/report"
	"github.com/tokenprobe/tokenprobe/internal/sink"
	"github.com/tokenprobe/tokenprobe/internal/sink/records"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// NewDir makes the folder parent/name, or parent/name-2, -3, ... when the
// name is taken: a run never writes into another's folder.
func NewDir(parent, name string) (string, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	base := filepath.Join(parent, name)
	for i := 1; ; i++ {
		dir := base
		if i > 1 {
			dir = fmt.Sprintf("%s-%d", base, i)
		}
		err := os.Mkdir(dir, 0o755) // atomic: two runs never get the same folder
		if err == nil || !errors.Is(err, fs.ErrExist) {
			return dir, err
		}
	}
}

// Prune removes the oldest folders of parent, by name (names begin with
// their run's start time), so that keep remain.
func Prune(parent string, keep int) error {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return err
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	slices.Sort(dirs)
	var errs []error
	for len(dirs) > keep {
		errs = append(errs, os.RemoveAll(filepath.Join(parent, dirs[0])))
		dirs = dirs[1:]
	}
	return errors.Join(errs...)
}

// Run is one run's folder while the run goes.
type Run struct {
	Dir string
	// AIPerf also writes the run in AIPerf's export layout (WriteAIPerf).
	AIPerf  bool
	file    *os.File
	writer  *records.Writer
	queue   *sink.Queue
	dropped atomic.Int64
	warn    func(n int64)
}

// Open starts the records of a run in dir. warn, when set, is called on
// the first result the queue could not take (the records are then
// incomplete; the results are still counted everywhere else).
func Open(dir string, warn func()) (*Run, error) {
	f, err := os.Create(filepath.Join(dir, "records.jsonl"))
	if err != nil {
		return nil, err
	}
	r := &Run{Dir: dir, file: f, writer: records.New(f)}
	r.warn = func(n int64) {
		if n == 1 && warn != nil {
			warn()
		}
	}
	r.queue = sink.NewQueue(r.writer, 1<<16, r)
	return r, nil
}

// Inc counts a result the queue dropped (sink.Queue's counter).
func (r *Run) Inc() { r.warn(r.dropped.Add(1)) }

// Sink is what the run's results go to.
func (r *Run) Sink() *sink.Queue { return r.queue }

// SetLocation gives every record the probe's location; call it before
// the first request.
func (r *Run) SetLocation(loc string) { r.writer.Location = loc }

// Finish writes every queued record, then summary.json and report.txt,
// the two as CSV (records.csv, summary.csv), and AIPerf's layout when
// asked.
func (r *Run) Finish(s *stats.Summary, levelName string) error {
	r.queue.Close()
	err := errors.Join(r.writer.Flush(), r.file.Close())
	err = errors.Join(err, WriteJSON(filepath.Join(r.Dir, "summary.json"), s), writeText(filepath.Join(r.Dir, "report.txt"), s, levelName),
		WriteCSV(r.Dir, s))
	if r.AIPerf {
		err = errors.Join(err, WriteAIPerf(r.Dir, s))
	}
	return err
}

// WriteCSV writes records.csv from dir's records.jsonl, and summary.csv
// of s: what a run writes beside its JSON, and a merge beside its own.
func WriteCSV(dir string, s *stats.Summary) error {
	return errors.Join(writeRecordsCSV(dir), writeSummaryCSV(dir, s))
}

// Abandon closes the records of a run that did not start.
func (r *Run) Abandon() {
	r.queue.Close()
	_ = r.file.Close()
}

// WriteJSON writes v indented, with a final newline.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func writeText(path string, s *stats.Summary, levelName string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	report.Text(f, s, levelName)
	return f.Close()
}
