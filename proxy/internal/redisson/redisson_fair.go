package redisson

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

// Redisson's RFairLock, unmodified, over the quorum.
//
// Redisson keeps a fair lock's waiters in a list and a sorted set of
// deadlines on one server, the deadlines from the client's clock: copies
// per master would drift apart (a waiter missing on one master, ahead of
// another on the next). The proxy keeps the waiters in the engine's
// FairLock queue instead (engine/fairlock.go; docs/safety.md, "FairLock"):
// a waiter takes a ticket from a quorum of masters' counters and queues
// it on a quorum before it tries, so a waiter that arrived before another
// began has the lower ticket on a quorum every grant of the later one
// meets; an entry expires on the masters' clocks, refreshed at each try.
// The hold itself is RLock's (redisson_hold.go): one value per lock,
// owner and count, kept by compare-and-set — so re-entry, unlock,
// renewal, getHoldCount are RLock's — and it is set from free only by
// the engine's fair acquire script, which sets it where the key is free
// and the waiter heads the queue (or the queue is empty).
//
//   - tryLock() (no wait): re-entry; else granted only when the lock is
//     free and no waiter is queued ahead (the owner's own entry, if it
//     has one, may head); nil, else 1.
//   - tryLock(wait)/lock(): re-entry; else the owner is queued (a ticket
//     if it has none at a quorum) and tries; nil, else the holder's PTTL
//     (at most half its entry's life, so that its next try refreshes it).
//   - unlock: RLock's; when it frees the lock (or finds it free) the
//     waiter heading the queue is woken on its own channel
//     (redisson_lock__channel:{name}:<owner>).
//   - acquireFailed: the owner leaves the queue.
//
// Waiters share the engine FairLock's queue for the same key: Redisson's
// RFairLock and engine.FairLock on one name are one fair lock.

// fairPoll is the TTL a waiting tryLock answers when the lock is free but
// an earlier waiter heads the queue: it is woken when that one unlocks,
// and tries again after this if the earlier one never takes the lock.
const fairPoll = 50

// Names Redisson derives from a fair lock's name.
const (
	rQueuePrefix   = "redisson_lock_queue"
	rTimeoutPrefix = "redisson_lock_timeout"
)

// fairKeys are the keys of the engine FairLock on key (engine.NewFairLock).
type fairKeys struct {
	lock, queue, expiry, counter string
}

// FairQueueKeys returns the masters' keys of the queue and the ticket
// counter of the fair lock on key: keys no client command may name.
func FairQueueKeys(key string) (queue, counter string) {
	fk := fairKeysOf(key)
	return fk.queue, fk.counter
}

func fairKeysOf(key string) fairKeys {
	base := "redlock:fair:{" + conn.HashTag(key) + "}:" + key
	return fairKeys{lock: key, queue: base + ":queue", expiry: base + ":expiry", counter: base + ":ticket"}
}

// fairLife is how long a waiter's entry lives after its last try: its
// wait (Redisson's fairLockWaitTimeout, 5 min, or tryLock's), at most
// MaxTTL, at least 10 ms.
func (s *Locks) fairLife(wait time.Duration) time.Duration {
	return max(min(wait, s.eng.Config().MaxTTL), 10*time.Millisecond)
}

// rFairFits is fits for the fair lock's scripts.
func (rs *Script) rFairFits(keys, argv [][]byte) bool {
	if len(keys) != rs.Keys || len(argv) != rs.Argc {
		return false
	}
	latch := rs.LatchArg == 0 || isMillis(argv[rs.LatchArg])
	switch rs.Kind {
	case KindFairTry: // lease, owner, now, wait
		return isMillis(argv[0]) && validOwner(argv[1]) && isMillis(argv[2]) && isMillis(argv[3])
	case KindFairWait: // lease, owner, wait, now
		return isMillis(argv[0]) && validOwner(argv[1]) && isMillis(argv[2]) && isMillis(argv[3])
	case KindFairUnlock: // "0", lease, owner, now[, publish[, latch ms]]
		return string(argv[0]) == "0" && isMillis(argv[1]) && validOwner(argv[2]) && latch
	case KindFairForce: // "0", now[, publish]
		return string(argv[0]) == "0"
	case KindFairLeave: // owner, wait
		return validOwner(argv[0])
	}
	return false
}

// rFairNames is rNames for the fair lock's scripts: the queue, deadline
// set, channel and latch keys are derived from the lock's name (the
// acquireFailed script names the queue first, no lock).
func (s *Locks) rFairNames(rs *Script, keys [][]byte) bool {
	if rs.Kind == KindFairLeave {
		names := s.rFairNamesOf(keys[0])
		return len(names) > 0 && s.derived(names[0], keys[1], rTimeoutPrefix)
	}
	name := s.unprefixed(keys[0])
	if len(name) > maxRLockName || !s.derived(name, keys[1], rQueuePrefix) || !s.derived(name, keys[2], rTimeoutPrefix) {
		return false
	}
	if rs.Kind == KindFairUnlock || rs.Kind == KindFairForce {
		if !s.derived(name, keys[3], "redisson_lock__channel") {
			return false
		}
	}
	if rs.LatchKey > 0 {
		l := s.unprefixed(keys[rs.LatchKey])
		i := strings.LastIndexByte(l, ':')
		return i > 0 && len(l)-i-1 <= 64 && s.derived(name, []byte(s.cfg.KeyPrefix+l[:i]), "redisson_unlock_latch")
	}
	return true
}

// rFairNamesOf returns the lock names a queue key can be derived from
// (with the key prefix), or none when it is not a queue key.
func (s *Locks) rFairNamesOf(queueKey []byte) []string {
	rest, ok := strings.CutPrefix(s.unprefixed(queueKey), rQueuePrefix+":")
	if !ok || rest == "" || len(rest) > maxRLockName+2 {
		return nil
	}
	cands := []string{rest}
	if len(rest) > 2 && rest[0] == '{' && rest[len(rest)-1] == '}' {
		cands = append(cands, rest[1:len(rest)-1]) // braces the client added
	}
	var out []string
	for _, n := range cands {
		if s.derived(n, queueKey, rQueuePrefix) {
			out = append(out, n)
		}
	}
	return out
}

// serveFair serves a recognised fair lock script (its shape checked).
func (s *Locks) serveFair(rs *Script, keys, argv [][]byte) ([][]byte, Run) {
	lock := keys[:1]
	if rs.Kind == KindFairLeave {
		names := s.rFairNamesOf(keys[0])
		lock = [][]byte{[]byte(s.cfg.KeyPrefix + names[0])}
	}
	return lock, func(ctx context.Context, dst []byte) []byte {
		switch rs.Kind {
		case KindFairTry, KindFairWait:
			return s.rFairTryLock(ctx, dst, rs, keys, argv)
		case KindFairUnlock:
			return s.rFairUnlock(ctx, dst, rs, keys, argv)
		case KindFairForce:
			return s.rFairForceUnlock(ctx, dst, keys)
		}
		for _, n := range s.rFairNamesOf(keys[0]) {
			s.rFairLeave(s.cfg.KeyPrefix+n, string(argv[0]))
		}
		return redcon.AppendNull(dst)
	}
}

// fairRead is a quorum read of the fair lock for owner: the lock's value a
// quorum holds ("" free), the largest PTTL of the masters holding it, the
// owner's ticket when a quorum holds the same one (0: not queued), and
// the head of the queue a quorum agrees on ("" none or no agreement).
type fairRead struct {
	value  string
	pttl   int64
	ticket int64
	head   string
	life   int64 // ms left of the head's place (the longest any master reports)
	// disagree: the masters that answered hold no value at a quorum (a
	// change under way); the error reply says so.
	disagree bool
}

func (s *Locks) rFairRead(ctx context.Context, fk fairKeys, owner string) (fairRead, []byte) {
	reps, err := s.rAsk(ctx, fk.lock, scripts.RedissonFairRead, []string{fk.lock, fk.queue, fk.expiry}, []string{owner})
	if err != nil {
		return fairRead{}, s.engineErr(err)
	}
	if r := s.undecided(reps); r != nil {
		return fairRead{}, r
	}
	values, tickets, heads := map[string]int{}, map[string]int{}, map[string]int{}
	pttl, life := map[string]int64{}, map[string]int64{}
	for _, r := range reps {
		if r.Failure() != nil || r.Reply.Type != resp.TypeArray || len(r.Reply.Elems) != 5 {
			continue
		}
		e := r.Reply.Elems
		v := e[0].Text()
		values[v]++
		pttl[v] = max(pttl[v], e[1].Int)
		tickets[e[2].Text()]++
		heads[e[3].Text()]++
		life[e[3].Text()] = max(life[e[3].Text()], e[4].Int)
	}
	q := s.eng.Quorum()
	var fr fairRead
	agreed := false
	for v, n := range values {
		if n >= q {
			fr.value, fr.pttl, agreed = v, pttl[v], true
		}
	}
	if !agreed {
		return fairRead{disagree: true}, redcon.AppendError(nil, msgDisagree)
	}
	for t, n := range tickets {
		if tk, ok := parseDigits(t); ok && n >= q {
			fr.ticket = tk
		}
	}
	for h, n := range heads {
		if h != "" && n >= q {
			fr.head, fr.life = h, life[h]
		}
	}
	return fr, nil
}

// rFairArrive queues owner with a new ticket on a quorum of masters (the
// engine FairLock's arrival: the largest of a quorum's counters, then
// registered on a quorum); 0 and the error reply when too few answered.
func (s *Locks) rFairArrive(ctx context.Context, fk fairKeys, owner string, life time.Duration) (int64, []byte) {
	isInt := func(r resp.Reply) bool { return r.Type == resp.TypeInteger && r.Int > 0 }
	reps, err := s.tr.Grant(ctx, fk.lock, life, scripts.FairTicket, scripts.FairTicket.AppendCall(nil, strArgs(fk.counter), strArgs(msArg(life))), isInt)
	if err != nil {
		return 0, s.engineErr(err)
	}
	ticket := int64(0)
	if countYes(reps, isInt) < s.eng.Quorum() {
		return 0, s.undecidedOr(reps)
	}
	for _, r := range reps {
		if r.Failure() == nil && isInt(r.Reply) {
			ticket = max(ticket, r.Reply.Int)
		}
	}
	reps, err = s.tr.Grant(ctx, fk.lock, life, scripts.FairRegister,
		scripts.FairRegister.AppendCall(nil, strArgs(fk.counter, fk.queue, fk.expiry), strArgs(owner, strconv.FormatInt(ticket, 10), msArg(life))), isOne)
	if err != nil {
		return 0, s.engineErr(err)
	}
	if countYes(reps, isOne) < s.eng.Quorum() {
		return 0, s.undecidedOr(reps)
	}
	return ticket, nil
}

// undecidedOr is the error reply for replies that did not reach a quorum.
func (s *Locks) undecidedOr(reps []enginex.MasterReply) []byte {
	if r := s.undecided(reps); r != nil {
		return r
	}
	return redcon.AppendError(nil, msgDisagree)
}

// rFairLeave removes waiter from key's queue on every master (best effort:
// a master that misses it drops the entry at its expiry).
func (s *Locks) rFairLeave(key, waiter string) {
	fk := fairKeysOf(key)
	s.rBestEffort(key, scripts.FairLeave, []string{fk.lock, fk.queue, fk.expiry, fk.counter}, []string{waiter})
}

func (s *Locks) rFairTryLock(ctx context.Context, dst []byte, rs *Script, keys, argv [][]byte) []byte {
	key, owner, lease := string(keys[0]), string(argv[1]), millis(argv[0])
	wait := millis(argv[3])
	if rs.Kind == KindFairWait {
		wait = millis(argv[2])
	}
	life := s.fairLife(wait)
	fk := fairKeysOf(key)
	no := func() []byte { return redcon.AppendInt(dst, 1) } // tryLock(): not acquired
	fr, e := s.rFairRead(ctx, fk, owner)
	switch {
	case fr.disagree && rs.Kind == KindFairTry:
		return no() // a change under way: not acquired (never a guess that grants)
	case fr.disagree:
		return redcon.AppendInt(dst, min(int64(fairPoll), life.Milliseconds()/2))
	case e != nil:
		return append(dst, e...)
	}
	if cur, ok := parseHold(fr.value); ok && cur.owner == owner {
		if cur.kind != 'R' {
			return redcon.AppendError(dst, "ERR redlock proxy: "+rs.Name+": this owner holds the lock as "+rKindName(cur.kind)+" (one lock name, one kind)")
		}
		return s.rReenter(ctx, dst, rs, key, cur, lease)
	}
	if rs.Kind == KindFairWait && fr.ticket == 0 {
		t, e := s.rFairArrive(ctx, fk, owner, life)
		if e != nil {
			return append(dst, e...)
		}
		fr.ticket = t
	}
	if fr.value != "" || (fr.head != "" && fr.head != owner) {
		// Held, or an earlier waiter heads the queue.
		if rs.Kind == KindFairTry {
			return no()
		}
		if fr.ticket > 0 {
			// Keep the place: the entry's life runs from this try. Done
			// before the answer (bounded by the cleanup timeout), so that
			// the waiter's later requests — its acquireFailed, through any
			// proxy — come after it: sent after the answer, a late
			// register put a waiter that had left back at the head of the
			// queue, and the free lock was refused to everyone until the
			// entry expired.
			s.rBestEffort(key, scripts.FairRegister, []string{fk.counter, fk.queue, fk.expiry}, []string{owner, strconv.FormatInt(fr.ticket, 10), msArg(life)})
		}
		ttl := int64(fairPoll)
		if fr.value != "" {
			ttl = max(0, fr.pttl)
		}
		return redcon.AppendInt(dst, min(ttl, life.Milliseconds()/2))
	}
	h := rHold{owner: owner, kind: 'R', count: 1, rand: rRand()}
	v1 := h.value()
	waiter, ticket := "", "0"
	if fr.ticket > 0 {
		waiter, ticket = owner, strconv.FormatInt(fr.ticket, 10)
	}
	t1 := time.Now()
	reps, err := s.rGrant(ctx, key, lease, scripts.FairAcquire, []string{fk.lock, fk.queue, fk.expiry, fk.counter},
		[]string{v1, msArg(lease), waiter, ticket, msArg(life)}, isOne)
	if err == nil && countYes(reps, isOne) >= s.eng.Quorum() && s.rValid(ctx, t1, lease) {
		if waiter != "" {
			// Granted: its entry would head the queue. Not waited for
			// (validity is checked last); sent on the key's connection
			// to each master, after the acquire.
			go s.rFairLeave(key, owner)
		}
		return redcon.AppendNull(dst)
	}
	if err == nil || !errors.Is(err, engine.ErrBadArgument) {
		s.rBestEffort(key, scripts.RedissonCleanup, []string{key}, []string{v1})
	}
	switch {
	case err != nil:
		return s.engineErr(err)
	case countYes(reps, isOne) >= s.eng.Quorum():
		return s.engineErr(engine.ErrGrantedTooLate)
	}
	if r := s.undecided(reps); r != nil {
		return r
	}
	if rs.Kind == KindFairTry {
		return no()
	}
	return redcon.AppendInt(dst, min(int64(fairPoll), life.Milliseconds()/2))
}

// rFairUnlock is RLock's unlock; a release (or a lock found free: Redisson
// answers 1 then) wakes the waiter heading the queue, on its own channel.
func (s *Locks) rFairUnlock(ctx context.Context, dst []byte, rs *Script, keys, argv [][]byte) []byte {
	key := string(keys[0])
	rkeys, latchTTL, bad := s.unlockKeys(rs, keys, argv)
	if bad != nil {
		return append(dst, bad...)
	}
	ch := string(keys[3])
	released := false
	r := s.rUnlockHold(ctx, dst, rkeys, latchTTL, string(argv[2]), millis(argv[1]), redcon.AppendInt(nil, 1), func() { released = true })
	if released {
		go s.rFairWakeNext(key, ch) // a hint: the reply does not wait for its read
	}
	return r
}

// rFairWakeNext wakes the waiter heading key's queue (a hint: a waiter not
// woken tries again at the TTL it was answered). A head that does not
// take the lock (its process died) keeps its place until its entry
// expires: the wake-up is then passed on to the next head, up to
// fairFollow times, while the lock stays free — one such chain per lock
// at a time, at most maxFairChains in all (state kept by this proxy only
// to send hints: it decides nothing, and a restart loses only hints).
func (s *Locks) rFairWakeNext(key, ch string) {
	f := &s.fairChains
	f.mu.Lock()
	if f.m == nil {
		f.m = map[string]*time.Timer{}
	}
	t, busy := f.m[key]
	switch {
	case busy && t == nil:
		// A chain of this lock is reading right now: one wake-up.
		f.mu.Unlock()
		s.rFairFollow(key, ch, "", 1, false)
		return
	case busy:
		t.Stop() // this release starts the lock's chain again
	case len(f.m) >= maxFairChains:
		f.mu.Unlock()
		s.rFairFollow(key, ch, "", 1, false) // too many chains: one wake-up
		return
	}
	f.m[key] = nil
	f.mu.Unlock()
	s.rFairFollow(key, ch, "", fairFollow, true)
}

// fairChains are the wake-up chains under way (rFairWakeNext).
type fairChains struct {
	mu sync.Mutex
	m  map[string]*time.Timer // lock key → the chain's next step (nil: running)
}

// stop ends every chain (Locks.Close).
func (f *fairChains) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, t := range f.m {
		if t != nil {
			t.Stop()
		}
		delete(f.m, k)
	}
}

const (
	fairFollow    = 8    // heads a release's wake-up is passed on to
	maxFairChains = 1024 // chains under way at once
)

func (s *Locks) rFairFollow(key, ch, woken string, left int, chain bool) {
	end := func() {
		if chain {
			s.fairChains.mu.Lock()
			delete(s.fairChains.m, key)
			s.fairChains.mu.Unlock()
		}
	}
	if left == 0 || s.shutting.Load() {
		end()
		return
	}
	// The read's broadcast waits up to the per-master timeout from when it
	// is sent: the context allows for that and more.
	ctx, cancel := context.WithTimeout(context.Background(), 2*s.tr.MasterTimeout(0))
	fr, e := s.rFairRead(ctx, fairKeysOf(key), "")
	cancel()
	if e != nil || fr.value != "" || fr.head == "" {
		end() // held again (or unknown, or nobody waits)
		return
	}
	if fr.head != woken {
		s.wakeMsg(ch+":"+fr.head, "0")
	}
	if !chain {
		return
	}
	s.fairChains.mu.Lock()
	defer s.fairChains.mu.Unlock()
	if _, ok := s.fairChains.m[key]; !ok {
		return // stopped
	}
	s.fairChains.m[key] = time.AfterFunc(time.Duration(fr.life)*time.Millisecond+20*time.Millisecond, func() {
		s.rFairFollow(key, ch, fr.head, left-1, true)
	})
}

// rFairForceUnlock is RLock's forceUnlock (opt-in, tokenless), then the
// next waiter's wake-up.
func (s *Locks) rFairForceUnlock(ctx context.Context, dst []byte, keys [][]byte) []byte {
	key, ch := string(keys[0]), string(keys[3])
	return s.rForceUnlockHold(ctx, dst, key, func() { go s.rFairWakeNext(key, ch) })
}
