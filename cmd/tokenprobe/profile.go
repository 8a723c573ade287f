package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// startProfiles starts a CPU profile into cpu and an execution trace into
// tr, and arranges a heap profile into heap, each when named; stop writes
// and closes them.
func startProfiles(cpu, heap, tr string) (stop func(), err error) {
	var cpuFile, traceFile *os.File
	if tr != "" {
		if traceFile, err = os.Create(tr); err != nil {
			return nil, fmt.Errorf("--debug.trace: %w", err)
		}
		if err = trace.Start(traceFile); err != nil {
			traceFile.Close()
			return nil, fmt.Errorf("--debug.trace: %w", err)
		}
	}
	if cpu != "" {
		if cpuFile, err = os.Create(cpu); err != nil {
			return nil, fmt.Errorf("--debug.cpu-profile: %w", err)
		}
		if err = pprof.StartCPUProfile(cpuFile); err != nil {
			cpuFile.Close()
			return nil, fmt.Errorf("--debug.cpu-profile: %w", err)
		}
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
