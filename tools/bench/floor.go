package bench

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/h1"
	"github.com/tokenprobe/tokenprobe/probe/load"
	"github.com/tokenprobe/tokenprobe/probe/workload"
)

// runFloor is the cost no real client can beat: a socket per stream, the
// same request written as prepared bytes, and a read loop that counts SSE
// events and watches for the chunked body's last chunk. It parses no HTTP,
// stamps nothing and keeps nothing. (Until tokenprobe had its own HTTP/1.1
// client the floor was net/http with a read loop; tokenprobe then matched
// it, which made it no floor. docs/BENCHMARKS.md has both.)
func runFloor(ctx context.Context, l Load, ready func()) (ClientResult, error) {
	u, err := url.Parse(strings.TrimSuffix(l.URL, "/") + "/chat/completions")
	if err != nil {
		return ClientResult{}, err
	}
	body := fmt.Sprintf(`{"model":"tokenprobe-sim","messages":[{"role":"user","content":%q}],"max_tokens":%d,"stream":true}`,
		strings.TrimSpace(workload.Words(1, 16)), l.Tokens)
	req := []byte(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		u.EscapedPath(), u.Host, len(body), body))
	f := &floor{addr: u.Host, req: req}
	if l.Source != "" {
		// As tokenprobe dials from a source address (the port chosen at
		// connect).
		f.dialer = h1.Dialers([]net.IP{net.ParseIP(l.Source)}, 0)[0]
	}
	var requests, errs, inFlight, peak atomic.Int64
	lag := NewHistogram()
	one := func() {
		if n := inFlight.Add(1); n > peak.Load() {
			peak.Store(n) // racy maximum, close enough for a peak
		}
		defer inFlight.Add(-1)
		requests.Add(1)
		if err := f.request(ctx); err != nil {
			errs.Add(1)
		}
	}
	ready()
	start := time.Now()
	var held *heldWindow
	if l.Streams > 0 {
		// Every event in the window is a content chunk where, as at the
		// wide levels, no answer ends in it.
		held = startHeld(settleTime(l), l.Duration, f.events.Load, inFlight.Load)
	}
	stop, cancel := context.WithTimeout(ctx, l.Duration)
	defer cancel()
	var wg sync.WaitGroup
	if l.Streams > 0 {
		for range l.Streams {
			wg.Go(func() {
				for stop.Err() == nil {
					one()
				}
			})
		}
	} else {
		gaps, err := load.NewArrivals("poisson", l.Rate, 0, 1)
		if err != nil {
			return ClientResult{}, err
		}
		// The floor's dispatch lag is taken where tokenprobe's is, as the
		// request's goroutine starts to send: beside tokenprobe's at the
		// same rate it says what the machine allows a plain Go dispatcher
		// (a runtime timer, a goroutine per arrival).
		next := time.Now()
		for stop.Err() == nil {
			next = next.Add(gaps.Next())
			if d := time.Until(next); d > 0 {
				select {
				case <-time.After(d):
				case <-stop.Done():
				}
			}
			if stop.Err() == nil {
				at := next
				wg.Go(func() {
					lag.Observe(time.Since(at))
					one()
				})
			}
		}
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	heldRes := held.result()
	f.closeIdle()
	// Every answer is Tokens content chunks, one finishing chunk and [DONE].
	done := requests.Load() - errs.Load()
	return ClientResult{
		Kind: KindFloor, Requests: requests.Load(), Errors: errs.Load(), Chunks: f.events.Load() - 2*done,
		Seconds: secs, PeakInFlight: peak.Load(), DispatchLag: quantilesOf(lag), Held: heldRes,
	}, ctx.Err()
}

// floor holds the floor client's idle connections.
type floor struct {
	addr   string
	dialer net.Dialer
	req    []byte
	mu     sync.Mutex
	idle   []*floorConn
	// events counts the SSE events read, as they are read (an atomic add
	// a read, as tokenprobe's harness counts its chunks).
	events atomic.Int64
}

type floorConn struct {
	c   net.Conn
	buf []byte
}

func (f *floor) get() (*floorConn, error) {
	f.mu.Lock()
	if n := len(f.idle); n > 0 {
		fc := f.idle[n-1]
		f.idle = f.idle[:n-1]
		f.mu.Unlock()
		return fc, nil
	}
	f.mu.Unlock()
	c, err := f.dialer.Dial("tcp", f.addr)
	if err != nil {
		return nil, err
	}
	return &floorConn{c: c, buf: make([]byte, 4096)}, nil
}

func (f *floor) put(fc *floorConn) {
	f.mu.Lock()
	f.idle = append(f.idle, fc)
	f.mu.Unlock()
}

func (f *floor) closeIdle() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fc := range f.idle {
		fc.c.Close()
	}
	f.idle = nil
}

// lastChunk ends a chunked body: the line ending of the chunk before, a
// zero size, and the empty trailer.
var lastChunk = []byte("\r\n0\r\n\r\n")

// request sends the prepared request and reads its response to the last
// chunk, counting SSE events into f.events. The simulator answers 200 with
// a chunked body and keeps the connection open.
func (f *floor) request(ctx context.Context) error {
	fc, err := f.get()
	if err != nil {
		return err
	}
	if _, err := fc.c.Write(f.req); err != nil {
		fc.c.Close()
		return err
	}
	var (
		ec      eventCounter
		checked bool
	)
	for {
		k, err := fc.c.Read(fc.buf)
		if k > 0 {
			b := fc.buf[:k]
			if !checked {
				if !bytes.HasPrefix(b, []byte("HTTP/1.1 200 ")) {
					fc.c.Close()
					return fmt.Errorf("unexpected response %.40q", b)
				}
				checked = true
			}
			before := ec.n
			ended := ec.feed(b)
			if ec.n > before {
				f.events.Add(ec.n - before)
			}
			if ended {
				f.put(fc)
				return nil
			}
		}
		if err != nil {
			fc.c.Close()
			return err
		}
		if ctx.Err() != nil {
			fc.c.Close()
			return ctx.Err()
		}
	}
}

// eventCounter counts the blank lines that end SSE events ("\n\n") in a
// chunked response read in pieces, including one split across two reads,
// and sees the last chunk.
type eventCounter struct {
	n      int64
	prevNL bool
	tail   [len("\r\n0\r\n\r\n")]byte
}

// feed counts the events in the next piece and reports whether the
// response ended with it.
func (e *eventCounter) feed(b []byte) (ended bool) {
	if len(b) == 0 {
		return false
	}
	if e.prevNL && b[0] == '\n' {
		e.n++
	}
	e.n += int64(bytes.Count(b, []byte("\n\n")))
	e.prevNL = b[len(b)-1] == '\n'
	if k := len(b); k >= len(e.tail) {
		copy(e.tail[:], b[k-len(e.tail):])
	} else {
		copy(e.tail[:], e.tail[k:])
		copy(e.tail[len(e.tail)-k:], b)
	}
	return bytes.Equal(e.tail[:], lastChunk)
}
