package h1

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

type bodyMode uint8

const (
	modeNone    bodyMode = iota // no body (204, 304)
	modeLength                  // Content-Length bytes
	modeChunked                 // chunked transfer coding
	modeClose                   // until the server closes the connection
)

// Body is a response body. Read it, then Close it: Close gives the
// connection back for reuse when the body ended cleanly (after reading up
// to 4 KiB that the caller left, such as the end of a chunked stream after
// its last event), and closes it otherwise.
type Body struct {
	cn   *conn
	mode bodyMode
	// left is what remains of the body (modeLength) or of the current
	// chunk (modeChunked).
	left int64
	// crlf is set when a chunk's data has been read and its line ending
	// has not.
	crlf   bool
	eof    bool  // the body ended cleanly
	err    error // the error that ended it otherwise
	closed bool
}

// ErrBodyClosed is returned by Read after Close.
var ErrBodyClosed = errors.New("read on a closed response body")

// maxChunkLine bounds a chunk size line, extensions included.
const maxChunkLine = 4096

func (b *Body) Read(p []byte) (int, error) {
	switch {
	case b.closed:
		return 0, ErrBodyClosed
	case b.err != nil:
		return 0, b.err
	case b.eof:
		return 0, io.EOF
	case len(p) == 0:
		return 0, nil
	}
	br := &b.cn.br
	switch b.mode {
	case modeClose:
		n, err := br.Read(p)
		if err == io.EOF {
			b.eof = true
		} else if err != nil {
			b.err = err
		}
		return n, err
	case modeChunked:
		if b.left == 0 {
			if err := b.nextChunk(); err != nil {
				b.err = err
				return 0, err
			}
			if b.eof {
				return 0, io.EOF
			}
		}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := br.Read(p)
	b.left -= int64(n)
	if b.left == 0 {
		if b.mode == modeLength {
			b.eof = true
			return n, nil
		}
		b.crlf = true
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		b.err = err
	}
	return n, err
}

// View returns the body's next bytes, no more than most (most > 0), without
// copying them: a view into the connection's read buffer, valid until the
// next call on the body. It waits for the socket only when nothing of the
// body is buffered. It ends the body as Read does: io.EOF after its last
// byte, its error after a failed read.
//
// A stream's SSE reader takes its lines from here, so a chunk's bytes are
// not copied into a buffer of the reader's own: that buffer was 1 KiB of
// heap per stream in flight, 0.7 KiB of RSS per stream at 25,000 and
// 50,000 streams (docs/BENCHMARKS.md, how to read the figures).
func (b *Body) View(most int) ([]byte, error) {
	switch {
	case b.closed:
		return nil, ErrBodyClosed
	case b.err != nil:
		return nil, b.err
	case b.eof:
		return nil, io.EOF
	}
	br := &b.cn.br
	if b.mode == modeChunked && b.left == 0 {
		// At a chunk's edge a stream waits for its next chunk here, not
		// in nextChunk's line reads two frames further down: at wide
		// levels each frame on the way back up after the wait is a cold
		// cache line (docs/BENCHMARKS.md, how to read the figures).
		// The chunk before's line ending, when buffered, is taken first,
		// so that a buffer holding nothing else counts as empty. A read
		// that fails here fails as nextChunk's would (chunkErr).
		if b.crlf && br.Buffered() >= 2 {
			if v, _ := br.Peek(2); v[0] == '\r' && v[1] == '\n' {
				_, _ = br.Discard(2)
				b.crlf = false
			}
		}
		if br.Buffered() == 0 {
			if _, err := br.Peek(1); err != nil {
				b.err = chunkErr(err, "")
				return nil, b.err
			}
		}
		if err := b.nextChunk(); err != nil {
			b.err = err
			return nil, err
		}
		if b.eof {
			return nil, io.EOF
		}
	}
	if br.Buffered() == 0 {
		if _, err := br.Peek(1); err != nil {
			switch {
			case err == io.EOF && b.mode == modeClose:
				b.eof = true
			case err == io.EOF:
				b.err = io.ErrUnexpectedEOF
			default:
				b.err = err
			}
			if b.eof {
				return nil, io.EOF
			}
			return nil, b.err
		}
	}
	n := min(br.Buffered(), most)
	if b.mode != modeClose && int64(n) > b.left {
		n = int(b.left)
	}
	// Peek of buffered bytes neither reads nor fails; Discard only moves
	// the buffer's read position, so the view stays whole until the next
	// read fills the buffer.
	v, _ := br.Peek(n)
	_, _ = br.Discard(n)
	if b.mode != modeClose {
		b.left -= int64(n)
		if b.left == 0 {
			if b.mode == modeLength {
				b.eof = true
			} else {
				b.crlf = true
			}
		}
	}
	return v, nil
}

// nextChunk reads the line ending of the chunk before, the next chunk's
// size line and, for the last chunk, the trailer.
func (b *Body) nextChunk() error {
	budget := maxChunkLine
	if b.crlf {
		line, long, err := b.cn.readLine(&budget)
		if err != nil || long || len(line) != 0 {
			return chunkErr(err, "missing line ending after chunk data")
		}
		b.crlf = false
	}
	budget = maxChunkLine
	line, long, err := b.cn.readLine(&budget)
	if err != nil || long {
		return chunkErr(err, "chunk size line too long")
	}
	var size int64
	digits := 0
	for _, c := range line {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		case c == ';' || c == ' ' || c == '\t':
			goto parsed // extensions follow; they mean nothing here
		default:
			return fmt.Errorf("malformed chunk size line %q", b.cn.excerpt(line))
		}
		if digits++; digits > 15 {
			return errors.New("chunk too large")
		}
		size = size<<4 | int64(d)
	}
parsed:
	if digits == 0 {
		return fmt.Errorf("malformed chunk size line %q", b.cn.excerpt(line))
	}
	if size > 0 {
		b.left = size
		return nil
	}
	// The last chunk: skip the trailer up to its blank line.
	budget = maxHeadBytes
	for {
		line, long, err := b.cn.readLine(&budget)
		if err != nil {
			return chunkErr(err, "")
		}
		if len(line) == 0 && !long {
			b.eof = true
			return nil
		}
	}
}

func chunkErr(err error, what string) error {
	switch {
	case errors.Is(err, io.EOF):
		return io.ErrUnexpectedEOF
	case err != nil:
		return err
	}
	return errors.New("malformed chunked body: " + what)
}

// SetReadDeadline bounds the body's reads from now on, as net.Conn's does;
// a read past it fails, and Close then closes the connection. The zero
// time lifts the bound.
func (b *Body) SetReadDeadline(t time.Time) error { return b.cn.nc.SetReadDeadline(t) }

// drainBudget is how much of a body Close reads to keep the connection.
const drainBudget = 4096

// DrainTimeout is how long Close waits for the rest of a body the caller
// left unread (the end of a chunked stream after its last event). Servers
// send it right after the last event; one that sends neither it nor a
// close would otherwise hold the request, and its load slot, until the
// request's timeout.
const DrainTimeout = 100 * time.Millisecond

// ErrDrainTimeout is returned by Close when the rest of the body did not
// come within DrainTimeout. The connection is closed; what was read
// before stands.
var ErrDrainTimeout = errors.New("the response body did not end within 100ms of the stream's end; connection closed")

// Close ends the body and gives its connection back or closes it. Its
// only error is ErrDrainTimeout.
func (b *Body) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	cn := b.cn
	reuse := !cn.closeAfter && b.err == nil
	var drainErr error
	if reuse && !b.eof {
		drainErr = b.drain(drainBudget)
		reuse = drainErr == nil
	}
	reuse = reuse && cn.br.Buffered() == 0
	if !cn.disarm() {
		reuse = false // the context fired; the connection's deadline is spent
		drainErr = nil
	}
	if reuse {
		cn.h.put(cn)
	} else {
		cn.close()
	}
	if drainErr != nil && isTimeout(drainErr) {
		return ErrDrainTimeout
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// errNotDrained is drain's answer for a body it would not wait for.
var errNotDrained = errors.New("body left unread")

// drain skips what is left of the body if that is at most budget bytes
// and comes within DrainTimeout, and returns nil when the body then ended
// cleanly.
func (b *Body) drain(budget int) error {
	br := &b.cn.br
	nc := b.cn.nc
	if err := nc.SetReadDeadline(time.Now().Add(DrainTimeout)); err != nil {
		return err
	}
	for !b.eof {
		if b.mode == modeChunked && b.left == 0 {
			if err := b.nextChunk(); err != nil {
				return err
			}
			continue
		}
		if b.left > int64(budget) {
			return errNotDrained
		}
		n, err := br.Discard(int(b.left))
		budget -= n
		b.left -= int64(n)
		if err != nil {
			return err
		}
		if b.mode == modeLength {
			b.eof = true
		} else {
			b.crlf = true
		}
	}
	return nc.SetReadDeadline(time.Time{})
}
