package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/childproc"
	"github.com/tokenprobe/tokenprobe/internal/merge"
	"github.com/tokenprobe/tokenprobe/internal/rundir"
	"github.com/tokenprobe/tokenprobe/internal/runonce"
)

// A run in several processes (with no --start-at) starts them all
// sending at once when every one has said it is ready: each child, given
// --start-at=stdin, reads its configuration and opens its endpoints,
// writes readyLine to its stderr, and reads the start time from its
// stdin. A fixed delay failed a real run on a loaded host: a child that
// took longer to start found its start time past and exited 2.
const (
	startFromStdin = "stdin"
	readyLine      = "tokenprobe: ready to start"
	// startMargin is how far after the last child's readiness the start
	// time lies: time to write it to every child and for each to read it.
	startMargin = 250 * time.Millisecond
)

// parseProcesses reads --processes: a count, or "auto" (0).
func parseProcesses(v string) (int, error) {
	if v == "auto" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("--processes: %q is neither a count of processes nor auto", v)
	}
	return n, nil
}

// flagsOfTheWhole are the flags of `tokenprobe run` that the parent of a
// run in several processes answers for: each child gets its own share,
// start time and artifacts folder instead.
var flagsOfTheWhole = map[string]bool{
	"processes": true, "shard.count": true, "shard.index": true, "start-at": true,
	"artifacts-dir": true, "artifact-dir": true,
}

// childArgs is args (a `tokenprobe run` command line) without the flags
// of the whole, in either spelling (--flag value, --flag=value).
func childArgs(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		name, _, hasValue := strings.Cut(strings.TrimPrefix(args[i], "--"), "=")
		if strings.HasPrefix(args[i], "--") && flagsOfTheWhole[name] {
			if !hasValue {
				i++ // the value is the next argument
			}
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// runInProcesses is `tokenprobe run --processes N`: the run divided over
// N processes of this host, each one shard of a study (--shard.index I
// --shard.count N, one --start-at), so that together they hold more
// streams than one process's open-file limit allows; their artifacts are
// then merged (tokenprobe merge) into the artifacts of one run, and the
// merged report printed. n 0 is --processes auto.
func runInProcesses(ctx context.Context, args []string, n int, o runonce.Options) int {
	if o.ShardCount > 1 {
		fmt.Fprintln(os.Stderr, "tokenprobe: --processes divides a run over this host's processes; a shard of a study (--shard.count) is divided already: give one or the other")
		return runonce.ExitConfig
	}
	if o.AIPerf {
		fmt.Fprintln(os.Stderr, "tokenprobe: --export-aiperf is not written for a run in several processes (tokenprobe merge does not write AIPerf's layout)")
		return runonce.ExitConfig
	}
	n, err := runonce.Processes(o, n)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return runonce.ExitConfig
	}
	if n == 1 { // auto, and one process holds the run
		return runonce.Run(ctx, o)
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tokenprobe: --processes: cannot find this program to start it again:", err)
		return runonce.ExitRuntime
	}
	start := o.StartAt
	handshake := start.IsZero()
	// The shards' artifacts go beside the merged run's, or into a
	// temporary folder where no artifacts are kept.
	parent := o.ArtifactsDir
	if parent != "" {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "tokenprobe:", err)
			return runonce.ExitRuntime
		}
	}
	shards, err := os.MkdirTemp(parent, ".processes-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "tokenprobe:", err)
		return runonce.ExitRuntime
	}
	if handshake {
		fmt.Fprintf(os.Stderr, "Running in %d processes, each with its share of the load, from when all are ready...\n", n)
	} else {
		fmt.Fprintf(os.Stderr, "Running in %d processes, each with its share of the load, from %s...\n", n, start.Format(time.RFC3339Nano))
	}
	codes := make([]int, n)
	ready := make(chan int, n)  // a child's index, when it is ready
	exited := make(chan int, n) // a child's index, when it has ended
	stdins := make([]io.WriteCloser, n)
	var wg sync.WaitGroup
	var stderr sync.Mutex
	var started []*exec.Cmd
	// failed stops the processes started so far, when another could not
	// be: none is left running without the parent that merges it.
	failed := func(err error) int {
		fmt.Fprintln(os.Stderr, "tokenprobe:", err)
		for _, c := range started {
			_ = c.Process.Signal(os.Interrupt)
		}
		wg.Wait()
		return runonce.ExitRuntime
	}
	base := childArgs(args)
	for i := range n {
		dir := filepath.Join(shards, strconv.Itoa(i))
		at := startFromStdin
		if !handshake {
			at = start.Format(time.RFC3339Nano)
		}
		cmd := exec.Command(exe, append(base[:len(base):len(base)],
			"--parent-pid", strconv.Itoa(os.Getpid()),
			"--shard.count", strconv.Itoa(n), "--shard.index", strconv.Itoa(i),
			"--start-at", at, "--artifacts-dir", dir)...)
		// The shard's own report goes to a file; its progress and errors
		// to this stderr, each line naming the process.
		out, err := os.Create(dir + ".txt")
		if err != nil {
			return failed(err)
		}
		defer out.Close()
		cmd.Stdout = out
		pipe, err := cmd.StderrPipe()
		if err != nil {
			return failed(err)
		}
		if handshake {
			if stdins[i], err = cmd.StdinPipe(); err != nil {
				return failed(err)
			}
		}
		// Its own process group: a terminal's interrupt reaches this
		// process alone, which passes it on once (a second would quit
		// the shard at once, losing its artifacts). And it is told when
		// this process dies, SIGKILL included: no load goes on without
		// the parent that merges it.
		cmd.SysProcAttr = childAttr()
		wait, err := childproc.Start(cmd)
		if err != nil {
			return failed(fmt.Errorf("starting process %d/%d: %w", i+1, n, err))
		}
		started = append(started, cmd)
		stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Signal(os.Interrupt) })
		wg.Go(func() {
			defer stop()
			prefixLines(pipe, os.Stderr, &stderr, fmt.Sprintf("process %d/%d: ", i+1, n), func() { ready <- i })
			codes[i] = exitCode(wait())
			exited <- i
		})
	}
	if handshake {
		// Wait for every child's readiness, however long a busy host
		// takes; a child that ends first has failed, and the others are
		// told so by the end of their stdin, which they read as an
		// interrupt before the start.
		waiting := n
		for waiting > 0 {
			select {
			case <-ready:
				waiting--
				continue
			case <-exited:
			}
			break
		}
		if waiting == 0 {
			start = time.Now().Add(startMargin)
			fmt.Fprintf(os.Stderr, "All %d processes are ready: starting at %s\n", n, start.Format(time.RFC3339Nano))
			for _, in := range stdins {
				_, _ = fmt.Fprintln(in, start.Format(time.RFC3339Nano))
			}
		}
		for _, in := range stdins {
			_ = in.Close()
		}
	}
	wg.Wait()
	code := runonce.ExitOK
	for _, c := range codes {
		// A shard's own verdict on the objective is over its share of the
		// requests: the merged run's, below, is the study's. Its failure
		// to run is the study's.
		if c == runonce.ExitConfig || c == runonce.ExitRuntime {
			code = runonce.Worse(code, c)
		}
	}
	if code == runonce.ExitConfig {
		fmt.Fprintf(os.Stderr, "tokenprobe: a process refused the run; its shard's artifacts are in %s\n", shards)
		return code
	}
	var runs []*merge.Run
	for i := range n {
		rs, err := merge.Load(filepath.Join(shards, strconv.Itoa(i)))
		if err != nil {
			fmt.Fprintf(os.Stderr, "tokenprobe: process %d/%d left no run to merge (%v); the shards' artifacts are in %s\n", i+1, n, err, shards)
			return runonce.ExitRuntime
		}
		runs = append(runs, rs...)
	}
	if err := merge.Check(runs); err != nil {
		fmt.Fprintf(os.Stderr, "tokenprobe: %v; the shards' artifacts are in %s\n", err, shards)
		return runonce.ExitRuntime
	}
	ms := merge.Merge(runs)
	for _, m := range ms {
		printMerged(os.Stdout, m)
		switch {
		case m.Summary.Interrupted:
			code = runonce.Worse(code, runonce.ExitRuntime)
		case m.Summary.Undecided:
			code = runonce.Worse(code, o.Undecided.Code())
		case !m.Summary.Passed:
			code = runonce.Worse(code, runonce.ExitSLOFailed)
		}
	}
	if o.ArtifactsDir == "" {
		if err := os.RemoveAll(shards); err != nil {
			fmt.Fprintln(os.Stderr, "tokenprobe:", err)
		}
		return code
	}
	dir, err := rundir.NewDir(o.ArtifactsDir, time.Now().Format("20060102-150405"))
	if err == nil {
		err = merge.Write(dir, ms, time.Now())
	}
	if err == nil {
		err = keepShards(shards, filepath.Join(dir, "processes"))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "tokenprobe: writing the merged artifacts: %v; the shards' are in %s\n", err, shards)
		return runonce.ExitRuntime
	}
	fmt.Printf("Artifacts: %s\n", dir)
	return code
}

// keepShards moves the shards' artifacts to dir without their records,
// which the merged run holds: what each process wrote of its own (its
// summary and report, the server's view and the GPU figures it read,
// which are not merged, and its printed output) stays beside the merged
// run at a fraction of the size.
func keepShards(shards, dir string) error {
	err := filepath.WalkDir(shards, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "records.jsonl" {
			err = os.Remove(path)
		}
		return err
	})
	if err != nil {
		return err
	}
	return os.Rename(shards, dir)
}

// prefixLines copies r to w a line at a time, each line after prefix;
// the child's readyLine calls ready instead, once.
func prefixLines(r io.Reader, w io.Writer, mu *sync.Mutex, prefix string, ready func()) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		if ready != nil && sc.Text() == readyLine {
			ready()
			ready = nil
			continue
		}
		mu.Lock()
		fmt.Fprintf(w, "%s%s\n", prefix, sc.Bytes())
		mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, r) // a line past the buffer: drain, or the child blocks
}

// exitCode is a finished child's exit code; one killed by a signal, or
// that could not be waited for, failed at run time.
func exitCode(err error) int {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return runonce.ExitOK
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return exit.ExitCode()
	}
	return runonce.ExitRuntime
}

// parentPoll is how often a child of run --processes looks for its
// parent where no parent-death signal tells it (and, on Linux, in case the
// parent died before the child asked for that signal).
const parentPoll = 200 * time.Millisecond

// watchParent calls orphaned once the process pid is no longer this one's
// parent: it died, and the child was given to another. The run then stops
// as if interrupted, and its artifacts are written.
func watchParent(ctx context.Context, pid int, orphaned func()) {
	t := time.NewTicker(parentPoll)
	defer t.Stop()
	for {
		if os.Getppid() != pid {
			fmt.Fprintf(os.Stderr, "tokenprobe: the parent process %d is gone; stopping\n", pid)
			orphaned()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
