// Package fault holds the fault suite's mutual-exclusion checker and the
// fenced storage stub it guards. The suite itself (fault_test.go) runs
// contended lockers against real masters that are killed, stopped,
// restarted empty and slowed down, through the engine and through the
// proxy; docs/safety.md has its results.
package fault

import (
	"fmt"
	"sync"
	"time"
)

// Checker records who is inside each key's critical section. A holder
// enters with its lock's validity deadline; entering while another holder
// is inside with validity left is an overlap — two valid holders at once,
// what a lock must never allow. A holder that overstays its own validity
// is not an overlap (its lock ended; fencing is what protects the storage
// from it).
//
// It also plays the storage the lock protects: every fenced holder writes
// with its fencing token on entry, and the storage refuses a token lower
// than the highest it accepted. Its methods are safe for concurrent use.
type Checker struct {
	// Margin is the validity a holder must have left to enter (the
	// safety margin for the time between checking and acting).
	Margin time.Duration

	mu   sync.Mutex
	keys map[string]*keyState
	r    Result
}

type keyState struct {
	holder int64     // inside now (0: nobody)
	until  time.Time // the holder's validity deadline
	// overtaken: holders still inside past their validity when another
	// entered (the one that entered first after each).
	overtaken map[int64]int64
	last      int64 // the fenced holder that entered last
	fence     int64 // highest fencing token among holders that entered
	storage   int64 // highest token the storage accepted
	// storageBy is when the holder whose token the storage holds entered
	// (its Lock returned); lastStart when the last fenced holder's
	// acquisition started.
	storageBy, lastStart time.Time
	// recent are the fenced entries of the last recentFor, in entry
	// order; older is the highest token of those dropped from it.
	recent []fenceEntry
	older  int64
	// entered is when each recent fenced holder entered.
	entered map[int64]time.Time
}

// fenceEntry is a fenced holder's entry: when its Lock returned, its token.
type fenceEntry struct {
	at    time.Time
	fence int64
}

// recentFor bounds how far back a holder's acquisition may have started
// before it entered (far more than any acquisition here takes).
const recentFor = 30 * time.Second

// before returns the highest token among the fenced holders that entered
// before start (or at it): the holders fencing must order this one after.
func (k *keyState) before(start time.Time) int64 {
	hi := k.older
	for _, e := range k.recent {
		if e.at.After(start) {
			break
		}
		hi = max(hi, e.fence)
	}
	return hi
}

// Result is what a Checker saw.
type Result struct {
	Entries         int // holders that entered the critical section
	Fenced          int // of which with a fencing token
	Skipped         int // holders that had less than Margin validity left
	Overlaps        int // entries while another valid holder was inside
	OrderViolations int // fenced holders whose token was not above that of every holder that entered before its acquisition started
	StaleRejected   int // writes by holders past their validity refused by the storage
	StaleAccepted   int // writes by holders past their validity accepted after a newer holder, whose acquisition started after the writer entered, entered
	LegitRejected   int // entry writes of valid holders the storage refused for a token of a holder that entered before their acquisition started
	// Unordered counts pairs of fenced holders fencing does not order:
	// the later one's acquisition started before the earlier one entered
	// (their acquisitions overlapped) and its token is lower — possible
	// only when an assumption failed (an overlap: two holders at once),
	// counted with the storage's answers it explains (an entry write
	// refused, a stale write accepted); not a violation of fencing.
	Unordered int
	// LostReportedOK counts calls that reported work done under the lock
	// (Do or Lead returning nil) although another holder entered after
	// their validity ended and before they returned (Reported).
	LostReportedOK int
	// LostReported counts such calls that reported the loss.
	LostReported     int
	FirstViolation   string
	violationsLogged int
}

// Enter is called by a holder (id > 0) of key whose validity ends at
// until, with its fencing token (0: none). It reports whether the holder
// entered; then it must call Leave.
func (c *Checker) Enter(key string, id int64, until time.Time, fence int64) bool {
	entered, _ := c.EnterWrite(key, id, until, fence)
	return entered
}

// EnterWrite is Enter, also reporting whether the storage accepted the
// entry write of a fenced holder that entered.
func (c *Checker) EnterWrite(key string, id int64, until time.Time, fence int64) (entered, accepted bool) {
	return c.EnterFrom(key, id, time.Now(), until, fence)
}

// EnterFrom is EnterWrite for a holder whose acquisition started at
// start. Fencing orders a holder after every holder that entered before
// start — the paused-holder case it exists for — whatever assumption
// failed; a holder whose acquisition overlapped an earlier holder's entry
// is ordered only while the assumptions hold (docs/safety.md, fencing):
// its lower token is Unordered, not an order violation. EnterWrite takes
// the entry as the start: every earlier holder must be ordered.
func (c *Checker) EnterFrom(key string, id int64, start, until time.Time, fence int64) (entered, accepted bool) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Add(c.Margin).After(until) {
		c.r.Skipped++
		return false, false
	}
	if c.keys == nil {
		c.keys = map[string]*keyState{}
	}
	k := c.keys[key]
	if k == nil {
		k = &keyState{}
		c.keys[key] = k
	}
	c.r.Entries++
	if k.holder != 0 && now.Before(k.until) {
		c.r.Overlaps++
		c.violation("overlap on %s: holder %d entered while %d is inside, valid for %v more", key, id, k.holder, k.until.Sub(now))
	} else if k.holder != 0 && k.holder != id {
		if k.overtaken == nil {
			k.overtaken = map[int64]int64{}
		}
		k.overtaken[k.holder] = id
	}
	if fence != 0 {
		c.r.Fenced++
		if hi := k.before(start); fence <= hi {
			c.r.OrderViolations++
			c.violation("fencing token %d of holder %d on %s is not above the earlier %d", fence, id, key, hi)
		} else if fence <= k.fence {
			c.r.Unordered++
		}
		k.fence = max(k.fence, fence)
		k.last, k.lastStart = id, start
		switch {
		case fence >= k.storage:
			k.storage, k.storageBy, accepted = fence, now, true
		case !k.storageBy.After(start):
			c.r.LegitRejected++
		default:
			c.r.Unordered++ // refused for an overlapping holder's higher token
		}
		for len(k.recent) > 0 && now.Sub(k.recent[0].at) > recentFor {
			k.older = max(k.older, k.recent[0].fence)
			k.recent = k.recent[1:]
		}
		k.recent = append(k.recent, fenceEntry{at: now, fence: fence})
		if k.entered == nil || len(k.entered) > 4096 {
			k.entered = map[int64]time.Time{}
		}
		k.entered[id] = now
	}
	k.holder, k.until = id, until
	return true, accepted
}

// NewerEntered reports whether a fenced holder entered key after holder
// id did (a paused holder waits for it before its stale write).
func (c *Checker) NewerEntered(key string, id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.keys[key]
	return k != nil && k.last != id && k.last != 0
}

// Extend records that holder id, inside key's critical section, extended
// its lock: its validity now ends at until (if later). A holder entering
// before then is an overlap.
func (c *Checker) Extend(key string, id int64, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k := c.keys[key]; k != nil && k.holder == id && until.After(k.until) {
		k.until = until
	}
}

// Leave ends id's stay in key's critical section.
func (c *Checker) Leave(key string, id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k := c.keys[key]; k != nil && k.holder == id {
		k.holder = 0
	}
}

// Reported records the outcome that the call holder id of key ran in
// (Engine.Do, Election.Lead) returned before id left: ok when it reported
// the work done under the lock (nil). Another holder that entered after
// id's validity ended and before this makes ok a violation — the work
// ran without mutual exclusion and the call said it did not — and not ok
// a loss reported. It returns whether another holder entered so.
func (c *Checker) Reported(key string, id int64, ok bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.keys[key]
	if k == nil {
		return false
	}
	other, overtaken := k.overtaken[id]
	if !overtaken {
		return false
	}
	delete(k.overtaken, id)
	if ok {
		c.r.LostReportedOK++
		c.violation("holder %d's call on %s returned success although holder %d entered after its validity ended, before it returned", id, key, other)
	} else {
		c.r.LostReported++
	}
	return true
}

// StaleWrite is a write to the storage by holder id of key with fencing
// token fence after its validity ended (a holder that was paused). It
// reports whether the storage accepted it.
func (c *Checker) StaleWrite(key string, id, fence int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.keys[key]
	if k == nil || fence < k.storage {
		c.r.StaleRejected++
		return false
	}
	k.storage = fence
	at, known := k.entered[id]
	if known {
		k.storageBy = at
	}
	if k.last != id {
		if known && at.After(k.lastStart) {
			// The newer holder's acquisition overlapped this one's entry:
			// an assumption failed (two holders at once).
			c.r.Unordered++
			return true
		}
		// Accepted although a newer fenced holder entered: its token was
		// not above.
		c.r.StaleAccepted++
		c.violation("stale write with token %d by holder %d on %s accepted after holder %d entered", fence, id, key, k.last)
	}
	return true
}

// Result returns what the checker saw so far.
func (c *Checker) Result() Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.r
}

// Entries returns the number of entries so far.
func (c *Checker) Entries() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.r.Entries
}

func (c *Checker) violation(format string, args ...any) {
	if c.r.violationsLogged == 0 {
		c.r.FirstViolation = fmt.Sprintf(format, args...)
	}
	c.r.violationsLogged++
}

// Violations returns the number of safety violations in r: overlaps,
// fencing order violations, stale writes accepted after a newer holder,
// valid holders refused by the storage, and calls that reported success
// after their lock was lost to another holder.
func (r Result) Violations() int {
	return r.Overlaps + r.OrderViolations + r.StaleAccepted + r.LegitRejected + r.LostReportedOK
}

// Crowd checks locks that admit several holders at once: a semaphore (at
// most limit valid holders inside) and a read-write lock (any number of
// valid readers, or one valid writer alone). Like Checker, a holder past
// its own validity no longer counts. Its methods are safe for concurrent
// use.
type Crowd struct {
	Margin time.Duration // validity a holder must have left to enter

	mu   sync.Mutex
	keys map[string]map[int64]crowdEntry
	r    CrowdResult
}

type crowdEntry struct {
	until time.Time
	write bool
}

// CrowdResult is what a Crowd saw.
type CrowdResult struct {
	Entries        int // holders that entered
	Writers        int // of which writers
	Skipped        int // holders with less than Margin validity left
	Excess         int // entries beyond the limit of valid holders
	Mixed          int // a writer with another valid holder, or a reader with a valid writer
	MaxInside      int // the most valid holders inside one key at once
	FirstViolation string
}

// Violations returns the number of safety violations in r.
func (r CrowdResult) Violations() int { return r.Excess + r.Mixed }

// Enter is called by holder id of key, valid until until, a writer or
// not, where at most limit holders may be valid at once (0: no limit). It
// reports whether the holder entered; then it must call Leave.
func (c *Crowd) Enter(key string, id int64, until time.Time, write bool, limit int) bool {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Add(c.Margin).After(until) {
		c.r.Skipped++
		return false
	}
	if c.keys == nil {
		c.keys = map[string]map[int64]crowdEntry{}
	}
	in := c.keys[key]
	if in == nil {
		in = map[int64]crowdEntry{}
		c.keys[key] = in
	}
	valid, writers := 0, 0
	for hid, e := range in {
		if !now.Before(e.until) {
			delete(in, hid) // overstayed its validity: no longer a holder
			continue
		}
		valid++
		if e.write {
			writers++
		}
	}
	c.r.Entries++
	if write {
		c.r.Writers++
	}
	if limit > 0 && valid >= limit {
		c.r.Excess++
		c.violation("%s: holder %d entered with %d valid holders inside (limit %d)", key, id, valid, limit)
	}
	if write && valid > 0 || !write && writers > 0 {
		c.r.Mixed++
		c.violation("%s: holder %d (writer %v) entered with %d valid holders inside, %d of them writers", key, id, write, valid, writers)
	}
	in[id] = crowdEntry{until: until, write: write}
	c.r.MaxInside = max(c.r.MaxInside, valid+1)
	return true
}

// Leave ends id's stay in key.
func (c *Crowd) Leave(key string, id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.keys[key], id)
}

// Result returns what the crowd checker saw so far.
func (c *Crowd) Result() CrowdResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.r
}

// Entries returns the number of entries so far.
func (c *Crowd) Entries() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.r.Entries
}

func (c *Crowd) violation(format string, args ...any) {
	if c.r.FirstViolation == "" {
		c.r.FirstViolation = fmt.Sprintf(format, args...)
	}
}
