// Package sse reads Server-Sent Events streams as OpenAI-compatible inference
// servers send them.
//
// The reader is on the measuring hot path: it allocates nothing per event,
// hands out views into its own buffers or its source's (a Viewer), and
// bounds the length of a line so a hostile or broken endpoint cannot make
// the probe buffer without limit.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// DefaultMaxLineBytes bounds one SSE line. Inference servers send one JSON
// chunk per line, a few hundred bytes for a token; 1 MiB leaves room for
// large tool-call or logprob payloads while keeping a runaway line bounded.
const DefaultMaxLineBytes = 1 << 20

// readBufferSize is small on purpose: a probe holds thousands of streams, and
// token chunks are a few hundred bytes. Longer lines spill into a side
// buffer that grows only up to the line limit. The transport below has its
// own 4 KiB buffer that the socket is read into, so a smaller one here
// costs copies from memory, not system calls; 1 KiB rather than 4 saves 3
// KiB of heap per stream (30 MB at 10,000 streams in the heap profile).
// A Viewer source (probe/h1's body) needs none: its lines are read in the
// transport's buffer.
const readBufferSize = 1024

// ErrLineTooLong is returned when a line exceeds the reader's limit.
var ErrLineTooLong = errors.New("sse: line exceeds the length limit")

// ErrEventTooLong is returned when the data lines of one event together
// exceed the reader's limit.
var ErrEventTooLong = errors.New("sse: event data exceeds the length limit")

// Event is one dispatched SSE event. Name and Data are views into the
// reader's buffers and are valid only until the next call to Next.
type Event struct {
	// Name is the value of the last `event:` field, empty for the default
	// "message" event.
	Name []byte
	// Data is the event's `data:` lines joined by '\n', as the SSE
	// specification assembles them.
	Data []byte
}

// Viewer is a source that lends its bytes rather than copying them out:
// View returns the stream's next bytes, no more than most (most > 0),
// valid until the next call, or an error (io.EOF at the end). probe/h1's
// response body is one: its views are the connection's read buffer.
type Viewer interface {
	View(most int) ([]byte, error)
}

// viewMax bounds one view: the connection's buffer (1 KiB, probe/h1)
// bounds it already; this bounds what a Viewer with a larger buffer lends
// at once.
const viewMax = 64 << 10

// Reader splits a byte stream into SSE events.
type Reader struct {
	// A Viewer source's lines are read in its views (src, view); any
	// other's through br, made on the first such source.
	src     Viewer
	view    []byte // what is left of src's last view
	br      *bufio.Reader
	max     int
	long    []byte // holds a line longer than the bufio buffer, or across views
	data    []byte
	name    []byte
	hasData bool
	// left is what remains of the stream's bound (Bound), in bytes of
	// lines; boundErr is what Next returns past it, nil while the stream
	// is unbounded (left then means nothing).
	left     int64
	boundErr error
}

// ErrStreamTooLong is what Next returns past a Bound given no error of
// its own.
var ErrStreamTooLong = errors.New("sse: stream exceeds the length limit")

// Bound ends the stream after n bytes of lines (line endings included):
// Next fails with err (ErrStreamTooLong when nil) at the line that passes
// them, and at each call after it. Reset lifts the bound.
//
// It is the reader's own, not a wrapper's around the source: a stream
// waits for its next chunk at the bottom of the calls that read it, and
// at wide levels each frame and object on the way back up after the wait
// is a cold cache line (docs/BENCHMARKS.md, how to read the figures);
// a wrapper is one of each.
func (r *Reader) Bound(n int64, err error) {
	if err == nil {
		err = ErrStreamTooLong
	}
	r.left, r.boundErr = n, err
}

// NewReader returns a Reader whose lines may be at most maxLine bytes long
// (DefaultMaxLineBytes when maxLine <= 0).
func NewReader(r io.Reader, maxLine int) *Reader {
	if maxLine <= 0 {
		maxLine = DefaultMaxLineBytes
	}
	rd := &Reader{max: maxLine}
	rd.Reset(r)
	return rd
}

// Reset makes the Reader read from src, keeping its buffers. A src that
// is a Viewer is read in its views; the buffered reader that any other
// needs is made only then, so that a Reader that reads only views holds
// no read buffer.
func (r *Reader) Reset(src io.Reader) {
	r.src, r.view = nil, nil
	if v, ok := src.(Viewer); ok {
		r.src = v
		src = nil
	}
	switch {
	case r.br != nil:
		r.br.Reset(src)
	case src != nil:
		r.br = bufio.NewReaderSize(src, readBufferSize)
	}
	r.data = r.data[:0]
	r.name = r.name[:0]
	r.hasData = false
	r.left, r.boundErr = 0, nil
}

// Next returns the next event, or io.EOF at the end of the stream.
//
// An event still being assembled when the stream ends is dispatched anyway:
// whether the stream ended cleanly is for the caller to judge from what the
// events said ([DONE], finish_reason), not for the framing layer.
func (r *Reader) Next() (Event, error) {
	for {
		// Each reader of a line is called from here, not through one
		// that chooses: a stream waits for its next chunk at the bottom
		// of the calls that read it, and at wide levels each frame on the
		// way back up after the wait is a cold cache line
		// (docs/BENCHMARKS.md, how to read the figures).
		var line []byte
		var err error
		if r.src != nil {
			line, err = r.viewLine()
		} else {
			line, err = r.readLine()
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return Event{}, err
		}
		if r.boundErr != nil {
			if r.left -= int64(len(line)); r.left < 0 {
				return Event{}, r.boundErr
			}
		}
		eof := err == io.EOF //nolint:errorlint // the reader's own sentinel, never wrapped; this runs per line
		line = trimEOL(line)
		if len(line) > r.max {
			return Event{}, ErrLineTooLong
		}
		if len(line) > 0 {
			if ev, ok := r.single(line); ok {
				if r.boundErr != nil && r.left < 0 { // its blank line passed the bound
					return Event{}, r.boundErr
				}
				return ev, nil
			}
			if ferr := r.field(line); ferr != nil {
				return Event{}, ferr
			}
		}
		if len(line) == 0 || eof {
			if r.hasData {
				ev := Event{Name: r.name, Data: r.data}
				r.hasData = false
				r.data = r.data[:0]
				r.name = r.name[:0]
				return ev, nil
			}
			// An event with no data is not dispatched (SSE spec), and its
			// name does not carry over to the next one.
			r.name = r.name[:0]
			if eof {
				return Event{}, io.EOF
			}
		}
	}
}

// single returns the event of line when line is an event's only data line
// and the blank line that ends the event is already buffered, which is how
// servers write a chunk ("data: {...}\n\n" in one write): Data is then a
// view of line itself, not a copy, valid until the next read. Anything
// else (a second data line, a field, an end not yet received) takes the
// general path.
func (r *Reader) single(line []byte) (Event, bool) {
	if r.hasData || len(line) < 5 || string(line[:5]) != "data:" {
		return Event{}, false
	}
	if r.src != nil {
		switch v := r.view; {
		case len(v) > 0 && v[0] == '\n':
			r.view = v[1:]
			r.left--
		case len(v) > 1 && v[0] == '\r' && v[1] == '\n':
			r.view = v[2:]
			r.left -= 2
		default:
			return Event{}, false
		}
		return r.dispatch(line), true
	}
	n := r.br.Buffered()
	if n == 0 {
		return Event{}, false
	}
	next, _ := r.br.Peek(min(n, 2)) // buffered bytes: no read, line stays valid
	switch {
	case next[0] == '\n':
		_, _ = r.br.Discard(1)
		r.left--
	case len(next) == 2 && next[0] == '\r' && next[1] == '\n':
		_, _ = r.br.Discard(2)
		r.left -= 2
	default:
		return Event{}, false
	}
	return r.dispatch(line), true
}

// dispatch is the event whose only data line is line.
func (r *Reader) dispatch(line []byte) Event {
	value := line[5:]
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	ev := Event{Name: r.name, Data: value}
	r.name = r.name[:0]
	return ev
}

// readLine returns the next line of a source that is not a Viewer, with
// its terminator, or what is left before EOF. It never holds more than
// the line limit in memory.
func (r *Reader) readLine() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if err != bufio.ErrBufferFull { //nolint:errorlint // bufio's sentinel, never wrapped; this runs per line
		return line, err
	}
	r.long = append(r.long[:0], line...)
	for {
		if len(trimEOL(r.long)) > r.max {
			return nil, ErrLineTooLong
		}
		line, err = r.br.ReadSlice('\n')
		r.long = append(r.long, line...)
		if err != bufio.ErrBufferFull { //nolint:errorlint // as above
			return r.long, err
		}
	}
}

// viewLine is readLine for a Viewer source: a line within one view is a
// view itself; one that spans views is gathered in long, up to the limit,
// so that it holds at most the limit and one view.
func (r *Reader) viewLine() ([]byte, error) {
	carried := false
	for {
		if i := bytes.IndexByte(r.view, '\n'); i >= 0 {
			line := r.view[:i+1]
			r.view = r.view[i+1:]
			if !carried {
				return line, nil
			}
			r.long = append(r.long, line...)
			return r.long, nil
		}
		if !carried {
			r.long, carried = r.long[:0], true
		}
		r.long = append(r.long, r.view...)
		r.view = nil
		if len(trimEOL(r.long)) > r.max {
			return nil, ErrLineTooLong
		}
		v, err := r.src.View(viewMax)
		if err != nil {
			return r.long, err
		}
		r.view = v
	}
}

func (r *Reader) field(line []byte) error {
	if line[0] == ':' {
		return nil // comment, often a keep-alive
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) { // no allocation: the compiler special-cases this
	case "data":
		if r.hasData {
			if len(r.data)+1+len(value) > r.max {
				return ErrEventTooLong
			}
			r.data = append(r.data, '\n')
		}
		r.data = append(r.data, value...)
		r.hasData = true
	case "event":
		r.name = append(r.name[:0], value...)
	}
	// id and retry fields mean nothing to a probe; unknown fields are
	// ignored as the specification requires.
	return nil
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}
