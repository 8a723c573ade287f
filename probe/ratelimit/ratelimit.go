// Package ratelimit reads the rate-limit headers hosted APIs send with
// every answer, so that a quota running out shows before the first 429.
// The names read are the providers' documented ones (docs/MEASUREMENT.md,
// "Rate limits"):
//
//	OpenAI, Azure OpenAI:  x-ratelimit-{limit,remaining,reset}-{requests,tokens}
//	Anthropic:             anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}
//	Azure, OpenAI:         retry-after-ms beside Retry-After
//
// Reading a header costs a comparison of its name and, for the names
// above, a number parsed in place: no allocation, whatever a server sends.
package ratelimit

import (
	"bytes"
	"math"
	"time"
)

// Kind is what a limit counts.
type Kind uint8

const (
	Requests Kind = iota
	Tokens
	InputTokens
	OutputTokens
	nKinds
)

// NumKinds is how many kinds there are: the size of an array by Kind.
const NumKinds = int(nKinds)

// Kinds lists every kind, in label order.
var Kinds = []Kind{Requests, Tokens, InputTokens, OutputTokens}

var kindNames = [...]string{Requests: "requests", Tokens: "tokens", InputTokens: "input_tokens", OutputTokens: "output_tokens"}

func (k Kind) String() string {
	if k < nKinds {
		return kindNames[k]
	}
	return "unknown"
}

// Field is one of a limit's three numbers.
type Field uint8

const (
	// Limit is the most the window allows.
	Limit Field = iota
	// Remaining is what is left of it.
	Remaining
	// Reset is the seconds until the window is full again.
	Reset
	nFields
)

// Reading is what one response's headers said. The zero value says
// nothing; Any reports whether it says something.
type Reading struct {
	set [nKinds][nFields]bool
	val [nKinds][nFields]float64
	// resetAt holds a reset given as a time (Anthropic's RFC 3339), read
	// against the response's time in Get.
	resetAt [nKinds]time.Time
	// RetryAfter is retry-after-ms's wait, finer than Retry-After's
	// seconds; 0 when absent.
	RetryAfter time.Duration
}

// Any reports whether the headers held a rate limit or retry-after-ms.
func (r *Reading) Any() bool {
	if r.RetryAfter > 0 {
		return true
	}
	for k := range r.set {
		for f := range r.set[k] {
			if r.set[k][f] {
				return true
			}
		}
	}
	return false
}

// Get is a kind's field and whether it was sent. A reset given as a time
// is read against now, the response's time; one in the past is 0.
func (r *Reading) Get(k Kind, f Field, now time.Time) (float64, bool) {
	if k >= nKinds || f >= nFields || !r.set[k][f] {
		return 0, false
	}
	if f == Reset && !r.resetAt[k].IsZero() {
		return max(r.resetAt[k].Sub(now).Seconds(), 0), true
	}
	return r.val[k][f], true
}

var (
	openAI    = []byte("x-ratelimit-")
	anthropic = []byte("anthropic-ratelimit-")
	retryMs   = []byte("retry-after-ms")
)

// Header reads one response header, reporting whether it was one of the
// names above. A value that does not parse is left out: a server that
// sends nonsense has told nothing.
func (r *Reading) Header(name, value []byte) bool {
	if len(name) < len(retryMs) {
		return false
	}
	switch c := name[0] | 0x20; {
	case c == 'r' && bytes.EqualFold(name, retryMs):
		if ms, ok := number(value); ok && ms > 0 && ms < float64(math.MaxInt64/int64(time.Millisecond)) {
			r.RetryAfter = time.Duration(ms * float64(time.Millisecond))
		}
		return true
	case c == 'x' && hasPrefixFold(name, openAI):
		// x-ratelimit-{limit,remaining,reset}-{requests,tokens}
		rest := name[len(openAI):]
		var f Field
		switch {
		case hasPrefixFold(rest, []byte("limit-")):
			f, rest = Limit, rest[len("limit-"):]
		case hasPrefixFold(rest, []byte("remaining-")):
			f, rest = Remaining, rest[len("remaining-"):]
		case hasPrefixFold(rest, []byte("reset-")):
			f, rest = Reset, rest[len("reset-"):]
		default:
			return false
		}
		k, ok := kindOf(rest)
		if !ok || k > Tokens {
			return false
		}
		r.put(k, f, value)
		return true
	case c == 'a' && hasPrefixFold(name, anthropic):
		// anthropic-ratelimit-{kind}-{limit,remaining,reset}
		rest := name[len(anthropic):]
		i := bytes.LastIndexByte(rest, '-')
		if i <= 0 {
			return false
		}
		k, ok := kindOf(rest[:i])
		if !ok {
			return false
		}
		var f Field
		switch suffix := rest[i+1:]; {
		case bytes.EqualFold(suffix, []byte("limit")):
			f = Limit
		case bytes.EqualFold(suffix, []byte("remaining")):
			f = Remaining
		case bytes.EqualFold(suffix, []byte("reset")):
			f = Reset
		default:
			return false
		}
		r.put(k, f, value)
		return true
	}
	return false
}

func kindOf(b []byte) (Kind, bool) {
	switch {
	case bytes.EqualFold(b, []byte("requests")):
		return Requests, true
	case bytes.EqualFold(b, []byte("tokens")):
		return Tokens, true
	case bytes.EqualFold(b, []byte("input-tokens")):
		return InputTokens, true
	case bytes.EqualFold(b, []byte("output-tokens")):
		return OutputTokens, true
	}
	return 0, false
}

func (r *Reading) put(k Kind, f Field, value []byte) {
	value = bytes.TrimSpace(value)
	if f != Reset {
		if v, ok := number(value); ok {
			r.val[k][f], r.set[k][f] = v, true
		}
		return
	}
	// OpenAI: a Go-like duration ("1s", "6m0s", "20ms"); Anthropic: an
	// RFC 3339 time; some gateways: seconds.
	if v, ok := number(value); ok {
		r.val[k][f], r.set[k][f], r.resetAt[k] = v, true, time.Time{}
		return
	}
	if v, ok := duration(value); ok {
		r.val[k][f], r.set[k][f], r.resetAt[k] = v, true, time.Time{}
		return
	}
	if len(value) <= 40 { // the longest RFC 3339 time is 35 bytes
		if t, err := time.Parse(time.RFC3339, string(value)); err == nil {
			r.set[k][f], r.resetAt[k] = true, t
		}
	}
}

// number parses a non-negative decimal ("149984", "0.5") of at most 32
// bytes, in place: what these headers carry. An exponent, a sign or
// anything else is no number here.
func number(b []byte) (float64, bool) {
	if len(b) == 0 || len(b) > 32 {
		return 0, false
	}
	var whole, frac float64
	scale, dot, digits := 1.0, false, 0
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			digits++
			if dot {
				scale /= 10
				frac += float64(c-'0') * scale
			} else {
				whole = whole*10 + float64(c-'0')
			}
		case c == '.' && !dot:
			dot = true
		default:
			return 0, false
		}
	}
	return whole + frac, digits > 0
}

// duration parses OpenAI's reset: numbers with units h, m, s, ms, us, ns
// in a row ("6m0s", "1.5s", "20ms"), of at most 32 bytes, in place.
func duration(b []byte) (float64, bool) {
	if len(b) == 0 || len(b) > 32 {
		return 0, false
	}
	total := 0.0
	for len(b) > 0 {
		i := 0
		for i < len(b) && (b[i] >= '0' && b[i] <= '9' || b[i] == '.') {
			i++
		}
		v, ok := number(b[:i])
		if !ok {
			return 0, false
		}
		b = b[i:]
		j := 0
		for j < len(b) && (b[j] < '0' || b[j] > '9') && b[j] != '.' {
			j++
		}
		switch string(b[:j]) {
		case "h":
			total += v * 3600
		case "m":
			total += v * 60
		case "s":
			total += v
		case "ms":
			total += v / 1e3
		case "us", "µs":
			total += v / 1e6
		case "ns":
			total += v / 1e9
		default:
			return 0, false
		}
		b = b[j:]
	}
	return total, true
}

func hasPrefixFold(b, prefix []byte) bool {
	return len(b) >= len(prefix) && bytes.EqualFold(b[:len(prefix)], prefix)
}
