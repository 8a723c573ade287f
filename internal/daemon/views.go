package daemon

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/config"
	"github.com/tokenprobe/tokenprobe/internal/scheduler"
	"github.com/tokenprobe/tokenprobe/internal/setup"
	"github.com/tokenprobe/tokenprobe/probe/client"
)

// JobView is one profile x endpoint as the status page shows it.
type JobView struct {
	Profile, Endpoint, Model string
	Schedule, Load, SLO      string
	// Manual jobs run only when asked: no next run to show.
	Manual bool
	State  scheduler.State
	Last   *RunRecord
	// Queued is the job's run asked for and waiting for its endpoint.
	Queued *RunRecord
}

// Jobs lists the scheduled jobs, by profile then endpoint.
func (d *Daemon) Jobs() []JobView {
	d.mu.Lock()
	jobs := make([]*job, 0, len(d.jobs))
	for _, j := range d.jobs {
		jobs = append(jobs, j)
	}
	d.mu.Unlock()
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].key < jobs[b].key })
	out := make([]JobView, 0, len(jobs))
	for _, j := range jobs {
		v := JobView{Profile: j.profile.Name, Endpoint: j.endpoint, Model: servedAs(j.target.Endpoint), Manual: j.profile.Schedule.Manual,
			Schedule: describeSchedule(&j.profile.Schedule), Load: setup.PlanOf(&j.profile.Load).Short(), SLO: describeSLO(&j.profile.SLO)}
		if t := j.profile.Workload.Trace; t != nil {
			v.Load = fmt.Sprintf("trace %s from %s to %s at %gx", t.File, t.From.D(), t.To.D(), max(t.Speedup, 1))
		}
		v.State, _ = d.sched.State(j.key)
		if last, ok := d.history.Last(j.profile.Name, j.endpoint); ok {
			v.Last = &last
		}
		if q, ok := d.history.Queued(j.profile.Name, j.endpoint); ok {
			v.Queued = &q
		}
		out = append(out, v)
	}
	return out
}

func describeSchedule(s *config.Schedule) string {
	var parts []string
	switch {
	case s.Manual:
		parts = append(parts, "when asked")
	case s.Continuous:
		parts = append(parts, "continuously")
	default:
		parts = append(parts, "every "+s.Every.D().String())
	}
	if s.Jitter > 0 {
		parts = append(parts, "jitter "+s.Jitter.D().String())
	}
	if s.Window != "" {
		tz := s.Timezone
		if tz == "" {
			tz = "UTC"
		}
		parts = append(parts, "within "+s.Window+" "+tz)
	}
	if s.Exclusive {
		parts = append(parts, "exclusive")
	}
	if b := s.Budget; b.RequestsPerHour > 0 || b.TokensPerHour > 0 {
		parts = append(parts, fmt.Sprintf("budget %d requests, %d tokens an hour", b.RequestsPerHour, b.TokensPerHour))
	}
	if b := s.Budget; b.MaxCostPerDay > 0 {
		parts = append(parts, fmt.Sprintf("budget %g a day in cost", b.MaxCostPerDay))
	}
	return strings.Join(parts, ", ")
}

func describeSLO(s *config.SLO) string {
	var parts []string
	for _, t := range []struct {
		name string
		d    config.Duration
	}{{"TTFT", s.TTFT}, {"TTST", s.TTST}, {"ITL", s.ITL}, {"latency", s.RequestLatency}} {
		if t.d > 0 {
			parts = append(parts, fmt.Sprintf("%s ≤ %s", t.name, t.d.D()))
		}
	}
	if s.OutputTokensPerSecond > 0 {
		parts = append(parts, fmt.Sprintf("≥ %g tokens/s", s.OutputTokensPerSecond))
	}
	if s.Objective > 0 {
		parts = append(parts, fmt.Sprintf("objective %g%%", s.Objective*100))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// History is the record of recent runs.
func (d *Daemon) History() *History { return d.history }

// ConfigYAML is the running configuration with secrets left out.
func (d *Daemon) ConfigYAML() ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfgYAML, d.cfgYAMLErr
}

// ReloadStatus is when the running configuration was loaded, when a
// reload was last tried, and why that failed (nil when it did not: then
// both times are the same). After a failed reload the configuration
// loaded earlier runs on, and its time is the one to show.
func (d *Daemon) ReloadStatus() (loaded, tried time.Time, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lastLoaded, d.lastReload, d.lastErr
}

// GPUStatus says which GPU source is configured and why it does not read
// ("" when it reads); configured is false without a gpu block.
func (d *Daemon) GPUStatus() (source, problem string, configured bool) {
	if d.gpuC == nil {
		return "", "", false
	}
	source, problem = d.gpuC.Status()
	return source, problem, true
}

// servedAs is the model an endpoint asks for, and the one its answers
// name where the model check learned another (llama.cpp's alias, OpenAI's
// dated snapshot).
func servedAs(ep *client.Endpoint) string {
	if name, _ := ep.Served.Name(); name != "" && name != ep.Model {
		return ep.Model + " (answers name " + name + ")"
	}
	return ep.Model
}
