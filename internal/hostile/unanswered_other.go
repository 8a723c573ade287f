//go:build !linux

package hostile

// UnansweredAddr is a loopback address whose connects are never answered;
// only Linux is known to drop a SYN to a full accept queue.
func UnansweredAddr() (string, func(), error) { return "", nil, ErrAnswered }
