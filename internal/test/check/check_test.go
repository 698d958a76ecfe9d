package check

import (
	"runtime"
	"testing"
	"time"
)

// fakeT records a failure instead of ending the test.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Fatalf(string, ...any) { f.failed = true }

func TestEventually(t *testing.T) {
	start := time.Now()
	Eventually(t, time.Second, "50 ms", func() bool { return time.Since(start) > 50*time.Millisecond })
	f := &fakeT{}
	Eventually(f, 20*time.Millisecond, "never", func() bool { return false })
	if !f.failed {
		t.Fatal("Eventually did not fail on a condition that never holds")
	}
}

func TestNoLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	stop := make(chan struct{})
	go func() { <-stop }()
	time.AfterFunc(50*time.Millisecond, func() { close(stop) })
	NoLeak(t, before, 0) // the goroutine ends within the wait
	// A fresh baseline: goroutines counted in before (the testing
	// package's, the timer's) may have ended since. Several goroutines
	// are left running so that one more of those ending does not hide
	// them.
	before = runtime.NumGoroutine()
	block := make(chan struct{})
	defer close(block)
	for range 4 {
		go func() { <-block }()
	}
	f := &fakeT{}
	NoLeak(f, before, 0)
	if !f.failed {
		t.Fatal("NoLeak did not fail with a goroutine left running")
	}
}
