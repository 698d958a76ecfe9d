package fault

import (
	"testing"
	"time"
)

// TestCheckerSeesViolations: the checker counts each kind of violation it
// exists for, and nothing on a correct history — the suite's zeros mean
// something only if these are not zero.
func TestCheckerSeesViolations(t *testing.T) {
	now := time.Now()
	later := now.Add(time.Hour)

	t.Run("correct", func(t *testing.T) {
		var c Checker
		if !c.Enter("k", 1, later, 10) {
			t.Fatal("holder 1 did not enter")
		}
		c.Leave("k", 1)
		if !c.Enter("k", 2, later, 11) {
			t.Fatal("holder 2 did not enter")
		}
		if c.StaleWrite("k", 1, 10) {
			t.Error("stale write with token 10 accepted after token 11")
		}
		c.Leave("k", 2)
		r := c.Result()
		if r.Violations() != 0 || r.Entries != 2 || r.Fenced != 2 || r.StaleRejected != 1 {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("overlap", func(t *testing.T) {
		var c Checker
		c.Enter("k", 1, later, 0)
		c.Enter("k", 2, later, 0)
		if r := c.Result(); r.Overlaps != 1 || r.FirstViolation == "" {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("holder past its validity is not an overlap", func(t *testing.T) {
		var c Checker
		c.Enter("k", 1, time.Now().Add(5*time.Millisecond), 0)
		time.Sleep(10 * time.Millisecond)
		c.Enter("k", 2, later, 0)
		if r := c.Result(); r.Overlaps != 0 {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("extended holder", func(t *testing.T) {
		var c Checker
		c.Enter("k", 1, time.Now().Add(20*time.Millisecond), 0)
		c.Extend("k", 1, later)
		c.Extend("k", 1, time.Now()) // an earlier deadline does not shorten it
		time.Sleep(30 * time.Millisecond)
		c.Enter("k", 2, later, 0) // past the first deadline, not the extended one
		if r := c.Result(); r.Overlaps != 1 {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("token order", func(t *testing.T) {
		var c Checker
		c.Enter("k", 1, later, 11)
		c.Leave("k", 1)
		c.Enter("k", 2, later, 11) // equal: not strictly greater
		c.Leave("k", 2)
		c.Enter("k", 3, later, 5)
		if r := c.Result(); r.OrderViolations != 2 || r.LegitRejected != 1 {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("stale accepted", func(t *testing.T) {
		var c Checker
		c.Enter("k", 1, later, 20) // a holder whose token is too high...
		c.Leave("k", 1)
		c.Enter("k", 2, later, 15) // ...then a newer holder with a lower one
		c.Leave("k", 2)
		c.Enter("k", 3, later, 0) // unfenced holders do not write
		c.Leave("k", 3)
		if !c.StaleWrite("k", 1, 20) {
			t.Fatal("storage refused the highest token")
		}
		if r := c.Result(); r.StaleAccepted != 1 || r.OrderViolations != 1 {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("margin", func(t *testing.T) {
		c := Checker{Margin: time.Second}
		if c.Enter("k", 1, time.Now().Add(500*time.Millisecond), 0) {
			t.Fatal("entered with less validity than the margin")
		}
		if r := c.Result(); r.Skipped != 1 || r.Entries != 0 {
			t.Fatalf("%+v", r)
		}
	})
}
