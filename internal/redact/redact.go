// Package redact takes secrets out of text that tokenprobe did not write:
// error bodies, error events and malformed lines from servers, messages of
// libraries. A server may echo a request's headers back (some gateways do
// in a 401), so any such text can hold an API key.
package redact

import (
	"bytes"
	"errors"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Marker replaces every occurrence of a secret. It needs no escaping in
// JSON or HTML, so it reads the same in records, pages and logs.
const Marker = "[REDACTED]"

// Set is the secrets to take out. The configuration's keys only grow: a
// key rotated out of the configuration is still a secret. Credentials a
// signer fetches (cloud access tokens) rotate: per owner the set keeps
// the last RotatingKept, the one in use among them, so that a token
// endpoint issuing a new token per fetch cannot grow it without end (it
// kept every one: 60 KB tokens took a daemon to 508 MB in a minute). A
// nil *Set redacts nothing. It is safe for concurrent use; redacting
// reads a snapshot without locking.
type Set struct {
	mu       sync.Mutex // serialises changes
	static   []string
	rotating map[string][]string // by owner, oldest first
	list     atomic.Pointer[[]string]
}

// RotatingKept is how many of an owner's rotating credentials a Set
// keeps: the one in use, and those requests still in flight may carry.
const RotatingKept = 4

// New returns a set holding secrets.
func New(secrets ...string) *Set {
	s := &Set{}
	s.Add(secrets...)
	return s
}

// Add adds secrets (empty ones are ignored), for good.
func (s *Set) Add(secrets ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.static)
	for _, v := range secrets {
		if v != "" && !slices.Contains(s.static, v) {
			s.static = append(s.static, v)
		}
	}
	if len(s.static) != n {
		s.publish()
	}
}

// AddRotating adds secret, a credential of owner (an endpoint's signer)
// that a newer one replaces: the owner's oldest beyond RotatingKept
// leaves the set.
func (s *Set) AddRotating(owner, secret string) {
	if s == nil || secret == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rotating == nil {
		s.rotating = map[string][]string{}
	}
	kept := s.rotating[owner]
	if slices.Contains(kept, secret) {
		return
	}
	kept = append(kept, secret)
	if len(kept) > RotatingKept {
		kept = slices.Delete(kept, 0, len(kept)-RotatingKept)
	}
	s.rotating[owner] = kept
	s.publish()
}

// publish stores the snapshot redacting reads. Callers hold s.mu.
func (s *Set) publish() {
	next := slices.Clone(s.static)
	for _, kept := range s.rotating {
		for _, v := range kept {
			if !slices.Contains(next, v) {
				next = append(next, v)
			}
		}
	}
	// Longest first, so that a secret holding another is replaced whole.
	slices.SortFunc(next, func(a, b string) int { return len(b) - len(a) })
	s.list.Store(&next)
}

// Len is how many secrets the set holds now.
func (s *Set) Len() int { return len(s.secrets()) }

func (s *Set) secrets() []string {
	if s == nil {
		return nil
	}
	if p := s.list.Load(); p != nil {
		return *p
	}
	return nil
}

// Longest is the length of the longest secret: the margin a reader needs
// beyond an excerpt's length so that no secret crosses the excerpt's edge
// unseen.
func (s *Set) Longest() int {
	if l := s.secrets(); len(l) > 0 {
		return len(l[0])
	}
	return 0
}

// String returns text with every secret replaced by Marker.
func (s *Set) String(text string) string {
	for _, v := range s.secrets() {
		if strings.Contains(text, v) {
			text = strings.ReplaceAll(text, v, Marker)
		}
	}
	return text
}

// Excerpt returns the first n bytes of b, redacted before it is cut, so
// that no part of a secret survives at the excerpt's edge; a marker that
// the cut would split is kept whole. b should extend at least Longest()-1
// bytes past n where more of the text exists.
func (s *Set) Excerpt(b []byte, n int) string {
	for _, v := range s.secrets() {
		if bytes.Contains(b, []byte(v)) {
			b = bytes.ReplaceAll(b, []byte(v), []byte(Marker))
		}
	}
	if len(b) <= n {
		return string(b)
	}
	if i := bytes.LastIndex(b[:n], []byte(Marker[:1])); i >= 0 && i+len(Marker) > n && bytes.HasPrefix(b[i:], []byte(Marker)) {
		n = i + len(Marker)
	}
	return string(b[:n])
}

// Error returns err with its text redacted: err itself when it holds no
// secret, else a plain error with the redacted text.
func (s *Set) Error(err error) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	if red := s.String(text); red != text {
		return errors.New(red)
	}
	return err
}

// URL is raw with the value of every query parameter replaced by Marker
// and any user information dropped, for a URL shown in a record, a
// label, a report or an error: `tokenprobe check` refuses parameters
// that look like credentials, and this keeps the rest of a query (a
// signature under an unexpected name) out of what is shown, its names
// kept. A URL with neither is returned as it is, without allocating.
func URL(raw string) string {
	if !strings.ContainsAny(raw, "?@") {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.IndexByte(raw, '?'); i >= 0 {
			return raw[:i] + "?" + Marker
		}
		return raw
	}
	u.User = nil
	if u.RawQuery != "" {
		var b strings.Builder
		for i, kv := range strings.Split(u.RawQuery, "&") {
			if i > 0 {
				b.WriteByte('&')
			}
			name, _, _ := strings.Cut(kv, "=")
			b.WriteString(name + "=" + Marker)
		}
		u.RawQuery = b.String()
	}
	return u.String()
}
