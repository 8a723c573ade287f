//go:build race

package runonce

// raceDetector is true in builds with -race, which slow CPU-bound work
// several times over: timing bounds mean nothing there.
const raceDetector = true
