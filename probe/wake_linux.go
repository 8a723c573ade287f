package probe

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// waker wakes the open loop's dispatcher on time whether the process is
// idle or busy. The runtime's timers are checked whenever a processor
// schedules, so they fire on time while goroutines keep the processors
// busy, but an idle runtime waits for them in epoll with a millisecond's
// resolution: a send due in 200 µs could leave up to a millisecond late. A
// timerfd fires on the kernel's high-resolution clock and wakes an idle
// epoll at once, but while every processor is busy the runtime polls the
// network only every few milliseconds. Waiting on both, the first to fire
// wins.
type waker struct {
	f     *os.File
	arm   chan armed
	fired chan uint64
	done  chan struct{}
	seq   uint64
}

type armed struct {
	seq uint64
	d   time.Duration
}

// newWaker returns a waker with its helper goroutine, or nil when timerfd
// is not available (then the runtime timer alone is used).
// TOKENPROBE_NO_TIMERFD=1 turns it off, to measure what it buys
// (docs/BENCHMARKS.md).
func newWaker() *waker {
	if os.Getenv("TOKENPROBE_NO_TIMERFD") != "" {
		return nil
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil
	}
	w := &waker{f: os.NewFile(uintptr(fd), "timerfd"), arm: make(chan armed, 1), fired: make(chan uint64, 1), done: make(chan struct{})}
	go w.loop()
	return w
}

func (w *waker) loop() {
	defer close(w.done)
	var buf [8]byte
	for a := range w.arm {
		spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(a.d))}
		if unix.TimerfdSettime(int(w.f.Fd()), 0, &spec, nil) != nil {
			continue
		}
		if _, err := w.f.Read(buf[:]); err != nil {
			return // closed
		}
		select {
		case w.fired <- a.seq:
		default: // a stale fire nobody waits for
		}
	}
}

// wait returns after d, woken by the runtime timer or the timerfd,
// whichever fires first.
func (w *waker) wait(timer *time.Timer, d time.Duration) {
	w.seq++
	select {
	case w.arm <- armed{w.seq, d}:
	default: // the helper still waits on an earlier fire: the timer alone
	}
	timer.Reset(d)
	for {
		select {
		case <-timer.C:
			return
		case seq := <-w.fired:
			if seq == w.seq {
				timer.Stop()
				return
			}
		}
	}
}

// close stops the helper goroutine and waits for it.
func (w *waker) close() {
	close(w.arm)
	_ = w.f.Close()
	<-w.done
}
