package openai

import (
	"errors"
	"io"
)

// ReadEmbeddings reads an embeddings response from r as it arrives: its
// vectors are counted and their elements checked without keeping them, so
// a response of any size costs its window (64 KiB) and one member other
// than data (its model, usage or error, up to 64 KiB). It fills c as
// the embeddings protocol's Whole does on the same bytes, and refuses what
// that refuses (FuzzParseEvents holds the two together). Time is linear
// in the bytes read; nesting stops at MaxDepth.
//
// The whole response used to be read first (io.ReadAll, about twice the
// 64 MiB body limit at its peak per request in flight): a 60 MB vector at
// concurrency 4 took the process to 657 MB.
func ReadEmbeddings(r io.Reader, c *Chunk) error {
	*c = Chunk{}
	s := streamScanner{src: r, buf: make([]byte, streamWindow)}
	if s.peek() != '{' {
		return s.fail(ErrMalformed)
	}
	if err := s.embeddings(c); err != nil {
		return s.fail(err)
	}
	if s.peek() != 0 || !errors.Is(s.err, io.EOF) {
		return s.fail(ErrMalformed)
	}
	return nil
}

const (
	// streamWindow is what a streamScanner holds of its input.
	streamWindow = 64 << 10
	// maxMember bounds a member kept to be read whole (model, usage,
	// error, object): far past what a server sends there.
	maxMember = 64 << 10
	// maxKey bounds a key; a longer one is no key the reader knows.
	maxKey = 256
)

// ErrMemberTooLarge is a member of a streamed response over maxMember.
var ErrMemberTooLarge = errors.New("a member of the response is over 64 KiB")

// streamScanner reads JSON from src through a window of fixed size.
type streamScanner struct {
	src   io.Reader
	buf   []byte
	i, n  int
	err   error // the read error that ended the input (io.EOF at its end)
	depth int
	key   [maxKey]byte
}

// fail is err, or the read error that cut the input short: a timeout or
// the body limit says more than "malformed".
func (s *streamScanner) fail(err error) error {
	if s.err != nil && !errors.Is(s.err, io.EOF) {
		return s.err
	}
	return err
}

// fill makes at least one byte available, and reports whether it could.
// A reader that returns nothing and no error 100 times in a row ends the
// input (io.ErrNoProgress), as bufio's does, rather than spin.
func (s *streamScanner) fill() bool {
	for empty := 0; s.i == s.n; empty++ {
		if s.err != nil {
			return false
		}
		if empty == 100 {
			s.err = io.ErrNoProgress
			return false
		}
		s.i = 0
		s.n, s.err = s.src.Read(s.buf)
	}
	return true
}

// peek skips white space and returns the next byte, 0 at the end.
func (s *streamScanner) peek() byte {
	for s.fill() {
		switch c := s.buf[s.i]; c {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return c
		}
	}
	return 0
}

func (s *streamScanner) expect(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

// value reads one value, appending its bytes to *out (when out is not
// nil) up to limit of them.
func (s *streamScanner) value(out *[]byte, limit int) error {
	switch c := s.peek(); {
	case c == '"':
		return s.run(out, limit, true, nil)
	case c == '{' || c == '[':
		return s.nested(out, limit)
	case c == '-' || c >= '0' && c <= '9':
		return s.run(out, limit, false, nil)
	case c == 't':
		return s.literal(out, limit, "true")
	case c == 'f':
		return s.literal(out, limit, "false")
	case c == 'n':
		return s.literal(out, limit, "null")
	}
	return ErrMalformed
}

func (s *streamScanner) literal(out *[]byte, limit int, lit string) error {
	for j := range len(lit) {
		if !s.fill() || s.buf[s.i] != lit[j] {
			return ErrMalformed
		}
		s.i++
	}
	return keep(out, limit, lit)
}

// keep appends b to *out within limit bytes.
func keep[T string | []byte](out *[]byte, limit int, b T) error {
	if out == nil {
		return nil
	}
	if len(*out)+len(b) > limit {
		return ErrMemberTooLarge
	}
	*out = append(*out, b...)
	return nil
}

// numberByte is the bytes of a number, as scanner.skip takes them.
var numberByte = [256]bool{'-': true, '+': true, '.': true, 'e': true, 'E': true,
	'0': true, '1': true, '2': true, '3': true, '4': true, '5': true, '6': true, '7': true, '8': true, '9': true}

// run reads a string (its quotes included) or a number, across windows,
// keeping its bytes in *out up to limit of them. Past limit it fails with
// ErrMemberTooLarge; or, with cut, it reads on, keeps no more, and says
// so in *cut.
func (s *streamScanner) run(out *[]byte, limit int, str bool, cut *bool) error {
	started, escaped := false, false
	for s.fill() {
		j, ended := s.i, false
		if !str {
			for j < s.n && numberByte[s.buf[j]] {
				j++
			}
			ended = j < s.n
		}
		for ; str && j < s.n; j++ {
			c := s.buf[j]
			switch {
			case !started:
				started = true
			case escaped: // any byte, as scanner.str skips it
				escaped = false
			case c < ' ':
				return ErrMalformed // a control character, as scanner.str
			case c == '\\':
				escaped = true
			case c == '"':
				ended = true
			}
			if ended {
				j++
				break
			}
		}
		if err := keep(out, limit, s.buf[s.i:j]); err != nil {
			if cut == nil {
				return err
			}
			*cut, out = true, nil
		}
		s.i = j
		if ended {
			return nil
		}
	}
	// A number may end with the input (and the object with it: the
	// caller finds that malformed); a string may not.
	if str {
		return ErrMalformed
	}
	return nil
}

// nested reads an object or an array, its depth bounded.
func (s *streamScanner) nested(out *[]byte, limit int) error {
	if s.depth >= MaxDepth {
		return ErrTooDeep
	}
	s.depth++
	defer func() { s.depth-- }()
	open := s.buf[s.i]
	closing := byte(']')
	if open == '{' {
		closing = '}'
	}
	s.i++
	if err := keep(out, limit, []byte{open}); err != nil {
		return err
	}
	if s.expect(closing) {
		return keep(out, limit, []byte{closing})
	}
	for {
		if open == '{' {
			if s.peek() != '"' {
				return ErrMalformed
			}
			if err := s.run(out, limit, true, nil); err != nil {
				return err
			}
			if !s.expect(':') {
				return ErrMalformed
			}
			if err := keep(out, limit, ":"); err != nil {
				return err
			}
		}
		if err := s.value(out, limit); err != nil {
			return err
		}
		switch {
		case s.expect(','):
			if err := keep(out, limit, ","); err != nil {
				return err
			}
		case s.expect(closing):
			return keep(out, limit, []byte{closing})
		default:
			return ErrMalformed
		}
	}
}

// members reads an object, calling member with each key (nil when the
// key is longer than maxKey), which must read the key's value. A value
// that is not an object is read and left.
func (s *streamScanner) members(member func(k []byte) error) error {
	return s.each('{', '}', func() error {
		if s.peek() != '"' {
			return ErrMalformed
		}
		k, cut := s.key[:0], false
		if err := s.run(&k, len(s.key), true, &cut); err != nil {
			return err
		}
		if cut {
			k = nil // longer than any key the reader knows
		} else {
			k = k[1 : len(k)-1]
		}
		if !s.expect(':') {
			return ErrMalformed
		}
		return member(k)
	})
}

// array reads an array, calling elem for each element, which must read
// it. A value that is not an array is read and left.
func (s *streamScanner) array(elem func() error) error { return s.each('[', ']', elem) }

// each reads an object or an array (open, closing), calling one for each
// member or element; a value of another kind is read and left.
func (s *streamScanner) each(open, closing byte, one func() error) error {
	if s.peek() != open {
		return s.value(nil, 0)
	}
	if s.depth >= MaxDepth {
		return ErrTooDeep
	}
	s.depth++
	defer func() { s.depth-- }()
	s.i++
	if s.expect(closing) {
		return nil
	}
	for {
		if err := one(); err != nil {
			return err
		}
		switch {
		case s.expect(','):
		case s.expect(closing):
			return nil
		default:
			return ErrMalformed
		}
	}
}

// embeddings reads the response's members as scanner.embeddings does:
// data as it streams, the others kept and read whole by the scanner.
func (s *streamScanner) embeddings(c *Chunk) error {
	var typ []byte
	err := s.members(func(k []byte) error {
		switch string(k) {
		case "data":
			return s.array(func() error {
				var v vector
				err := s.members(func(k []byte) error {
					if string(k) != "embedding" || s.peek() != '[' {
						return s.value(nil, 0)
					}
					return s.array(func() error {
						v.element(s.peek())
						return s.value(nil, 0)
					})
				})
				v.add(c)
				return err
			})
		case "model", "usage", "error", "object":
			var raw []byte
			if err := s.value(&raw, maxMember); err != nil {
				return err
			}
			m := scanner{b: raw}
			return m.embeddingsMember(c, k, &typ)
		}
		return s.value(nil, 0)
	})
	embeddingsEnd(c, typ)
	return err
}
