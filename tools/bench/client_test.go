package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/sim"
)

func startBenchSim(t *testing.T, interval time.Duration) *sim.Server {
	t.Helper()
	s, err := sim.Start("127.0.0.1:0", sim.Config{Bench: true, DecodeBase: interval})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Both clients read the same streams to the end: their chunk counts are
// the simulator's tokens per request times the requests that completed.
func TestClientsCountEveryChunk(t *testing.T) {
	s := startBenchSim(t, 5*time.Millisecond)
	for _, kind := range []string{KindTokenprobe, KindFloor} {
		t.Run(kind, func(t *testing.T) {
			readyCalled := false
			l := Load{URL: s.URL(), Streams: 8, Duration: 300 * time.Millisecond, Tokens: 20}
			res, err := RunClient(context.Background(), kind, l, func() { readyCalled = true })
			if err != nil {
				t.Fatal(err)
			}
			if !readyCalled {
				t.Error("ready was not called")
			}
			if res.Errors != 0 || res.Requests < 8 {
				t.Fatalf("%+v: want at least 8 requests and no errors", res)
			}
			if res.Chunks != res.Requests*20 {
				t.Errorf("chunks %d, want %d requests x 20", res.Chunks, res.Requests)
			}
			if res.PeakInFlight < 1 || res.PeakInFlight > 8 {
				t.Errorf("peak in flight %d with 8 streams", res.PeakInFlight)
			}
			if kind == KindTokenprobe {
				te := res.TimingError
				if te == nil || te.P50 < 0 || te.P99 < te.P50 || te.Max < te.P99 {
					t.Errorf("timing error %+v: want ordered, non-negative quantiles", te)
				}
			} else if res.TimingError != nil {
				t.Error("the floor client measures nothing but must have reported a timing error")
			}
		})
	}
}

// Both clients report the held window of a closed loop whose answers
// outlast it, as at the wide levels: 1 s answers, a 300 ms load, the
// window from 60 ms to 300 ms. What is asserted is counts, not how late
// a busy machine's timers fired: the answers end 700 ms after the window
// should have, so its end is marked before the load is over.
func TestClientsReportTheHeldWindow(t *testing.T) {
	s := startBenchSim(t, 50*time.Millisecond)
	for _, kind := range []string{KindTokenprobe, KindFloor} {
		t.Run(kind, func(t *testing.T) {
			l := Load{URL: s.URL(), Streams: 8, Duration: 300 * time.Millisecond, Tokens: 20}
			res, err := RunClient(context.Background(), kind, l, func() {})
			if err != nil {
				t.Fatal(err)
			}
			h := res.Held
			if h == nil || h.Chunks <= 0 || h.Chunks > res.Chunks || h.OpenAtStart < 1 || h.OpenAtStart > 8 || h.OpenAtEnd < 1 || h.OpenAtEnd > 8 || h.CPUSeconds < 0 || h.Seconds <= 0 {
				t.Errorf("held window %+v of %d chunks: want some of them, 1 to 8 streams open at each end", h, res.Chunks)
			}
		})
	}
}

func TestOpenLoopReportsDispatchLag(t *testing.T) {
	s := startBenchSim(t, time.Millisecond)
	res, err := RunClient(context.Background(), KindTokenprobe, Load{URL: s.URL(), Rate: 200, Duration: 500 * time.Millisecond, Tokens: 4}, func() {})
	if err != nil {
		t.Fatal(err)
	}
	if res.DispatchLag == nil || res.Requests < 50 {
		t.Fatalf("%+v: want about 100 requests and a dispatch lag", res)
	}
	sw := res.SchedWait
	if sw == nil || sw.Goroutines == nil || sw.ThreadSlices <= 0 || sw.ThreadMeanUS < 0 {
		t.Fatalf("sched wait %+v: want the goroutines' wait and the threads' time slices of a run that sent %d requests", sw, res.Requests)
	}
	if q := sw.Goroutines; q.P50 < 0 || q.P99 < q.P50 || q.Max < q.P99 {
		t.Errorf("goroutines' wait %+v: want ordered, non-negative quantiles", q)
	}
	if res.Chunks != res.Requests*4 {
		t.Errorf("chunks %d, want %d", res.Chunks, res.Requests*4)
	}
}

// The floor's open loop reports its dispatch lag too: beside tokenprobe's,
// the machine's limit.
func TestFloorReportsDispatchLag(t *testing.T) {
	s := startBenchSim(t, time.Millisecond)
	res, err := RunClient(context.Background(), KindFloor, Load{URL: s.URL(), Rate: 200, Duration: 500 * time.Millisecond, Tokens: 4}, func() {})
	if err != nil {
		t.Fatal(err)
	}
	if res.DispatchLag == nil || res.Requests < 50 {
		t.Fatalf("%+v: want about 100 requests and a dispatch lag", res)
	}
	if q := res.DispatchLag; q.P50 < 0 || q.P99 < q.P50 || q.Max < q.P99 {
		t.Errorf("dispatch lag %+v: want ordered, non-negative quantiles", q)
	}
}

// A simulator not in bench mode sends no stamps: the tokenprobe client
// must refuse to report a timing error it could not measure.
func TestTimingErrorNeedsStamps(t *testing.T) {
	s, err := sim.Start("127.0.0.1:0", sim.Config{Slots: 8, DecodeBase: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = RunClient(context.Background(), KindTokenprobe, Load{URL: s.URL(), Streams: 2, Duration: 100 * time.Millisecond, Tokens: 4}, func() {})
	if err == nil || !strings.Contains(err.Error(), "bench mode") {
		t.Fatalf("err = %v, want a complaint about missing stamps", err)
	}
}

func TestCountEventsAcrossReads(t *testing.T) {
	var stream strings.Builder
	stream.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
	for _, ev := range append(slices.Repeat([]string{"data: {\"x\":1}\n\n"}, 1000), "data: [DONE]\n\n") {
		fmt.Fprintf(&stream, "%x\r\n%s\r\n", len(ev), ev)
	}
	stream.WriteString("0\r\n\r\n")
	// Pieces of 7 bytes split many "\n\n" and the last chunk in two.
	for _, size := range []int{1, 7, 4096} {
		var ec eventCounter
		s, ended := stream.String(), false
		for len(s) > 0 {
			k := min(size, len(s))
			if ended {
				t.Fatalf("pieces of %d: ended with %d bytes left", size, len(s))
			}
			ended = ec.feed([]byte(s[:k]))
			s = s[k:]
		}
		if !ended || ec.n != 1001 {
			t.Errorf("pieces of %d: counted %d events (ended %v), want 1001 and the end", size, ec.n, ended)
		}
	}
}
