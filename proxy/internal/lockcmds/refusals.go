package lockcmds

import (
	"encoding/binary"
	"hash/maphash"
	"sync/atomic"
	"time"
)

// Refused acquisitions, remembered so that their cleanup is not counted as
// a lost lock.
//
// Client libraries release after a failed attempt (node-redlock after
// each one, redsync after each try, node-redlock v5 after its last): the
// release of a value the proxy refused finds no master holding it, as the
// release of a lock that expired does. Only the history of the value
// tells them apart, and the masters do not keep it. The proxy keeps what
// it saw itself: the (first key, value) of every acquisition it answered
// with anything but a grant, for refusalMemory, forgotten when it grants
// or extends that key and value (a retry that got the lock with the same
// value, as node-redlock and redsync retry). A release that no quorum
// held is then a cleanup if its key and value are remembered, else lost
// (classifyRelease). Memory, not a vote: nothing here decides a grant.
//
// What it cannot know counts as lost, the direction an alert on lost
// locks can afford: a cleanup sent to another proxy than the one that
// refused (a client's connection pool spread across proxies), after a
// restart, later than refusalMemory, or after the entry was overwritten.
// The table is fixed (refusalSlots entries of 8 bytes, allocated at the
// first refusal) and lossy: one entry per slot, the latest wins; a
// release arrives within a few round trips of its refusal, so an entry
// outlives it unless thousands of refusals land in between.

const (
	refusalSlots  = 1 << 14          // 128 KiB
	refusalMemory = 60 * time.Second // how long a refusal is remembered
	stampBits     = 24               // seconds since the server's start, in an entry's low bits
)

// refusals is the table; the zero value is empty and ready.
type refusals struct {
	seed  maphash.Seed
	start time.Time
	table atomic.Pointer[[refusalSlots]atomic.Uint64] // nil until the first refusal
}

func newRefusals() *refusals { return &refusals{seed: maphash.MakeSeed(), start: time.Now()} }

// hash of key and value (length-prefixed: no two pairs share an input).
func (r *refusals) hash(key, value []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(r.seed)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(key)))
	h.Write(n[:])
	h.Write(key)
	h.Write(value)
	return h.Sum64()
}

// slot returns the slot of h and its tag: h's high bits (the low bits
// choose the slot and, in the entry, hold the stamp).
func (r *refusals) slot(t *[refusalSlots]atomic.Uint64, h uint64) (*atomic.Uint64, uint64) {
	return &t[h&(refusalSlots-1)], h >> stampBits << stampBits
}

// stamp is the time in seconds since the start (1 at the start: an entry
// is never 0, the empty slot), wrapping after 2^24 s (194 days).
func (r *refusals) stamp() uint64 {
	return (uint64(time.Since(r.start)/time.Second) + 1) & (1<<stampBits - 1)
}

// refused remembers that an acquisition of key with value was not granted.
func (r *refusals) refused(key, value []byte) {
	t := r.table.Load()
	if t == nil {
		r.table.CompareAndSwap(nil, new([refusalSlots]atomic.Uint64))
		t = r.table.Load()
	}
	s, tag := r.slot(t, r.hash(key, value))
	s.Store(tag | r.stamp())
}

// granted forgets a refusal of key with value: it has a lock now.
func (r *refusals) granted(key, value []byte) {
	t := r.table.Load()
	if t == nil { // no refusal yet: no hashing on the grant path
		return
	}
	s, tag := r.slot(t, r.hash(key, value))
	if e := s.Load(); e>>stampBits<<stampBits == tag {
		s.CompareAndSwap(e, 0)
	}
}

// remembered reports whether an acquisition of key with value was refused
// less than refusalMemory ago and not granted since.
func (r *refusals) remembered(key, value []byte) bool {
	t := r.table.Load()
	if t == nil {
		return false
	}
	s, tag := r.slot(t, r.hash(key, value))
	e := s.Load()
	if e == 0 || e>>stampBits<<stampBits != tag {
		return false
	}
	age := (r.stamp() - e) & (1<<stampBits - 1)
	return age <= uint64(refusalMemory/time.Second)
}
