package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/merge"
	"github.com/tokenprobe/tokenprobe/internal/report"
	"github.com/tokenprobe/tokenprobe/internal/runonce"
)

// shardFlags sets o's share of a study: index from the flag, else from
// JOB_COMPLETION_INDEX (an Indexed Job's pods); and its start time.
func shardFlags(o *runonce.Options, index, count int, startAt string) error {
	if count < 1 {
		return fmt.Errorf("--shard.count: %d is not a count of shards", count)
	}
	if count > 1 && index < 0 {
		v, ok := os.LookupEnv("JOB_COMPLETION_INDEX")
		n, err := strconv.Atoi(v)
		if !ok || err != nil {
			return fmt.Errorf("--shard.count %d needs --shard.index, or JOB_COMPLETION_INDEX as an Indexed Job sets it", count)
		}
		index = n
	}
	if count > 1 && index >= count {
		return fmt.Errorf("--shard.index %d is not below --shard.count %d", index, count)
	}
	o.ShardIndex, o.ShardCount = max(index, 0), count
	if startAt == startFromStdin {
		// A child of run --processes: ready, then told when to start.
		o.StartWhen = startFromParent
		return nil
	}
	if startAt != "" {
		t, err := time.Parse(time.RFC3339Nano, startAt)
		if err != nil {
			return fmt.Errorf("--start-at: %q is not an RFC 3339 time (2026-11-25T10:00:00Z)", startAt)
		}
		o.StartAt = t
	}
	return nil
}

// mergeMain is `tokenprobe merge`: once every shard's artifacts are
// complete (a shard writes its summary last), within wait.
func mergeMain(dirs []string, out string, wait time.Duration, partial bool) int {
	var runs []*merge.Run
	var left []string
	deadline := time.Now().Add(wait)
	for _, d := range dirs {
		rs, err := merge.Load(d)
		for err != nil && time.Now().Before(deadline) {
			time.Sleep(min(5*time.Second, time.Until(deadline)))
			rs, err = merge.Load(d)
		}
		switch {
		case err != nil && partial:
			fmt.Fprintf(os.Stderr, "tokenprobe merge: left out %s: %v\n", d, err)
			left = append(left, d)
			continue
		case err != nil:
			fmt.Fprintf(os.Stderr, "tokenprobe merge: %v (--partial merges the other shards without it)\n", err)
			return runonce.ExitConfig
		}
		runs = append(runs, rs...)
	}
	if len(runs) == 0 {
		fmt.Fprintln(os.Stderr, "tokenprobe merge: no shard could be read")
		return runonce.ExitConfig
	}
	if err := merge.Check(runs); err != nil {
		fmt.Fprintln(os.Stderr, "tokenprobe merge:", err)
		return runonce.ExitConfig
	}
	ms := merge.Merge(runs)
	if err := merge.Write(out, ms, time.Now()); err != nil {
		fmt.Fprintln(os.Stderr, "tokenprobe merge:", err)
		return runonce.ExitRuntime
	}
	for _, m := range ms {
		printMerged(os.Stdout, m)
	}
	fmt.Printf("wrote %s\n", out)
	if len(left) > 0 {
		fmt.Printf("left out %d of %d shards (--partial): %s\n", len(left), len(dirs), strings.Join(left, ", "))
	}
	return runonce.ExitOK
}

// printMerged prints one profile's merged report, for `tokenprobe merge`
// and `run --processes`, with a warning when its shards did not start together.
func printMerged(w io.Writer, m merge.Merged) {
	fmt.Fprintf(w, "%s: %d shards, %d requests\n", merge.Key(&m.Summary), len(m.Shards), m.Summary.Requests)
	if m.StartSpread > merge.MaxStartSpread {
		fmt.Fprintf(w, "warning: the shards' first requests were %s apart (more than %s): they did not load the endpoint at once, and the joined figures mix unequal loads; give every shard the same --start-at\n",
			m.StartSpread.Round(time.Millisecond), merge.MaxStartSpread)
	}
	report.Text(w, &m.Summary, m.Summary.LevelName)
	fmt.Fprintln(w)
}

// startFromParent says the child is ready on its stderr and reads the
// start time its parent (run --processes) writes to its stdin once every
// child is ready. The end of stdin before a time is the parent giving up
// (another child failed, or an interrupt): an interrupt before the start.
func startFromParent(ctx context.Context) (time.Time, error) {
	fmt.Fprintln(os.Stderr, readyLine)
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case s := <-line:
		if s == "" {
			return time.Time{}, context.Canceled
		}
		return time.Parse(time.RFC3339Nano, s)
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}
