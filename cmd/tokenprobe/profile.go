package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startProfiles starts a CPU profile into cpu and arranges a heap profile
// into heap, both when named; stop writes and closes them.
func startProfiles(cpu, heap string) (stop func(), err error) {
	var cpuFile *os.File
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
