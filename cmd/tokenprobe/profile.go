package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// startProfiles starts a CPU profile into cpu and an execution trace into
// tr, and arranges a heap profile into heap, each when named; stop writes
// and closes them.
func startProfiles(cpu, heap, tr string) (stop func(), err error) {
	traceFile, err := startInto(tr, "--debug.trace", trace.Start)
	if err != nil {
		return nil, err
	}
	cpuFile, err := startInto(cpu, "--debug.cpu-profile", pprof.StartCPUProfile)
	if err != nil {
		if traceFile != nil {
			trace.Stop()
			traceFile.Close()
		}
		return nil, err
	}
	return func() {
		if traceFile != nil {
			trace.Stop()
			traceFile.Close()
		}
		if cpuFile != nil {
			pprof.StopCPUProfile()
			cpuFile.Close()
		}
		if heap == "" {
			return
		}
		f, err := os.Create(heap)
		if err != nil {
			fmt.Fprintf(os.Stderr, "tokenprobe: --debug.heap-profile: %v\n", err)
			return
		}
		defer f.Close()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			fmt.Fprintf(os.Stderr, "tokenprobe: --debug.heap-profile: %v\n", err)
		}
	}, nil
}

// startInto creates path and starts writing into it with start; an empty
// path starts nothing and returns no file.
func startInto(path, flag string, start func(io.Writer) error) (*os.File, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err == nil {
		if err = start(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return f, nil
}
