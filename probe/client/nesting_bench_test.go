package client

import (
	"context"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/hostile"
	"github.com/tokenprobe/tokenprobe/probe/result"
)

// BenchmarkDeeplyNestedStream is the memory one hostile request costs: 32
// requests in flight, each answered with a 1 MB SSE line of nested
// arrays (the line limit is 1 MiB). It reports the peak of the
// goroutine stacks and the process's peak RSS (VmHWM), which before the
// scanner's depth bound grew by about 40 MB per request in flight.
//
//	go test -run '^$' -bench DeeplyNestedStream -benchtime 64x ./probe/client
func BenchmarkDeeplyNestedStream(b *testing.B) {
	line := "data: " + `{"choices":[{"delta":{"content":"a"}}],"x":` + strings.Repeat("[", 1<<20-100) + "}\n\n"
	body := hostile.SSEHead + hostile.Chunk(line) + "0\r\n\r\n"
	srv, err := hostile.StartFunc(func(conn net.Conn, _ *http.Request) bool {
		_, _ = conn.Write([]byte(body))
		return true
	})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	c := New(Options{})
	ep := endpoint("http://" + srv.Addr())
	var peakStack atomic.Uint64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.StackInuse > peakStack.Load() {
				peakStack.Store(ms.StackInuse)
			}
		}
	})
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				var r result.Request
				c.Do(context.Background(), ep, Prompt{Text: "x", Stream: true}, &r)
				if r.Outcome != result.Error {
					b.Errorf("%v/%v %s", r.Outcome, r.Reason, r.Err)
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(stop)
	sampler.Wait()
	b.ReportMetric(float64(peakStack.Load())/(1<<20), "peak-stack-MiB")
	b.ReportMetric(vmHWM()/(1<<20), "peak-RSS-MiB")
}

// vmHWM is the process's peak resident set, from /proc/self/status.
func vmHWM() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb * 1024
		}
	}
	return 0
}
