package setup

import (
	"os"
	"sync"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/workload"
)

// The workload files a configuration names are read once, when it is
// loaded, and again only when a file changes (its size or modification
// time): a daemon's runs do not re-read a trace of thousands of rows every
// few minutes, and an edited dataset is picked up by the next run. What is
// cached is only read, never changed, by the runs that share it.
var (
	singleTurn = cache[[]workload.Entry]{read: workload.ReadSingleTurn}
	multiTurn  = cache[[]workload.Session]{read: workload.ReadMultiTurn}
	mooncake   = cache[[]workload.TraceRow]{read: workload.ReadMooncake}
)

type cache[T any] struct {
	read  func(path string) (T, error)
	mu    sync.Mutex
	files map[string]cached[T]
	reads int // how many times a file was read, for tests
}

type cached[T any] struct {
	size  int64
	mtime time.Time
	v     T
}

// get returns what path holds, reading it if it is new or changed.
func (c *cache[T]) get(path string) (T, error) {
	var zero T
	fi, err := os.Stat(path)
	if err != nil {
		return zero, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.files[path]; ok && e.size == fi.Size() && e.mtime.Equal(fi.ModTime()) {
		return e.v, nil
	}
	v, err := c.read(path)
	if err != nil {
		return zero, err
	}
	if c.files == nil {
		c.files = map[string]cached[T]{}
	}
	c.files[path] = cached[T]{size: fi.Size(), mtime: fi.ModTime(), v: v}
	c.reads++
	return v, nil
}
