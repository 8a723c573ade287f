// Package openai speaks the wire formats of the APIs the probe drives:
// OpenAI's (which vLLM, SGLang, TGI, NIM, Ollama and llama.cpp's server
// serve), the Anthropic Messages API and KServe v2's generate extension.
// Each API is one file defining its Protocol (protocol.go): its request
// body, and readers of its stream over the allocation-free scanner here.
package openai

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
)

// NotNumbers is Chunk.Dimensions for an embeddings response one of whose
// vectors holds a string, null, bool, object or list.
const NotNumbers = -2

// Chunk is what the probe needs to know about one streamed chunk. It is
// filled by ParseChunk without allocating, so it carries facts, not text.
type Chunk struct {
	// Content is true when any choice carries non-empty output: text
	// (chat `delta.content`, completions `text`) or a tool call's name or
	// arguments.
	Content bool
	// ToolCall is true when that output is a tool call's (`tool_calls`).
	ToolCall bool
	// Reasoning is true when any choice carries non-empty reasoning text
	// (`delta.reasoning_content` or `delta.reasoning`).
	Reasoning bool
	// ContentBytes is the raw (still JSON-escaped) length of the output and
	// reasoning text and tool call arguments in the chunk; a rough size,
	// not a token count.
	ContentBytes int
	// Finished is true when a choice carries a non-null finish_reason.
	Finished bool
	// FinishReason is the last non-null finish_reason's raw (still
	// JSON-escaped) bytes, and Model the top-level model's: slices of the
	// parsed data, valid until it is reused; empty when absent.
	FinishReason []byte
	Model        []byte
	// Usage is true when the chunk carries a usage object with token counts.
	Usage            bool
	PromptTokens     int
	CompletionTokens int
	// CachedTokens is the part of PromptTokens the server read from its
	// prompt cache (chat's prompt_tokens_details.cached_tokens, the
	// Messages API's cache_read_input_tokens, the Responses API's
	// input_tokens_details.cached_tokens), billed at its own price.
	CachedTokens int
	// Error is true when the chunk is an error payload (a top-level
	// `error` member, or `"object": "error"` as vLLM sends it).
	Error bool
	// Vectors is how many embeddings a response holds, Dimensions the
	// length of each (-1 when they differ, NotNumbers when one holds a
	// value that is no number, 0 when one is empty or not a list).
	Vectors, Dimensions int
	// End is true for the event that ends a stream of typed events (the
	// Messages API's message_delta with its stop_reason, and its
	// message_stop; the Responses API's completed, incomplete and failed),
	// as [DONE] ends a chat stream.
	End bool
}

// ErrMalformed reports a chunk that is not a JSON object of the expected shape.
var ErrMalformed = errors.New("malformed JSON chunk")

// MaxDepth bounds how deeply objects and arrays may nest in one chunk or
// response. Real payloads nest a handful of levels; the bound keeps the
// scanner's stack small whatever a server sends (each level is one frame
// of skip), where unbounded recursion let a body of nested brackets
// overflow the stack and kill the process.
const MaxDepth = 256

// ErrTooDeep reports a payload nested deeper than MaxDepth.
var ErrTooDeep = fmt.Errorf("%w: nested deeper than %d levels", ErrMalformed, MaxDepth)

type scanner struct {
	b []byte
	i int
	// depth counts the objects and arrays open around s.i.
	depth int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next byte after any whitespace, 0 at the end. Servers
// send compact JSON, so the common case is the byte at s.i, tested once.
func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		if c := s.b[s.i]; c > ' ' {
			return c
		}
		s.ws()
		if s.i < len(s.b) {
			return s.b[s.i]
		}
	}
	return 0
}

func (s *scanner) expect(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

// plainByte marks the bytes a JSON string holds as they are: not the
// closing quote, not a backslash, not a control character.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special sets the high bit of the lowest byte of w (read little-endian)
// that a JSON string cannot hold as it is: a quote, a backslash or a
// control character. Bytes above that one may be flagged wrongly (a borrow
// carries upward), so only the lowest flag is meaningful; 0 means all
// eight bytes are plain. Bytes of 0x80 and above (UTF-8) are plain.
func special(w uint64) uint64 {
	q := w ^ (lsb * '"')
	e := w ^ (lsb * '\\')
	return ((q-lsb)&^q | (e-lsb)&^e | (w-lsb*0x20)&^w) & msb
}

// str reads a string and returns its raw bytes between the quotes, escapes
// left in place, or nil when it is malformed (an empty string is an empty,
// non-nil slice of s.b). Keys we match never contain escapes. Strings are
// most of a chunk's bytes, so it tests eight at a time where eight are
// left in b, and one at a time after (the history of docs/BENCHMARKS.md says what that
// bought).
func (s *scanner) str() []byte {
	b, i := s.b, s.i
	if i >= len(b) || b[i] != '"' {
		if s.peek() != '"' {
			return nil
		}
		i = s.i
	}
	i++
	start := i
	for {
		for ; i+8 <= len(b); i += 8 {
			if m := special(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				goto stop
			}
		}
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		if i >= len(b) {
			return nil
		}
	stop:
		switch b[i] {
		case '"':
			s.i = i + 1
			return b[start:i]
		case '\\':
			i += 2
		default:
			return nil // a control character
		}
	}
}

// objectStart consumes '{' and reports whether the object is empty.
func (s *scanner) objectStart() (empty bool, err error) {
	if !s.expect('{') {
		return false, ErrMalformed
	}
	return s.expect('}'), nil
}

// key reads `"key":`, returning nil when it is malformed.
func (s *scanner) key() []byte {
	k := s.str()
	if k == nil || !s.expect(':') {
		return nil
	}
	return k
}

// more consumes ',' (true) or the closing delimiter (false).
func (s *scanner) more(closing byte) (bool, error) {
	switch s.peek() {
	case ',':
		s.i++
		return true, nil
	case closing:
		s.i++
		return false, nil
	}
	return false, ErrMalformed
}

func (s *scanner) isNull() bool {
	s.ws()
	if len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// textLen reads a string-or-null value and returns its raw length.
func (s *scanner) textLen() (int, error) {
	if s.isNull() {
		return 0, nil
	}
	if s.peek() != '"' {
		return 0, s.skip() // a server-specific shape: not text we count
	}
	raw := s.str()
	if raw == nil {
		return 0, ErrMalformed
	}
	return len(raw), nil
}

func (s *scanner) int() (int, error) {
	if s.isNull() {
		return 0, nil
	}
	s.ws()
	start, n := s.i, 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		n = n*10 + int(s.b[s.i]-'0')
		s.i++
	}
	if s.i == start {
		return 0, ErrMalformed
	}
	digits := s.i - start
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		// A float: 12.0 is 12; 1e30 or 12.5 is no token count.
		whole := s.b[s.i] == '.'
		for j := s.i + 1; whole && j < len(s.b) && s.b[j] != ',' && s.b[j] != '}' && s.b[j] != ' '; j++ {
			whole = s.b[j] == '0'
		}
		s.i = start
		if !whole {
			n = Untrusted
		}
		if err := s.skip(); err != nil {
			return 0, err
		}
	}
	if digits > maxCountDigits {
		return Untrusted, nil // past any body's tokens, or wrapped around
	}
	return n, nil
}

// Untrusted is a token count that is no count: a fraction, an exponent,
// more digits than maxCountDigits. The usage is then not believed.
const Untrusted = -1

// maxCountDigits bounds a token count: 999,999,999 tokens are more than
// the 64 MiB body limit could carry.
const maxCountDigits = 9

// skip skips any JSON value, checking its structure.
func (s *scanner) skip() error {
	switch c := s.peek(); {
	case c == '"':
		if s.str() == nil {
			return ErrMalformed
		}
		return nil
	case c == '{' || c == '[':
		return s.skipNested(c)
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		start := s.i
	digits:
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '-', '+', '.', 'e', 'E', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
				s.i++
			default:
				break digits
			}
		}
		if s.i == start {
			return ErrMalformed
		}
		return nil
	}
	return ErrMalformed
}

// skipNested skips an object or array, one level deeper. It is apart from
// skip so that skip's frame, which scalars (most members) pass through,
// stays small.
func (s *scanner) skipNested(c byte) error {
	if s.depth >= MaxDepth {
		return ErrTooDeep
	}
	s.depth++
	var err error
	if c == '{' {
		err = s.skipObject()
	} else {
		err = s.skipArray()
	}
	s.depth--
	return err
}

func (s *scanner) skipObject() error {
	empty, err := s.objectStart()
	if err != nil || empty {
		return err
	}
	for {
		if s.key() == nil {
			return ErrMalformed
		}
		if err := s.skip(); err != nil {
			return err
		}
		more, err := s.more('}')
		if err != nil || !more {
			return err
		}
	}
}

func (s *scanner) skipArray() error {
	s.i++
	if s.expect(']') {
		return nil
	}
	for {
		if err := s.skip(); err != nil {
			return err
		}
		more, err := s.more(']')
		if err != nil || !more {
			return err
		}
	}
}

func (s *scanner) literal(lit string) error {
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return nil
	}
	return ErrMalformed
}

// first opens an object and returns its first key, positioned at its
// value; nil for an empty object, or for a value that is no object
// (skipped, as a server's own shape is), or with *err set. The caller
// reads the value, setting *err on a failure, then calls next:
//
//	var err error
//	for k := s.first(&err); k != nil; k = s.next(&err) { ... }
//	return err
func (s *scanner) first(err *error) []byte {
	if s.peek() != '{' {
		*err = s.skip()
		return nil
	}
	s.i++
	if s.expect('}') {
		return nil
	}
	return s.field(err)
}

// next returns the object's next key, nil at its end or once *err is set.
// It inlines, and nextKey reads the comma and the key in one call, so a
// key costs no more calls than when each reader wrote its own loop.
func (s *scanner) next(err *error) []byte {
	if *err != nil {
		return nil
	}
	return s.nextKey(err)
}

func (s *scanner) nextKey(err *error) []byte {
	switch s.peek() {
	case ',':
		s.i++
	case '}':
		s.i++
		return nil
	default:
		*err = ErrMalformed
		return nil
	}
	return s.field(err)
}

// comma consumes ',' (true) or the closing delimiter (false); anything
// else sets *err.
func (s *scanner) comma(closing byte, err *error) bool {
	more, e := s.more(closing)
	if e != nil {
		*err = e
	}
	return more
}

func (s *scanner) field(err *error) []byte {
	k := s.key()
	if k == nil {
		*err = ErrMalformed
	}
	return k
}

// firstElem and nextElem walk an array as first and next walk an object,
// reporting whether an element is there to read.
func (s *scanner) firstElem(err *error) bool {
	if s.peek() != '[' {
		*err = s.skip()
		return false
	}
	s.i++
	return !s.expect(']')
}

func (s *scanner) nextElem(err *error) bool {
	return *err == nil && s.comma(']', err)
}

// members reads an object (anything else is skipped), calling member with
// each key, positioned at its value, which member must consume.
func (s *scanner) members(member func(k []byte) error) error {
	var err error
	for k := s.first(&err); k != nil; k = s.next(&err) {
		err = member(k)
	}
	return err
}

// array reads an array (null or another value is skipped), calling elem
// at each element, which elem must consume.
func (s *scanner) array(elem func() error) error {
	var err error
	for ok := s.firstElem(&err); ok; ok = s.nextElem(&err) {
		err = elem()
	}
	return err
}

// Unescape is a raw JSON string's bytes (Chunk.Model, Chunk.FinishReason)
// as text; the raw bytes where they do not decode.
func Unescape(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw)
	}
	var s string
	if json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s) != nil {
		return string(raw)
	}
	return s
}
