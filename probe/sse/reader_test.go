package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type ev struct{ name, data string }

func readAll(t *testing.T, in string, limit int) ([]ev, error) {
	t.Helper()
	r := NewReader(strings.NewReader(in), limit)
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
}

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
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), errReader{boom}), 0)
	if e, err := r.Next(); err != nil || string(e.Data) != "a" {
		t.Fatalf("first event: %q %v", e.Data, err)
	}
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("got %v, want %v", err, boom)
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
		r := NewReader(strings.NewReader(string(data)), limit)
		slow := NewReader(iotest.OneByteReader(strings.NewReader(string(data))), limit)
		for i := 0; i <= len(data)+1; i++ {
			ev, err := r.Next()
			sev, serr := slow.Next()
			if !errors.Is(err, serr) || string(ev.Name) != string(sev.Name) || string(ev.Data) != string(sev.Data) {
				t.Fatalf("event %d: read whole %q %q %v, byte by byte %q %q %v", i, ev.Name, ev.Data, err, sev.Name, sev.Data, serr)
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
