package realserver

import (
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// relay is how a server in a network namespace of its own is reached: a
// listener on 127.0.0.1 in ours, and a dialler on an OS thread that has
// entered the server's namespace. A socket belongs to the namespace of the
// thread that created it, and works from any thread afterwards, so each
// accepted connection is joined to one dialled from that thread. Each
// start of the server opens a relay of its own: nothing of one is shared
// with the next, whose namespace is another.
type relay struct {
	inner string // the server's address inside its namespace

	ln      net.Listener
	dials   chan chan dialed
	done    chan struct{}
	wg      sync.WaitGroup
	closed  sync.Once
	lastErr atomic.Value // the last failed dial's error, for a test's message
}

// hostNS is this process's network namespace, read before any relay's
// thread left it. Read later, /proc/self/ns/net can name another: it is
// the main thread's, and a relay's locked goroutine may have run there
// (Go then retires the main thread inside the server's namespace).
var hostNS, hostNSErr = os.Readlink("/proc/thread-self/ns/net")

type dialed struct {
	c   net.Conn
	err error
}

// openRelay enters the namespace at nsPath on a thread of its own, and
// listens on 127.0.0.1:port for the server at inner there. It waits for
// the namespace to exist (the server's process makes it as it starts)
// until exited closes.
func openRelay(nsPath, inner string, port int, exited <-chan struct{}) (*relay, error) {
	if hostNSErr != nil {
		return nil, hostNSErr
	}
	// unshare makes the namespace, then execs: wait until the process's
	// namespace is no longer ours.
	for deadline := time.Now().Add(10 * time.Second); ; {
		ns, err := os.Readlink(nsPath)
		if err == nil && ns != hostNS {
			break
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("the server exited before its namespace was made")
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: no namespace of its own after 10 s", nsPath)
		}
	}
	fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	r := &relay{inner: inner, dials: make(chan chan dialed), done: make(chan struct{})}
	entered := make(chan error, 1)
	dials, done := r.dials, r.done
	go func() {
		// The thread stays locked and is never unlocked: Go ends it with
		// the goroutine, so no other goroutine runs in that namespace.
		runtime.LockOSThread()
		err := unix.Setns(fd, unix.CLONE_NEWNET)
		_ = unix.Close(fd)
		entered <- err
		if err != nil {
			return
		}
		for {
			select {
			case <-done:
				return
			case reply := <-dials:
				c, err := net.DialTimeout("tcp", inner, 5*time.Second)
				reply <- dialed{c, err}
			}
		}
	}()
	if err := <-entered; err != nil {
		return nil, fmt.Errorf("entering its namespace: %w", err)
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		close(r.done)
		return nil, err
	}
	r.ln = ln
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

func (r *relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		reply := make(chan dialed, 1)
		select {
		case r.dials <- reply:
		case <-r.done:
			c.Close()
			return
		}
		d := <-reply
		if d.err != nil {
			r.lastErr.Store(d.err.Error())
			c.Close()
			continue
		}
		r.wg.Add(2)
		go r.pipe(c, d.c)
		go r.pipe(d.c, c)
	}
}

// pipe copies one way, then closes both ends: a request's connection
// lives as long as either side keeps it.
func (r *relay) pipe(dst, src net.Conn) {
	defer r.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// close stops listening (the address then refuses connections, as the
// server's own would) and ends the namespace's thread; the pipes end as
// the server's side closes, which its exit does.
func (r *relay) close() {
	r.closed.Do(func() {
		close(r.done)
		r.ln.Close()
	})
	r.wg.Wait()
}

// err is the last dial into the namespace that failed, or "".
func (r *relay) err() string {
	s, _ := r.lastErr.Load().(string)
	return s
}

// backRelay is the way out of a server's namespace to a server in ours: a
// listener on 127.0.0.1 inside the namespace (made by a thread that entered
// it, which then ends with its goroutine), each connection it accepts
// joined to one dialled to target from our side. A gateway in a namespace
// of its own reaches its upstream through it.
type backRelay struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
}

// openBackRelay listens on inner (127.0.0.1:port) inside the namespace at
// nsPath, relaying to target in ours.
func openBackRelay(nsPath, inner, target string) (*backRelay, error) {
	fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	type listened struct {
		ln  net.Listener
		err error
	}
	got := make(chan listened, 1)
	go func() {
		// Locked and never unlocked: Go ends the thread with the
		// goroutine, so nothing else runs in that namespace.
		runtime.LockOSThread()
		err := unix.Setns(fd, unix.CLONE_NEWNET)
		_ = unix.Close(fd)
		if err != nil {
			got <- listened{nil, fmt.Errorf("entering its namespace: %w", err)}
			return
		}
		ln, err := net.Listen("tcp", inner)
		got <- listened{ln, err}
	}()
	l := <-got
	if l.err != nil {
		return nil, l.err
	}
	b := &backRelay{ln: l.ln, target: target}
	b.wg.Add(1)
	go b.accept()
	return b, nil
}

func (b *backRelay) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		d, err := net.DialTimeout("tcp", b.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		b.wg.Add(2)
		go b.pipe(c, d)
		go b.pipe(d, c)
	}
}

func (b *backRelay) pipe(dst, src net.Conn) {
	defer b.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// close stops listening; the pipes end as their connections close.
func (b *backRelay) close() { b.ln.Close() }
