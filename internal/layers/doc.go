// Package layers holds, as a test, the import rules of tokenprobe's
// packages: which layer each package is in, that a package imports only
// from layers below its own, and which packages may read the
// configuration. docs/ARCHITECTURE.md explains the layers; a new package
// is added to the table in layers_test.go, or the test fails.
package layers
