package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tokenprobe/tokenprobe/probe"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Run results as the status page and the API show them.
const (
	ResultQueued    = "queued"
	ResultRunning   = "running"
	ResultPassed    = string(probe.Passed)
	ResultFailed    = string(probe.Failed)
	ResultUndecided = string(probe.Undecided)
	ResultError     = string(probe.Errored)
	ResultCancelled = string(probe.Cancelled)
)

// RunRecord is one run kept for the status page and /api/v1/runs.
type RunRecord struct {
	ID       int64  `json:"id"`
	Profile  string `json:"profile"`
	Endpoint string `json:"endpoint"`
	Trigger  string `json:"trigger"` // schedule or manual
	// Asked is when a run asked for through the API was queued behind
	// the runs holding its endpoint; Start is then when it started.
	Asked time.Time `json:"asked,omitzero"`
	Start time.Time `json:"start,omitzero"`
	End   time.Time `json:"end,omitzero"`
	// Position is a queued run's place in its endpoint's queue of runs
	// asked for (1: next), and Behind what it waits for: the runs
	// holding the endpoint and those queued before it.
	Position int    `json:"position,omitempty"`
	Behind   string `json:"behind,omitempty"`
	Result   string `json:"result"`
	Error    string `json:"error,omitempty"`
	// ArtifactsError says why the run's artifacts (serve --artifacts-dir)
	// were not written; the run's own result stands.
	ArtifactsError string         `json:"artifacts_error,omitempty"`
	Summary        *stats.Summary `json:"summary,omitempty"`
	Log            []LogLine      `json:"log,omitempty"`
}

// Finished reports whether the run has ended: neither queued nor running.
func (r RunRecord) Finished() bool { return r.Result != ResultQueued && r.Result != ResultRunning }

// LogLine is one log record of a run.
type LogLine struct {
	Time    time.Time `json:"time"`
	Level   string    `json:"level"`
	Message string    `json:"message"`
	Attrs   string    `json:"attrs,omitempty"`
}

// maxLogLines bounds one run's log, so a run with thousands of failing
// requests cannot grow the daemon's memory.
const maxLogLines = 200

// History keeps the last runs, and failed runs apart so that newer
// successes do not roll them out.
type History struct {
	mu             sync.Mutex
	nextID         int64
	recent, failed []*RunRecord
	keep, keepFail int
}

// NewHistory keeps keep recent runs and keepFailed failed ones.
func NewHistory(keep, keepFailed int) *History {
	return &History{keep: keep, keepFail: keepFailed}
}

// reserve takes the next run id for a run that may start: RunNow answers
// with the id before the run's goroutine records it. An id whose run did
// not start is never shown.
func (h *History) reserve() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nextID++
	return h.nextID
}

// release gives back id, reserved for a run that was refused, when no id
// was handed out after it: a refused request takes no run id.
func (h *History) release(id int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.nextID == id {
		h.nextID--
	}
}

// holdingLocked names the runs in progress on endpoint: "run 7
// (staircase, started 12s ago)". Callers hold h.mu.
func (h *History) holdingLocked(endpoint string, now time.Time) string {
	var out []string
	for _, r := range h.recent {
		if r.Endpoint == endpoint && r.Result == ResultRunning {
			out = append(out, fmt.Sprintf("run %d (%s, started %s ago)", r.ID, r.Profile, now.Sub(r.Start).Round(time.Second)))
		}
	}
	return strings.Join(out, ", ")
}

// ofJob names the job's own run that is in progress or queued: "run 3
// (baseline, started 12s ago)", the one a second request of it meets.
func (h *History) ofJob(profile, endpoint string, now time.Time) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recent {
		if r.Profile != profile || r.Endpoint != endpoint {
			continue
		}
		switch r.Result {
		case ResultRunning:
			return fmt.Sprintf("run %d (%s, started %s ago)", r.ID, r.Profile, now.Sub(r.Start).Round(time.Second))
		case ResultQueued:
			return fmt.Sprintf("run %d (%s, queued %s ago)", r.ID, r.Profile, now.Sub(r.Asked).Round(time.Second))
		}
	}
	return ""
}

// queue records run id, asked for and queued behind the runs holding its
// endpoint: listed, and found at its own URL, from the moment it is
// promised; start turns it into the run.
func (h *History) queue(id int64, profile, endpoint, trigger string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if slices.ContainsFunc(h.recent, func(r *RunRecord) bool { return r.ID == id }) {
		return // its turn came before the queue was recorded: it runs
	}
	h.add(&RunRecord{ID: id, Profile: profile, Endpoint: endpoint, Trigger: trigger, Asked: time.Now(), Result: ResultQueued})
}

// dropQueued ends the queued runs of a job that will not run them (a
// reload removed or changed it), with why. A daemon that stops leaves
// them queued: it answers no more.
func (h *History) dropQueued(profile, endpoint, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recent {
		if r.Profile == profile && r.Endpoint == endpoint && r.Result == ResultQueued {
			r.Result, r.Error, r.End = ResultCancelled, why, time.Now()
		}
	}
}

// start records a run under id, or under the next id when id is 0; a
// queued record of id becomes the run.
func (h *History) start(id int64, profile, endpoint, trigger string) *RunRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	if id == 0 {
		h.nextID++
		id = h.nextID
	}
	for _, r := range h.recent {
		if r.ID == id && r.Result == ResultQueued {
			r.Start, r.Result = time.Now(), ResultRunning
			return r
		}
	}
	r := &RunRecord{ID: id, Profile: profile, Endpoint: endpoint, Trigger: trigger, Start: time.Now(), Result: ResultRunning}
	h.add(r)
	return r
}

// add appends r to the recent runs, the oldest finished ones rolling out
// first: a run queued or running stays while it is one. Callers hold h.mu.
func (h *History) add(r *RunRecord) {
	h.recent = append(h.recent, r)
	for over := len(h.recent) - h.keep; over > 0; over-- {
		i := slices.IndexFunc(h.recent, func(r *RunRecord) bool { return r.Result != ResultQueued && r.Result != ResultRunning })
		if i < 0 {
			break
		}
		h.recent = slices.Delete(h.recent, i, i+1)
	}
}

func (h *History) finish(r *RunRecord, s *stats.Summary, result string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r.End, r.Summary, r.Result = time.Now(), s, result
	if err != nil {
		r.Error = err.Error()
	}
	if result == ResultFailed || result == ResultError {
		h.failed = append(h.failed, r)
		if len(h.failed) > h.keepFail {
			h.failed = slices.Delete(h.failed, 0, len(h.failed)-h.keepFail)
		}
	}
}

// artifactsFailed notes why r's artifacts were not written.
func (h *History) artifactsFailed(r *RunRecord, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r.ArtifactsError = err.Error()
}

func (h *History) log(r *RunRecord, line LogLine) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(r.Log) < maxLogLines {
		r.Log = append(r.Log, line)
	} else if len(r.Log) == maxLogLines {
		r.Log = append(r.Log, LogLine{Time: line.Time, Level: "INFO", Message: "further log lines of this run are not kept"})
	}
}

// Runs returns copies of the recent runs, newest first, and of failed runs
// that rolled out of the recent ones.
func (h *History) Runs() (recent, olderFailed []RunRecord) {
	h.mu.Lock()
	defer h.mu.Unlock()
	inRecent := map[int64]bool{}
	for i := len(h.recent) - 1; i >= 0; i-- {
		recent = append(recent, h.copyOf(h.recent[i]))
		inRecent[h.recent[i].ID] = true
	}
	for i := len(h.failed) - 1; i >= 0; i-- {
		if !inRecent[h.failed[i].ID] {
			olderFailed = append(olderFailed, h.copyOf(h.failed[i]))
		}
	}
	return recent, olderFailed
}

// Get returns a copy of run id.
func (h *History) Get(id int64) (RunRecord, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, list := range [][]*RunRecord{h.recent, h.failed} {
		for _, r := range list {
			if r.ID == id {
				return h.copyOf(r), true
			}
		}
	}
	return RunRecord{}, false
}

// Last returns the newest finished run of a job.
func (h *History) Last(profile, endpoint string) (RunRecord, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.recent) - 1; i >= 0; i-- {
		if r := h.recent[i]; r.Profile == profile && r.Endpoint == endpoint && r.Result != ResultRunning && r.Result != ResultQueued {
			return h.copyOf(r), true
		}
	}
	return RunRecord{}, false
}

// Queued returns the job's run queued for its endpoint, if any.
func (h *History) Queued(profile, endpoint string) (RunRecord, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recent {
		if r.Profile == profile && r.Endpoint == endpoint && r.Result == ResultQueued {
			return h.copyOf(r), true
		}
	}
	return RunRecord{}, false
}

func (h *History) copyOf(r *RunRecord) RunRecord {
	c := *r
	c.Log = slices.Clone(r.Log)
	if r.Result == ResultQueued {
		// Where it stands now: runs asked for start in the order asked,
		// which is their ids' order.
		c.Position = 1
		behind := []string{}
		if hold := h.holdingLocked(r.Endpoint, time.Now()); hold != "" {
			behind = append(behind, hold)
		}
		for _, o := range h.recent {
			if o.Endpoint == r.Endpoint && o.Result == ResultQueued && o.ID < r.ID {
				c.Position++
				behind = append(behind, fmt.Sprintf("run %d (%s, queued)", o.ID, o.Profile))
			}
		}
		c.Behind = strings.Join(behind, ", ")
	}
	return c
}

// runLog is a slog.Handler that keeps a run's records in its history entry
// and passes them on to the daemon's log. Attributes added with With go to
// the daemon's log only: on the run's page they would repeat on every line.
type runLog struct {
	next slog.Handler
	h    *History
	r    *RunRecord
}

func (l *runLog) Enabled(ctx context.Context, lv slog.Level) bool {
	return lv >= slog.LevelInfo || l.next.Enabled(ctx, lv)
}

func (l *runLog) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelInfo {
		line := LogLine{Time: rec.Time, Level: rec.Level.String(), Message: rec.Message}
		rec.Attrs(func(a slog.Attr) bool {
			if line.Attrs != "" {
				line.Attrs += " "
			}
			line.Attrs += a.String()
			return true
		})
		l.h.log(l.r, line)
	}
	if l.next.Enabled(ctx, rec.Level) {
		return l.next.Handle(ctx, rec)
	}
	return nil
}

func (l *runLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &runLog{next: l.next.WithAttrs(as), h: l.h, r: l.r}
}

func (l *runLog) WithGroup(name string) slog.Handler {
	return &runLog{next: l.next.WithGroup(name), h: l.h, r: l.r}
}
