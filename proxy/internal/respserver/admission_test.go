package respserver

import (
	"testing"
	"time"
)

// newTestAdmission is an Admission of a 10ms target, a 1s queue timeout
// and 1000 slots, over commands that are their arrival times.
func newTestAdmission() *Admission[time.Time] {
	return NewAdmission(10*time.Millisecond, time.Second, 1000, func(t time.Time) time.Time { return t })
}

// TestAdmissionLimit: the limit is cut when commands take longer than
// the target and grows again while commands wait and complete in time.
func TestAdmissionLimit(t *testing.T) {
	a := newTestAdmission()
	start := a.limit
	a.inflight = 1
	a.Done(time.Now().Add(-50*time.Millisecond), time.Now()) // slow
	if a.limit >= start {
		t.Fatalf("limit %v after a slow command; want below %v", a.limit, start)
	}
	cut := a.limit
	a.inflight = 1
	a.Done(time.Now().Add(-50*time.Millisecond), time.Now()) // slow again within the target: one cut per target
	if a.limit != cut {
		t.Fatalf("limit %v after a second slow command at once; want %v (one cut per target)", a.limit, cut)
	}
	a.queue = []time.Time{time.Now(), time.Now()}
	a.inflight = int(a.limit) + 10 // nothing can start: the queue stays
	for range 100 {
		a.inflight++
		a.Done(time.Now(), time.Now())
	}
	if a.limit <= cut {
		t.Fatalf("limit %v after fast completions with commands waiting; want above %v", a.limit, cut)
	}
	for range 10000 {
		a.inflight = 1 << 20
		a.Done(time.Now(), time.Now())
	}
	if a.limit > a.max {
		t.Fatalf("limit %v above the maximum %v", a.limit, a.max)
	}
	a2 := newTestAdmission()
	for range 1000 {
		a2.inflight = 1
		a2.Done(time.Now().Add(-time.Second), time.Now())
		a2.lastCut = time.Time{}
	}
	if a2.limit < minAdmit {
		t.Fatalf("limit %v below the minimum %d", a2.limit, minAdmit)
	}
}
