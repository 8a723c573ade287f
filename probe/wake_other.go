//go:build !linux

package probe

import "time"

// waker is timerfd-based on Linux; elsewhere the runtime timer does.
type waker struct{}

func newWaker() *waker { return nil }

func (w *waker) wait(timer *time.Timer, d time.Duration) {}

func (w *waker) close() {}
