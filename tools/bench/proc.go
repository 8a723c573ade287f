package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// rssOf reads a process's resident set size in bytes from /proc.
func rssOf(pid int) (int64, error) {
	m, err := memOf(pid)
	return m.rss, err
}

// mem is a process's resident set from /proc/PID/status: all of it, and
// the two parts that matter here. Anonymous pages are the process's own
// (heap, stacks, what it wrote). File pages are mostly its executable's,
// which the kernel maps in 64 KiB windows around each page touched and
// can drop and read again at will.
//
// filePMD, read only where asked (smaps_rollup walks the page tables), is
// the part of the file pages mapped whole as 2 MiB folios: a binary just
// written by the linker sits in the page cache in such folios on Linux
// 6.18's ext4, and every one the process touches counts 2 MiB to it.
type mem struct{ rss, anon, file, filePMD int64 }

func memOf(pid int) (mem, error) {
	var m mem
	err := readKB(fmt.Sprintf("/proc/%d/status", pid), map[string]*int64{"VmRSS": &m.rss, "RssAnon": &m.anon, "RssFile": &m.file}, "VmRSS")
	return m, err
}

// memPMDOf is memOf with the file pages mapped as 2 MiB folios, 0 where
// the kernel has no smaps_rollup (before 4.14) or hides it: the split is
// a reason shown beside the figure, not the figure.
func memPMDOf(pid int) (mem, error) {
	m, err := memOf(pid)
	if err != nil {
		return m, err
	}
	_ = readKB(fmt.Sprintf("/proc/%d/smaps_rollup", pid), map[string]*int64{"FilePmdMapped": &m.filePMD}, "")
	return m, nil
}

// readKB reads the "Name: N kB" lines of a /proc file into fields, in
// bytes; must is a field the file has to hold.
func readKB(path string, fields map[string]*int64, must string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	found := must == ""
	for line := range bytes.Lines(data) {
		name, rest, ok := bytes.Cut(line, []byte(":"))
		dst := fields[string(name)]
		if !ok || dst == nil {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(string(rest)), " kB"), 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", path, name, err)
		}
		*dst = kb << 10
		found = found || string(name) == must
	}
	if !found {
		return fmt.Errorf("no %s in %s", must, path)
	}
	return nil
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times; 100 on
// every Linux architecture tokenprobe builds for.
const clockTicks = 100

// cpuOf reads a process's user plus system CPU time from /proc.
func cpuOf(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces and parentheses; fields start after
	// the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	// After the name: state is field 3 of stat(5), utime 14, stime 15.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// rusageCPU is a finished process's user plus system time.
func rusageCPU(ru *syscall.Rusage) time.Duration {
	if ru == nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// addRusage adds a finished client process's CPU time to m, and the
// system part of it.
func (m *Measurement) addRusage(ru *syscall.Rusage) {
	if ru == nil {
		return
	}
	m.CPUSeconds += rusageCPU(ru).Seconds()
	m.SystemSeconds += time.Duration(ru.Stime.Nano()).Seconds()
}

// collectorWork is what this process's garbage collector has done and
// has to walk: the collections so far, the memory held for goroutine
// stacks and the heap that holds pointers. These are counts and sizes, exact; the runtime's
// own CPU figure for its collector is a wall-clock estimate that its
// documentation calls an overestimate, and on a machine shared by more
// threads than cores it counts the time a worker waited for one.
func collectorWork() (cycles, stackBytes, scanHeapBytes uint64) {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/memory/classes/heap/stacks:bytes"}, {Name: "/gc/scan/heap:bytes"}}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0 // a runtime without it
		}
		return s[i].Value.Uint64()
	}
	return v(0), v(1), v(2)
}

// rssSampler follows a process's RSS every 50 ms and keeps the peak.
type rssSampler struct {
	peak atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
}

func sampleRSS(pid int) *rssSampler {
	s := &rssSampler{stop: make(chan struct{})}
	s.wg.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if v, err := rssOf(pid); err == nil && v > s.peak.Load() {
				s.peak.Store(v)
			}
			select {
			case <-t.C:
			case <-s.stop:
				return
			}
		}
	})
	return s
}

func (s *rssSampler) Stop() int64 {
	close(s.stop)
	s.wg.Wait()
	return s.peak.Load()
}

// Machine describes the computer the figures were measured on.
func Machine() string {
	model, cores := "unknown CPU", 0
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "model name":
				model = strings.TrimSpace(v)
			case "processor":
				cores++
			}
		}
		f.Close()
	}
	mem := ""
	var total int64
	if readKB("/proc/meminfo", map[string]*int64{"MemTotal": &total}, "MemTotal") == nil {
		mem = fmt.Sprintf(", %.0f GiB", float64(total)/(1<<30))
	}
	return fmt.Sprintf("%d x %s%s", cores, model, mem)
}
