package engine_test

import (
	"strconv"
	"testing"

	"github.com/redlock-dev/redlock/internal/scripts"
)

// TestFairRegisterKeepsCounterTTL (issue #41 finding 4): registering a
// waiter whose ticket raises the fair lock's ticket counter never lowers
// the counter's TTL to the waiter's own (short) entry TTL. Lowered, the
// counter could expire while earlier waiters still queue, and a later
// arrival's ticket (from the master's clock) could then sort before a live
// earlier waiter's.
func TestFairRegisterKeepsCounterTTL(t *testing.T) {
	v := newEnv(t, 1, functional)
	const counter, queue, expiries = "{frk}:counter", "{frk}:queue", "{frk}:expiries"
	v.mustExec(0, "SET", counter, "100", "PX", "60000")
	// A waiter with a 1 s entry TTL registers ticket 200 (above the counter).
	v.mustExec(0, "EVAL", scripts.FairRegister.Source(), "3", counter, queue, expiries, "waiter-1", "200", "1000")
	if got := v.mustExec(0, "GET", counter).Text(); got != "200" {
		t.Fatalf("counter = %q after registering ticket 200; want 200", got)
	}
	pttl, _ := strconv.ParseInt(v.mustExec(0, "PTTL", counter).Text(), 10, 64)
	if pttl < 50000 {
		t.Errorf("the counter's PTTL is %d ms after a waiter with a 1 s entry registered; want it kept near 60 s (only ever raised)", pttl)
	}
}
