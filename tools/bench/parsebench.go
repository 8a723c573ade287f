package bench

import (
	"cmp"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
)

// ParseBench is the Go benchmark of the client's per-chunk work, which the
// bar on SSE parsing reads.
type ParseBench struct {
	// NsPerChunk is the median run's; FastestNs and SlowestNs bound the runs.
	NsPerChunk     float64 `json:"ns_per_chunk"`
	AllocsPerChunk float64 `json:"allocs_per_chunk"`
	Runs           int     `json:"runs"`
	FastestNs      float64 `json:"fastest_ns"`
	SlowestNs      float64 `json:"slowest_ns"`
}

var benchLine = regexp.MustCompile(`BenchmarkStreamPerChunk\S*\s+\d+\s+([\d.]+) ns/op.*?\s([\d.]+) allocs/op`)

// RunParseBench runs BenchmarkStreamPerChunk five times in the module at
// dir and keeps the median run: the VM's speed changes from minute to
// minute, and one run can land on a slow one.
func RunParseBench(ctx context.Context, dir string) (*ParseBench, error) {
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^BenchmarkStreamPerChunk$", "-benchmem", "-count", "5", "./probe/openai/")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go test -bench: %w: %s", err, out)
	}
	var runs []ParseBench
	for _, m := range benchLine.FindAllSubmatch(out, -1) {
		ns, _ := strconv.ParseFloat(string(m[1]), 64)
		allocs, _ := strconv.ParseFloat(string(m[2]), 64)
		runs = append(runs, ParseBench{NsPerChunk: ns, AllocsPerChunk: allocs})
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("no BenchmarkStreamPerChunk line in: %s", out)
	}
	slices.SortFunc(runs, func(a, b ParseBench) int { return cmp.Compare(a.NsPerChunk, b.NsPerChunk) })
	med := runs[len(runs)/2]
	med.Runs = len(runs)
	med.FastestNs, med.SlowestNs = runs[0].NsPerChunk, runs[len(runs)-1].NsPerChunk
	return &med, nil
}
