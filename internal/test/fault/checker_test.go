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
	t.Run("overlapping acquisitions are not ordered", func(t *testing.T) {
		// Holder 2's acquisition started before holder 1 entered: with an
		// assumption failed (both valid at once) fencing does not order
		// them — unordered, not a violation of fencing; holder 3's started
		// after holder 1 entered: its lower token is one.
		var c Checker
		start2 := time.Now()
		c.Enter("k", 1, later, 20)
		c.Leave("k", 1)
		c.EnterFrom("k", 2, start2, later, 15)
		c.Leave("k", 2)
		if !c.StaleWrite("k", 1, 20) {
			t.Fatal("storage refused the highest token")
		}
		if r := c.Result(); r.OrderViolations != 0 || r.StaleAccepted != 0 || r.LegitRejected != 0 || r.Unordered != 3 {
			t.Fatalf("overlapping pair: %+v; want 3 unordered (the token, the refused entry write, the accepted stale write), no violation", r)
		}
		c.EnterFrom("k", 3, time.Now(), later, 18)
		if r := c.Result(); r.OrderViolations != 1 || r.LegitRejected != 1 {
			t.Fatalf("a later acquisition with a lower token: %+v; want an order violation and its refused write", r)
		}
	})
	t.Run("success reported after the loss", func(t *testing.T) {
		var c Checker
		c.Enter("k", 1, time.Now().Add(5*time.Millisecond), 0) // Do's fn: paused past its validity
		time.Sleep(10 * time.Millisecond)
		c.Enter("k", 2, later, 0) // another holder takes the key
		if !c.Reported("k", 1, true) {
			t.Fatal("holder 2's entry not seen")
		}
		c.Leave("k", 1)
		c.Leave("k", 2)
		c.Enter("k", 3, time.Now().Add(5*time.Millisecond), 0)
		c.Enter("k", 4, later, 0) // an overlap, not a loss: 3 was valid
		c.Leave("k", 4)
		if c.Reported("k", 3, true) {
			t.Error("holder 3 counted as overtaken while valid")
		}
		c.Enter("k", 5, time.Now().Add(time.Millisecond), 0)
		time.Sleep(3 * time.Millisecond)
		c.Enter("k", 6, later, 0)
		c.Reported("k", 5, false) // the loss reported: no violation
		r := c.Result()
		if r.LostReportedOK != 1 || r.LostReported != 1 || r.Overlaps != 1 || r.Violations() != 2 {
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

// TestCrowdSeesViolations: the crowd checker counts a holder beyond the
// limit and a writer mixed with other holders, and nothing on a correct
// history or past a holder's validity.
func TestCrowdSeesViolations(t *testing.T) {
	now := time.Now()
	later, gone := now.Add(time.Hour), now.Add(-time.Millisecond)
	var c Crowd
	for id := int64(1); id <= 3; id++ {
		c.Enter("sem", id, later, false, 3)
	}
	if r := c.Result(); r.Violations() != 0 || r.MaxInside != 3 {
		t.Fatalf("3 of 3 permits: %+v", r)
	}
	c.Enter("sem", 4, later, false, 3)
	if r := c.Result(); r.Excess != 1 || r.FirstViolation == "" {
		t.Fatalf("4 of 3 permits: %+v", r)
	}
	var rw Crowd
	rw.Enter("rw", 1, later, false, 0)
	rw.Enter("rw", 2, later, false, 0)
	if r := rw.Result(); r.Violations() != 0 {
		t.Fatalf("two readers: %+v", r)
	}
	rw.Enter("rw", 3, later, true, 0)
	rw.Leave("rw", 1)
	rw.Leave("rw", 2)
	rw.Enter("rw", 4, later, false, 0)
	if r := rw.Result(); r.Mixed != 2 {
		t.Fatalf("a writer with readers, then a reader with the writer: %+v", r)
	}
	var ok Crowd
	ok.Enter("rw", 1, gone.Add(time.Millisecond/2), true, 0) // skipped: no validity left
	ok.Margin = 0
	if ok.Enter("rw", 2, now.Add(2*time.Millisecond), true, 0) {
		time.Sleep(3 * time.Millisecond) // overstays: no longer a holder
	}
	if !ok.Enter("rw", 3, later, true, 0) {
		t.Fatal("writer 3 did not enter")
	}
	if r := ok.Result(); r.Violations() != 0 || r.Skipped != 1 {
		t.Fatalf("an expired writer counted: %+v", r)
	}
}
