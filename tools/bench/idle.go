package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// MeasureIdle runs the daemon on config for d and measures it while no
// run is in progress: CPU per wall second and RSS, split into the
// daemon's own pages and its binary's. A two-second interval
// counts as idle when, at both of its ends, no request is in flight, no
// run's target load is exported, and the run counter has not moved.
// Reading /metrics costs the daemon a little CPU; that is counted against
// it, as a Prometheus scraping it would be.
func MeasureIdle(ctx context.Context, tokenprobe, config string, d time.Duration) (*Idle, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, tokenprobe, "serve", "--config.file", config,
		"--web.listen-address", "127.0.0.1:"+port, "--log.level", "warn")
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	base := "http://127.0.0.1:" + port
	if err := waitHealthy(ctx, base+"/-/ready"); err != nil {
		return nil, fmt.Errorf("the daemon did not become ready: %w", err)
	}
	pid := cmd.Process.Pid
	type sample struct {
		at     time.Time
		cpu    time.Duration
		mem    mem
		active bool
		runs   float64
	}
	take := func() (sample, error) {
		s := sample{at: time.Now()}
		var err error
		if s.active, s.runs, err = runState(base + "/metrics"); err != nil {
			return s, err
		}
		if s.cpu, err = cpuOf(pid); err != nil {
			return s, err
		}
		s.mem, err = memPMDOf(pid)
		return s, err
	}
	idle := &Idle{Config: config}
	if fi, err := os.Stat(tokenprobe); err == nil {
		idle.Binary = fi.Size()
	}
	prev, err := take()
	if err != nil {
		return nil, err
	}
	var idleCPU time.Duration
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
		cur, err := take()
		if err != nil {
			return nil, err
		}
		if !prev.active && !cur.active && prev.runs == cur.runs {
			idle.Seconds += cur.at.Sub(prev.at).Seconds()
			idleCPU += cur.cpu - prev.cpu
			for _, m := range []mem{prev.mem, cur.mem} {
				if m.rss > idle.RSS {
					idle.RSS, idle.RSSAnon, idle.RSSFile, idle.RSSFilePMD = m.rss, m.anon, m.file, m.filePMD
				}
			}
		}
		idle.Observed += cur.at.Sub(prev.at).Seconds()
		prev = cur
	}
	if idle.Seconds == 0 {
		return nil, fmt.Errorf("no idle interval in %s: the daemon was always running something", d)
	}
	idle.CPUFraction = idleCPU.Seconds() / idle.Seconds
	return idle, nil
}

// runState reads whether any run is in progress and how many runs ended.
func runState(url string) (active bool, runs float64, err error) {
	resp, err := http.Get(url)
	if err != nil {
		return false, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		i := strings.LastIndexByte(line, ' ')
		if i < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		switch name {
		case "tokenprobe_in_flight_requests", "tokenprobe_target_concurrency", "tokenprobe_target_request_rate":
			active = active || v != 0
		case "tokenprobe_runs_total":
			runs += v
		}
	}
	return active, runs, sc.Err()
}
