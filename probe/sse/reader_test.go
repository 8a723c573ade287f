package sse

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type ev struct{ name, data string }

// sources are the ways a stream reaches the reader: an io.Reader, read
// through the reader's buffer, and a Viewer, read in its views, one view
// a whole read or a few bytes at a time.
var sources = []struct {
	name string
	of   func(string) io.Reader
}{
	{"reader", func(in string) io.Reader { return strings.NewReader(in) }},
	{"views", func(in string) io.Reader { return newViewer(in, 4096) }},
	{"views of 3 bytes", func(in string) io.Reader { return newViewer(in, 3) }},
}

// viewer lends in at most size bytes at a time, as probe/h1's body lends
// its connection's buffer: each view is written over the last, so a
// reader that kept a view past the next call reads what came after it.
type viewer struct {
	in   string
	size int
	buf  []byte
	err  error // returned once in is read, io.EOF when nil
}

func newViewer(in string, size int) *viewer {
	return &viewer{in: in, size: size, buf: make([]byte, size)}
}

func (v *viewer) View(most int) ([]byte, error) {
	for i := range v.buf {
		v.buf[i] = '#'
	}
	if len(v.in) == 0 {
		if v.err != nil {
			return nil, v.err
		}
		return nil, io.EOF
	}
	n := copy(v.buf[:min(v.size, most)], v.in)
	v.in = v.in[n:]
	return v.buf[:n], nil
}

// Read makes a viewer an io.Reader, as probe/h1's body is; the Reader
// must not call it.
func (v *viewer) Read([]byte) (int, error) { panic("sse: a Viewer read through Read") }

func readAll(t *testing.T, in string, limit int) ([]ev, error) {
	t.Helper()
	var out []ev
	var first error
	for i, src := range sources {
		got, err := readFrom(NewReader(src.of(in), limit))
		if i == 0 {
			out, first = got, err
			continue
		}
		if fmt.Sprint(err) != fmt.Sprint(first) || fmt.Sprint(got) != fmt.Sprint(out) {
			t.Fatalf("%s: %q, %v; %s: %q, %v", sources[0].name, out, first, src.name, got, err)
		}
	}
	return out, first
}

func readFrom(r *Reader) ([]ev, error) {
	var out []ev
	for {
		e, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, ev{string(e.Name), string(e.Data)})
	}
}

func TestReaderFraming(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []ev
	}{
		{"lf", "data: a\n\ndata: b\n\n", []ev{{"", "a"}, {"", "b"}}},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []ev{{"", "a"}, {"", "b"}}},
		{"no space after colon", "data:a\n\n", []ev{{"", "a"}}},
		{"only first space stripped", "data:  a\n\n", []ev{{"", " a"}}},
		{"multi-line data joined by LF", "data: {\"a\":\ndata: 1}\n\n", []ev{{"", "{\"a\":\n1}"}}},
		{"comments ignored", ": ping\n\ndata: a\n: keep-alive\n\n", []ev{{"", "a"}}},
		{"event name", "event: error\ndata: {\"error\":\"x\"}\n\n", []ev{{"error", "{\"error\":\"x\"}"}}},
		{"event name does not leak", "event: error\n\ndata: a\n\n", []ev{{"", "a"}}},
		{"id and retry ignored", "id: 7\nretry: 10\ndata: a\n\n", []ev{{"", "a"}}},
		{"field without colon", "data\n\n", []ev{{"", ""}}},
		{"last event without blank line", "data: a\n\ndata: [DONE]\n", []ev{{"", "a"}, {"", "[DONE]"}}},
		{"last line without newline", "data: a\n\ndata: [DO", []ev{{"", "a"}, {"", "[DO"}}},
		{"blank lines between events", "\n\n\ndata: a\n\n\n\n", []ev{{"", "a"}}},
		{"empty stream", "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := readAll(t, c.in, 0)
			if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("event %d: got %q, want %q", i, got[i], c.want[i])
				}
			}
		})
	}
}

func TestReaderLineLimit(t *testing.T) {
	long := "data: " + strings.Repeat("x", 100) + "\n\n"
	if _, err := readAll(t, long, 64); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("got %v, want ErrLineTooLong", err)
	}
	// A line of exactly the limit passes, also with CRLF.
	exact := "data: " + strings.Repeat("x", 58) + "\r\n\r\n"
	got, err := readAll(t, exact, 64)
	if err != nil || len(got) != 1 || len(got[0].data) != 58 {
		t.Fatalf("exact-limit line: got %v, %v", got, err)
	}
	// Many short data lines cannot add up to an unbounded event either.
	many := strings.Repeat("data: "+strings.Repeat("y", 40)+"\n", 10) + "\n"
	if _, err := readAll(t, many, 64); !errors.Is(err, ErrEventTooLong) {
		t.Fatalf("got %v, want ErrEventTooLong", err)
	}
	// Lines longer than the read buffer spill over and still parse, up to
	// the limit, and events after them are intact.
	big := strings.Repeat("b", 9000)
	got, err = readAll(t, "data: "+big+"\n\ndata: after\n\n", 10000)
	if err != nil || len(got) != 2 || got[0].data != big || got[1].data != "after" {
		t.Fatalf("long line: %d events, err %v", len(got), err)
	}
	if _, err := readAll(t, "data: "+strings.Repeat("b", 12000)+"\n\n", 10000); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("long line over limit: got %v", err)
	}
	// A never-ending line without a newline is cut at the limit, not buffered.
	endless := io.MultiReader(strings.NewReader("data: "), infinite{})
	r := NewReader(endless, 1024)
	if _, err := r.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("endless line: got %v", err)
	}
	// Read in views, it holds the limit and at most one view.
	views := &endlessViews{buf: make([]byte, 4096)}
	r = NewReader(views, 10000)
	if _, err := r.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("endless line in views: got %v", err)
	}
	if views.lent > 10000+4096 || cap(r.long) > 2*(10000+4096) {
		t.Fatalf("endless line in views: %d bytes lent, %d held, for a limit of 10000", views.lent, cap(r.long))
	}
}

// endlessViews lends a line that never ends.
type endlessViews struct {
	buf  []byte
	lent int
}

func (e *endlessViews) View(most int) ([]byte, error) {
	v := e.buf[:min(len(e.buf), most)]
	for i := range v {
		v[i] = 'z'
	}
	e.lent += len(v)
	return v, nil
}

func (e *endlessViews) Read([]byte) (int, error) { panic("read") }

type infinite struct{}

func (infinite) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'z'
	}
	return len(p), nil
}

// A reader error other than EOF (a reset connection) reaches the caller.
func TestReaderPropagatesErrors(t *testing.T) {
	boom := errors.New("connection reset by peer")
	views := newViewer("data: a\n\ndata: b", 4096)
	views.err = boom
	for _, r := range []*Reader{
		NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), errReader{boom}), 0),
		NewReader(views, 0),
	} {
		if e, err := r.Next(); err != nil || string(e.Data) != "a" {
			t.Fatalf("first event: %q %v", e.Data, err)
		}
		if _, err := r.Next(); !errors.Is(err, boom) {
			t.Fatalf("got %v, want %v", err, boom)
		}
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestReaderDoesNotAllocatePerEvent(t *testing.T) {
	chunk := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" hello\"},\"finish_reason\":null}]}\n\n"
	body := strings.Repeat(chunk, 200)
	src := strings.NewReader(body)
	r := NewReader(src, 0)
	allocs := testing.AllocsPerRun(20, func() {
		src.Reset(body)
		r.Reset(src)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per 200 events, want 0", allocs)
	}
	views := newViewer(body, 4096)
	allocs = testing.AllocsPerRun(20, func() {
		views.in = body
		r.Reset(views)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("in views: %v allocations per 200 events, want 0", allocs)
	}
}

// A Reader that reads only views holds no read buffer of its own: a
// probe's pooled readers, one per stream in flight, read probe/h1's views.
func TestReaderOfViewsHoldsNoBuffer(t *testing.T) {
	r := NewReader(nil, 0)
	r.Reset(newViewer("data: a\n\n", 4096))
	if e, err := r.Next(); err != nil || string(e.Data) != "a" {
		t.Fatalf("got %q, %v", e.Data, err)
	}
	if r.br != nil {
		t.Fatal("a Reader of views made a read buffer")
	}
	// An io.Reader after views, and views again, each read whole.
	r.Reset(strings.NewReader("data: b\n\n"))
	if e, err := r.Next(); err != nil || string(e.Data) != "b" {
		t.Fatalf("reader after views: %q, %v", e.Data, err)
	}
	r.Reset(newViewer("data: c\n\n", 2))
	if e, err := r.Next(); err != nil || string(e.Data) != "c" {
		t.Fatalf("views after a reader: %q, %v", e.Data, err)
	}
}

// Any input ends in io.EOF or an error, never a panic or an endless loop,
// and no event is longer than the limit.
func FuzzReader(f *testing.F) {
	f.Add([]byte("data: {\"a\":1}\n\ndata: [DONE]\n\n"), 64)
	f.Add([]byte("event: error\r\ndata: x\r\n\r\n: ping\n"), 16)
	f.Add([]byte("data"), 1)
	f.Add([]byte("event: a\ndata: x\n\ndata: y\r\n\r\ndata: z\ndata: w\n\ndata: v\n\rdata: u\n\n"), 64)
	f.Fuzz(func(t *testing.T, data []byte, limit int) {
		if limit < 1 || limit > 1<<16 {
			limit = 64
		}
		// The same bytes arriving one at a time never leave an event's end
		// buffered, so they take the general path where whole reads take
		// the single-line one: both must see the same events.
		// Read in views, whole or a few bytes at a time, they are the
		// same events again.
		r := NewReader(strings.NewReader(string(data)), limit)
		others := []*Reader{
			NewReader(iotest.OneByteReader(strings.NewReader(string(data))), limit),
			NewReader(newViewer(string(data), 4096), limit),
			NewReader(newViewer(string(data), 1+len(data)%7), limit),
		}
		for i := 0; i <= len(data)+1; i++ {
			ev, err := r.Next()
			for j, slow := range others {
				sev, serr := slow.Next()
				if !errors.Is(err, serr) || string(ev.Name) != string(sev.Name) || string(ev.Data) != string(sev.Data) {
					t.Fatalf("event %d: read whole %q %q %v, source %d %q %q %v", i, ev.Name, ev.Data, err, j, sev.Name, sev.Data, serr)
				}
			}
			if err != nil {
				return
			}
			if len(ev.Data) > limit {
				t.Fatalf("event of %d bytes over the limit %d", len(ev.Data), limit)
			}
		}
		t.Fatalf("more events than input bytes")
	})
}

// A bounded stream ends at the line that passes the bound, with the
// bound's error, at every call after it too, from every source; the
// events within the bound come whole. Reset lifts it.
func TestReaderBound(t *testing.T) {
	event := "data: {\"n\":1}\n\n" // two lines
	in := strings.Repeat(event, 10)
	n := int64(len(event))
	tooLong := errors.New("body too long")
	for _, tc := range []struct {
		bound  int64
		err    error
		events int
		want   error
	}{
		{bound: 10 * n, err: tooLong, events: 10},                   // exactly the stream
		{bound: 10*n - 1, err: tooLong, events: 9, want: tooLong},   // its last blank line passes it
		{bound: 3 * n, err: tooLong, events: 3, want: tooLong},      // three events
		{bound: n + 5, err: nil, events: 1, want: ErrStreamTooLong}, // within the second event
		{bound: 0, err: tooLong, events: 0, want: tooLong},
	} {
		for _, src := range sources {
			r := NewReader(src.of(in), 0)
			r.Bound(tc.bound, tc.err)
			got, err := readFrom(r)
			if len(got) != tc.events || !errors.Is(err, tc.want) {
				t.Fatalf("%s, bound %d: %d events, %v; want %d, %v", src.name, tc.bound, len(got), err, tc.events, tc.want)
			}
			if tc.want != nil {
				if _, err := r.Next(); !errors.Is(err, tc.want) {
					t.Fatalf("%s, bound %d: the call after the bound returned %v, want %v", src.name, tc.bound, err, tc.want)
				}
			}
			r.Reset(src.of(in))
			if got, err := readFrom(r); len(got) != 10 || err != nil {
				t.Fatalf("%s: after Reset, %d events, %v; want the 10 of an unbounded stream", src.name, len(got), err)
			}
		}
	}
}

// A bounded stream of a line that never ends is ended by the line limit
// or the bound, whichever comes first, having held no more than either.
func TestReaderBoundOfAnEndlessLine(t *testing.T) {
	e := &endlessViews{buf: make([]byte, 4096)}
	r := NewReader(e, 1<<20)
	r.Bound(64<<10, ErrStreamTooLong)
	if _, err := r.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("got %v, want the line limit's error", err)
	}
	if e.lent > 1<<20+4096 {
		t.Fatalf("%d bytes lent for a 1 MiB line limit", e.lent)
	}
}
