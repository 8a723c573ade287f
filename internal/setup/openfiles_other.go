//go:build !unix

package setup

// OpenFileLimit is 0 where there is no such limit to read: nothing is
// checked.
func OpenFileLimit() uint64 { return 0 }
