package redisson

import (
	"context"
	"encoding/hex"
	"errors"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

// Redisson's RReadWriteLock, unmodified, over the quorum.
//
// Redisson keeps a read-write lock as a hash {mode, owner: count, …} plus
// a timeout key per read hold, and changes it with HINCRBY: per-master
// copies would drift apart exactly as RLock's counts do. The proxy keeps
// it as RLock's holds are kept (redisson_hold.go): one plain string per
// lock on each master whose value is the whole state,
//
//	rw|<mode r or w>|<random hex>|<hex(owner)>=<count>;<hex(owner)>=<count>;…
//
// (a writer's owner is Redisson's <id>:<thread>:write, a reader's
// <id>:<thread>), and every change is a compare-and-set of the value a
// quorum holds, under the grant rule:
//
//   - tryLock from free: SET NX PX of a fresh value on every master; a
//     quorum within validity grants, else the attempt's value is
//     compare-and-deleted where it landed.
//   - a reader joining a read lock (or the write holder's own thread
//     taking a read), a reader or the writer re-entering: CAS of the value
//     a quorum holds to one with the count raised — the TTL raised to the
//     lease for a read (Redisson: max(pttl, lease)), set to pttl + lease for
//     a write (Redisson adds; here capped at MaxTTL); a quorum within
//     validity grants, else the new value is reverted where it landed. A
//     CAS that loses a race with another reader's is retried (a few
//     times, with jitter) from a fresh read.
//   - unlock: a quorum read, then CAS to the decremented value, or
//     compare-and-delete when no hold is left; a write hold's nested
//     unlock resets the TTL to the lease (an extension: the grant rule).
//   - renewal: PEXPIRE where the value holds an entry of the owner.
//
// What changes for a Redisson user (docs/proxy.md): a read hold has no
// lease of its own. Redisson lets one reader's hold lapse while others
// renew the lock; here every hold lives as long as the lock, so the hold
// of a reader that died ends when the last live reader unlocks plus at
// most one lease (the lock's TTL then runs out) — a writer waits longer,
// never less. Releases before 3.20.0 are not recognised.

// maxRWOwners bounds the owners (threads) a read-write lock's value lists,
// MaxRWValue its bytes (a join that would pass it is refused), and maxRWRenewOwners the owners one batched read
// renewal names (each is searched for in its lock's value on every master).
const (
	maxRWOwners      = 256
	MaxRWValue       = 32 << 10
	maxRWRenewOwners = 512
)

// rwAttempts bounds the tries of a tryLock or unlock whose
// compare-and-set loses a race with another change of the same lock (or
// finds the masters mid-change: no value at a quorum).
const rwAttempts = 8

// rwBusyTTL is the TTL a tryLock answers when every try lost such a
// race: "not acquired, held for about this long" — Redisson's lock()
// retries after it, tryLock() answers false. Never a grant.
const rwBusyTTL = 10

// RWChannelPrefix is the prefix of the channel Redisson's read-write lock
// wakes its waiters on.
const RWChannelPrefix = "redisson_rwlock"

type rwOwner struct {
	name  string
	count int64 // ≥ 1
}

// rwState is a read-write lock as the masters keep it.
type rwState struct {
	mode   byte // 'r' or 'w'
	rand   string
	owners []rwOwner
}

func (st rwState) value() string {
	var b strings.Builder
	b.WriteString("rw|")
	b.WriteByte(st.mode)
	b.WriteByte('|')
	b.WriteString(st.rand)
	b.WriteByte('|')
	for _, o := range st.owners {
		b.WriteString(hex.EncodeToString([]byte(o.name)))
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(o.count, 10))
		b.WriteByte(';')
	}
	return b.String()
}

// parseRW parses a value of the form rwState.value writes.
func parseRW(v string) (rwState, bool) {
	rest, ok := strings.CutPrefix(v, "rw|")
	if !ok || len(rest) < 2 || (rest[0] != 'r' && rest[0] != 'w') || rest[1] != '|' {
		return rwState{}, false
	}
	st := rwState{mode: rest[0]}
	rest = rest[2:]
	i := strings.IndexByte(rest, '|')
	if i <= 0 {
		return rwState{}, false
	}
	st.rand, rest = rest[:i], rest[i+1:]
	if _, err := hex.DecodeString(st.rand); err != nil || rest == "" {
		return rwState{}, false
	}
	for rest != "" {
		j := strings.IndexByte(rest, ';')
		if j < 0 || len(st.owners) == maxRWOwners {
			return rwState{}, false
		}
		h, c, ok := strings.Cut(rest[:j], "=")
		rest = rest[j+1:]
		name, err := hex.DecodeString(h)
		n, okc := parseDigits(c)
		if !ok || err != nil || !validOwner(name) || !okc || n < 1 {
			return rwState{}, false
		}
		st.owners = append(st.owners, rwOwner{name: string(name), count: n})
	}
	return st, true
}

func (st rwState) find(owner string) int {
	for i, o := range st.owners {
		if o.name == owner {
			return i
		}
	}
	return -1
}

// with returns st with owner's count changed by d (an owner whose count
// reaches 0 is removed, a new one added at the end) and a fresh random part.
func (st rwState) with(owner string, d int64) rwState {
	out := rwState{mode: st.mode, rand: rRand(), owners: make([]rwOwner, 0, len(st.owners)+1)}
	found := false
	for _, o := range st.owners {
		if o.name == owner {
			found = true
			if o.count += d; o.count <= 0 {
				continue
			}
		}
		out.owners = append(out.owners, o)
	}
	if !found && d > 0 {
		out.owners = append(out.owners, rwOwner{name: owner, count: d})
	}
	return out
}

// RWJoin returns read-write hold value v with owner holding one more read
// hold, as a read tryLock through any proxy writes it; false when v is
// not a read-write hold.
func RWJoin(v, owner string) (string, bool) {
	st, ok := parseRW(v)
	if !ok {
		return "", false
	}
	return st.with(owner, 1).value(), true
}

// validWriter reports whether b is a write lock's owner (<id>:<thread>:write).
func validWriter(b []byte) bool {
	return validOwner(b) && len(b) > len(":write") && strings.HasSuffix(string(b), ":write")
}

// rwFits is fits for the read-write lock's scripts.
func (rs *Script) rwFits(keys, argv [][]byte) bool {
	switch rs.Kind {
	case KindRWRenewTask, KindRWRenewTask44:
		if len(keys) < 2 || len(keys)%2 != 0 || len(keys) > 2*maxRenewKeys || len(argv) < 2 || !isMillis(argv[0]) {
			return false
		}
		if rs.Kind == KindRWRenewTask {
			if len(argv) != 1+len(keys)/2 {
				return false
			}
			for _, o := range argv[1:] {
				if !validOwner(o) {
					return false
				}
			}
			return true
		}
		i, total := 1, 0
		for range len(keys) / 2 {
			if i >= len(argv) {
				return false
			}
			n, ok := resp.ParseInt(argv[i])
			if !ok || n < 1 || n > maxRWOwners || int64(len(argv)-i-1) < n {
				return false
			}
			for _, o := range argv[i+1 : i+1+int(n)] {
				if !validOwner(o) {
					return false
				}
			}
			i += 1 + int(n)
			if total += int(n); total > maxRWRenewOwners {
				return false
			}
		}
		return i == len(argv)
	}
	if len(keys) != rs.Keys || len(argv) != rs.Argc {
		return false
	}
	latch := rs.LatchArg == 0 || isMillis(argv[rs.LatchArg])
	switch rs.Kind {
	case KindRWRead:
		return isMillis(argv[0]) && validOwner(argv[1]) && string(argv[2]) == string(argv[1])+":write"
	case KindRWWrite:
		return isMillis(argv[0]) && validWriter(argv[1])
	case KindRWUnlockRead:
		return string(argv[0]) == "0" && validOwner(argv[1]) && latch
	case KindRWUnlockWrite:
		return string(argv[0]) == "1" && isMillis(argv[1]) && validWriter(argv[2]) && latch
	case KindRWForceRead:
		return string(argv[0]) == "0"
	case KindRWForceWrite:
		return string(argv[0]) == "1"
	case KindRWRenew:
		return isMillis(argv[0]) && validOwner(argv[1])
	}
	return true // KindRWIsLocked
}

// rwNames is rNames for the read-write lock's scripts: the lock names are
// bounded; the channel the proxy publishes on and the latch it keeps are
// derived from the lock's name. (The timeout and key prefixes Redisson
// sends name keys the proxy does not keep.)
func (s *Locks) rwNames(rs *Script, keys [][]byte) bool {
	if rs.Kind == KindRWRenewTask || rs.Kind == KindRWRenewTask44 {
		for i := 0; i < len(keys); i += 2 { // a lock, then its key prefix
			if len(s.unprefixed(keys[i])) > maxRLockName {
				return false
			}
		}
		return true
	}
	name := s.unprefixed(keys[0])
	if len(name) > maxRLockName {
		return false
	}
	switch rs.Kind {
	case KindRWUnlockRead, KindRWUnlockWrite, KindRWForceRead, KindRWForceWrite:
		if !s.derived(name, keys[1], RWChannelPrefix) {
			return false
		}
		if rs.LatchKey > 0 {
			l := s.unprefixed(keys[rs.LatchKey])
			i := strings.LastIndexByte(l, ':')
			return i > 0 && len(l)-i-1 <= 64 && s.derived(name, []byte(s.cfg.KeyPrefix+l[:i]), "redisson_unlock_latch")
		}
	}
	return true
}

// serveRW serves a recognised read-write lock script (its shape checked).
// It is ordered after the connection's earlier commands on its locks.
func (s *Locks) serveRW(rs *Script, keys, argv [][]byte) ([][]byte, Run) {
	locks := keys[:1]
	if rs.Kind == KindRWRenewTask || rs.Kind == KindRWRenewTask44 {
		locks = make([][]byte, 0, len(keys)/2)
		for i := 0; i < len(keys); i += 2 {
			locks = append(locks, keys[i])
		}
	}
	return locks, func(ctx context.Context, dst []byte) []byte {
		switch rs.Kind {
		case KindRWRead, KindRWWrite:
			return s.rwTryLock(ctx, dst, rs, keys, argv)
		case KindRWUnlockRead, KindRWUnlockWrite:
			return s.rwUnlock(ctx, dst, rs, keys, argv)
		case KindRWForceRead, KindRWForceWrite:
			return s.rwForceUnlock(ctx, dst, keys, argv)
		case KindRWIsLocked:
			return s.rwIsLocked(ctx, dst, keys)
		}
		return s.rwRenew(ctx, dst, rs, keys, argv)
	}
}

// rwJitter waits before try attempt (1, 2, …) of a compare-and-set that
// lost a race: up to 2^attempt ms, at most 16 ms.
func rwJitter(ctx context.Context, attempt int) bool {
	t := time.NewTimer(time.Duration(mrand.Int64N(int64(time.Millisecond) << min(attempt, 4))))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

const msgOneKind = "ERR redlock proxy: this lock name is held as an RLock or RFencedLock, not as a read-write lock (one lock name, one kind)"

func (s *Locks) rwTryLock(ctx context.Context, dst []byte, rs *Script, keys, argv [][]byte) []byte {
	key, lease, owner := string(keys[0]), millis(argv[0]), string(argv[1])
	mode := byte('r')
	if rs.Kind == KindRWWrite {
		mode = 'w'
	}
	q := s.eng.Quorum()
	for attempt := range rwAttempts {
		if attempt > 0 && !rwJitter(ctx, attempt) {
			return s.engineErr(ctx.Err())
		}
		v1 := rwState{mode: mode, rand: rRand(), owners: []rwOwner{{name: owner, count: 1}}}.value()
		t1 := time.Now()
		reps, err := s.rGrant(ctx, key, lease, scripts.RedissonAcquire, []string{key}, []string{v1, msArg(lease)}, rCreated)
		if err != nil {
			if !errors.Is(err, engine.ErrBadArgument) {
				s.rBestEffort(key, scripts.RedissonCleanup, []string{key}, []string{v1})
			}
			return s.engineErr(err)
		}
		yes := 0
		held, pttl := map[string]int{}, map[string]int64{}
		for _, r := range reps {
			if r.Failure() != nil {
				continue
			}
			if rCreated(r.Reply) {
				yes++
			} else if e := r.Reply.Elems; r.Reply.Type == resp.TypeArray && len(e) == 3 {
				held[e[1].Text()]++
				pttl[e[1].Text()] = max(pttl[e[1].Text()], e[2].Int)
			}
		}
		if yes >= q && s.rValid(ctx, t1, lease) {
			return redcon.AppendNull(dst)
		}
		s.rBestEffort(key, scripts.RedissonCleanup, []string{key}, []string{v1})
		if r := s.undecided(reps); r != nil {
			return r
		}
		if yes >= q {
			return s.engineErr(engine.ErrGrantedTooLate)
		}
		cur := ""
		for v, n := range held {
			if n >= q {
				cur = v
			}
		}
		if cur == "" {
			continue // a change under way, or masters that differ
		}
		st, ok := parseRW(cur)
		if !ok {
			if _, isHold := parseHold(cur); isHold {
				return redcon.AppendError(dst, msgOneKind)
			}
			return redcon.AppendInt(dst, pttl[cur]) // a holder of another kind
		}
		shared := st.mode == 'w' && st.find(owner) >= 0 // the writer re-enters
		if mode == 'r' {
			shared = st.mode == 'r' || st.find(owner+":write") >= 0 // a reader, or the writer's own thread
		}
		if !shared {
			return redcon.AppendInt(dst, pttl[cur])
		}
		if st.find(owner) < 0 && len(st.owners) >= maxRWOwners {
			return redcon.AppendError(dst, "ERR redlock proxy: a read-write lock holds at most "+strconv.Itoa(maxRWOwners)+" owners (threads) at once")
		}
		next := st.with(owner, 1)
		nv := next.value()
		if len(nv) > MaxRWValue {
			return redcon.AppendError(dst, "ERR redlock proxy: a read-write lock's owners (threads) may take at most "+strconv.Itoa(MaxRWValue>>10)+" KiB")
		}
		ttl := lease
		if mode == 'w' {
			// Redisson adds the lease to the TTL left: here at most
			// MaxTTL (the grant rule), and never less than the lease (a
			// lease over MaxTTL is refused).
			// Never lower (proxies configured with a shorter MaxTTL
			// than the one that granted it would cut the hold short).
			ttl = min(time.Duration(pttl[cur])*time.Millisecond+lease, max(s.eng.Config().MaxTTL, lease))
		}
		t2 := time.Now()
		reps, err = s.rGrant(ctx, key, ttl, scripts.RedissonCAS, []string{key}, []string{cur, nv, msArg(ttl), "", "0"}, isOne)
		if err == nil && countYes(reps, isOne) >= q && s.rValid(ctx, t2, lease) {
			return redcon.AppendNull(dst)
		}
		if err == nil || !errors.Is(err, engine.ErrBadArgument) {
			s.rBestEffort(key, scripts.RedissonCAS, []string{key}, []string{nv, cur, "0", "", "0"})
		}
		if err != nil {
			return s.engineErr(err)
		}
		if r := s.undecided(reps); r != nil {
			return r
		}
		if countYes(reps, isOne) >= q {
			return s.engineErr(engine.ErrGrantedTooLate)
		}
		// Another change of the lock came first: try again from a fresh read.
	}
	return redcon.AppendInt(dst, rwBusyTTL)
}

// unlockKeys returns the keys of a read-write or fair lock's unlock (the
// lock, and the latch the masters keep for it, when the script has one)
// and the latch's TTL argument.
func (s *Locks) unlockKeys(rs *Script, keys, argv [][]byte) ([]string, string, []byte) {
	if rs.LatchKey == 0 {
		return []string{string(keys[0])}, "0", nil
	}
	return s.unlockLatch(keys[0], keys[rs.LatchKey], argv[rs.LatchArg])
}

// unlockLatch returns an unlock's keys — the lock, and where the masters
// keep the latch the client named (rLatchKey) — and the latch's TTL
// argument (ms, at most maxLatchTTL); or the error reply when the latch
// could not share the lock's slot.
func (s *Locks) unlockLatch(lock, latch, ttl []byte) ([]string, string, []byte) {
	key := string(lock)
	if tag := conn.HashTag(key); len(s.eng.Config().Clusters) > 0 && strings.ContainsAny(tag, "{}") {
		return nil, "", redcon.AppendError(nil, "ERR redlock proxy: a Redisson lock whose hash tag contains a brace cannot keep its unlock latch on Redis Cluster members; rename the lock")
	}
	return []string{key, rLatchKey(key, string(latch))}, msArg(min(millis(ttl), maxLatchTTL)), nil
}

func (s *Locks) rwUnlock(ctx context.Context, dst []byte, rs *Script, keys, argv [][]byte) []byte {
	key, ch := string(keys[0]), string(keys[1])
	write := rs.Kind == KindRWUnlockWrite
	owner, msg, lease := string(argv[1]), "0", time.Duration(0)
	if write {
		owner, msg, lease = string(argv[2]), "1", millis(argv[1])
	}
	rkeys, latchTTL, bad := s.unlockKeys(rs, keys, argv)
	if bad != nil {
		return bad
	}
	deleted := false // a delete of this unlock reached some masters
	for attempt := range rwAttempts {
		if attempt > 0 && !rwJitter(ctx, attempt) {
			return s.engineErr(ctx.Err())
		}
		r, done := s.rwUnlockOnce(ctx, rs, rkeys, latchTTL, owner, lease, write, deleted, attempt == 0)
		switch done {
		case rwDone:
			if r.wake {
				s.wakeMsg(ch, msg)
			}
			switch {
			case r.free && len(rkeys) > 1:
				// As Redisson's script: a resend answers 1 (not nil, as it
				// would once another client took the lock).
				s.rSetLatch(key, rkeys[1], "1", latchTTL)
			case attempt > 0 && len(rkeys) > 1 && len(r.reply) > 1 && r.reply[0] == ':':
				// Earlier tries may have left their latches on some
				// masters: the answer's latch goes on every master, so
				// that a retry of this request answers what it was told.
				s.rSetLatch(key, rkeys[1], string(r.reply[1:len(r.reply)-2]), latchTTL)
			}
			return append(dst, r.reply...)
		case rwDeleteRaced:
			deleted = true
		}
	}
	return redcon.AppendError(dst, msgDisagree)
}

// rwOutcome is what one try of an unlock did.
type rwOutcome uint8

const (
	rwDone        rwOutcome = iota // answered (reply set)
	rwRaced                        // lost a race (or no value at a quorum): try again
	rwDeleteRaced                  // a delete reached too few masters: try again
)

type rwResult struct {
	reply []byte
	wake  bool // publish the unlock's message
	// free: answered for a lock free at a quorum — Redisson's script then
	// sets the latch to 1 as well, so that a resend answers 1.
	free bool
}

// rwUnlockOnce is one try of an unlock: a quorum read, then the change
// (lease: a write unlock's, which a nested one keeps the TTL above).
// deleted: an earlier try's delete reached some masters, so a lock now
// free at a quorum was released by this unlock. first: the first try —
// it answers from a latch on any master (an earlier run of this request
// answered); a later try answers from a latch only at a quorum (on fewer
// masters it may be this try's own change, which reached too few: the
// masters make it at most once each, so the try completes it).
func (s *Locks) rwUnlockOnce(ctx context.Context, rs *Script, rkeys []string, latchTTL, owner string, lease time.Duration, write, deleted, first bool) (rwResult, rwOutcome) {
	key := rkeys[0]
	fail := func(reps []enginex.MasterReply, err error) (rwResult, rwOutcome) {
		if err != nil {
			return rwResult{reply: s.engineErr(err)}, rwDone
		}
		if r := s.undecided(reps); r != nil {
			return rwResult{reply: r}, rwDone
		}
		return rwResult{}, rwRaced
	}
	reps, err := s.rAsk(ctx, key, scripts.RedissonRead, rkeys, nil)
	if err != nil {
		return fail(nil, err)
	}
	if r := s.undecided(reps); r != nil {
		return rwResult{reply: r}, rwDone
	}
	v, latch, ok := s.rAgreed(reps)
	switch {
	case latch != "" && (first || latchCount(reps) >= s.eng.Quorum()):
		// A resent unlock: the first run's answer (as RLock's,
		// redisson_hold.go). On a later try, a latch at a quorum means
		// this request's change stands at a quorum — made by this run's
		// earlier try or by another run of the same request (a resend
		// through another proxy, running at the same time): answering it
		// is the one decrement (issue #41: two runs each decremented a
		// write hold of count 2). On fewer masters the change is made
		// where the latch is (RedissonCAS makes it at most once per
		// master) and this try completes it on the others.
		n, _ := strconv.ParseInt(latch, 10, 64)
		return rwResult{reply: redcon.AppendInt(nil, n)}, rwDone
	case !ok:
		return rwResult{}, rwRaced
	case v == "" && deleted:
		return rwResult{reply: redcon.AppendInt(nil, 1), wake: true}, rwDone
	case v == "":
		// Free: Redisson publishes, sets the latch to 1 and answers 1
		// (nil from 3.44.0).
		if rs.FreeNil {
			return rwResult{reply: redcon.AppendNull(nil), wake: true, free: true}, rwDone
		}
		return rwResult{reply: redcon.AppendInt(nil, 1), wake: true, free: true}, rwDone
	}
	st, isRW := parseRW(v)
	i := -1
	if isRW {
		i = st.find(owner)
	}
	if i < 0 || (write && st.mode != 'w') {
		return rwResult{reply: redcon.AppendNull(nil)}, rwDone // not this owner's
	}
	next := st.with(owner, -1)
	if len(rkeys) > 1 {
		// Every run of this request writes the same value (latchRand).
		next.rand = latchRand(v, rkeys[1])
	}
	q := s.eng.Quorum()
	switch {
	case write && st.owners[i].count > 1:
		// A nested write unlock answers 0 with the TTL at least the
		// lease (Redisson resets it to the lease; lowering it could end
		// the writer's own read holds, or the hold's longer lease, early):
		// an extension, under the grant rule.
		t1 := time.Now()
		reps, err = s.rGrant(ctx, key, lease, scripts.RedissonCAS, rkeys, []string{v, next.value(), msArg(lease), "0", latchTTL}, isOne)
		if err == nil && countYes(reps, isOne) >= q && s.rValid(ctx, t1, lease) {
			return rwResult{reply: redcon.AppendInt(nil, 0)}, rwDone
		}
		s.rBestEffort(key, scripts.RedissonCAS, rkeys, []string{next.value(), v, "0", "", "0"})
		if err == nil && countYes(reps, isOne) >= q {
			return rwResult{reply: s.engineErr(engine.ErrGrantedTooLate)}, rwDone
		}
		return fail(reps, err)
	case len(next.owners) == 0:
		reps, err = s.rAsk(ctx, key, scripts.RedissonCAS, rkeys, []string{v, "", "0", "1", latchTTL})
		if err == nil && countYes(reps, isOne) >= q {
			return rwResult{reply: redcon.AppendInt(nil, 1), wake: true}, rwDone
		}
		// A failed delete is not undone: masters that deleted hold no
		// lock, the others keep it to its lease (or the next try ends it).
		if r, o := fail(reps, err); o != rwRaced {
			return r, o
		}
		return rwResult{}, rwDeleteRaced
	}
	// Holds remain (other readers, or the writer's own read holds: the
	// lock becomes a read lock); the TTL is left as it is.
	res := int64(0)
	if write {
		next.mode, res = 'r', 1
	}
	reps, err = s.rAsk(ctx, key, scripts.RedissonCAS, rkeys, []string{v, next.value(), "1", strconv.FormatInt(res, 10), latchTTL})
	if err == nil && countYes(reps, isOne) >= q {
		return rwResult{reply: redcon.AppendInt(nil, res)}, rwDone
	}
	s.rBestEffort(key, scripts.RedissonCAS, rkeys, []string{next.value(), v, "0", "", "0"})
	return fail(reps, err)
}

// rwForceUnlock ends the read (or write) lock whoever holds it: 1 when
// the lock was held in that mode, else 0.
func (s *Locks) rwForceUnlock(ctx context.Context, dst []byte, keys, argv [][]byte) []byte {
	key, msg := string(keys[0]), string(argv[0])
	mode := byte('r')
	if msg == "1" {
		mode = 'w'
	}
	v, e := s.rRead(ctx, key)
	if e != nil {
		return e
	}
	st, ok := parseRW(v)
	if !ok || st.mode != mode {
		return redcon.AppendInt(dst, 0)
	}
	reps, err := s.rAsk(ctx, key, scripts.RedissonCAS, []string{key}, []string{v, "", "0"})
	if err != nil {
		return s.engineErr(err)
	}
	if countYes(reps, isOne) >= s.eng.Quorum() {
		s.wakeMsg(string(keys[1]), msg)
		return redcon.AppendInt(dst, 1)
	}
	if r := s.undecided(reps); r != nil {
		return r
	}
	return redcon.AppendError(dst, msgDisagree)
}

// rwIsLocked is the read lock's isLocked: 1 when read-locked, or
// write-locked with a read hold of the writer's thread.
func (s *Locks) rwIsLocked(ctx context.Context, dst []byte, keys [][]byte) []byte {
	v, e := s.rRead(ctx, string(keys[0]))
	if e != nil {
		return e
	}
	if st, ok := parseRW(v); ok && (st.mode == 'r' || len(st.owners) > 1) {
		return redcon.AppendInt(dst, 1)
	}
	return redcon.AppendInt(dst, 0)
}

// rwRenew serves the read lock's watchdog: one lock (3.20.0-3.43.0,
// answering 1/0) or a batch of (lock, key prefix) pairs (3.44.0+, an
// array of 1/0): a lock is renewed where it holds an entry of one of its
// owners.
func (s *Locks) rwRenew(ctx context.Context, dst []byte, rs *Script, keys, argv [][]byte) []byte {
	lease := millis(argv[0])
	var items []renewItem
	switch rs.Kind {
	case KindRWRenew:
		items = []renewItem{{key: string(keys[0]), owners: []string{string(argv[1])}}}
	case KindRWRenewTask:
		for i := 0; i < len(keys); i += 2 {
			items = append(items, renewItem{key: string(keys[i]), owners: []string{string(argv[1+i/2])}})
		}
	default: // KindRWRenewTask44: a count, then that many owners, per lock
		j := 1
		for i := 0; i < len(keys); i += 2 {
			n, _ := resp.ParseInt(argv[j])
			it := renewItem{key: string(keys[i])}
			for _, o := range argv[j+1 : j+1+int(n)] {
				it.owners = append(it.owners, string(o))
			}
			items = append(items, it)
			j += 1 + int(n)
		}
	}
	res, e := s.renew(ctx, lease, items)
	if e != nil {
		return append(dst, e...)
	}
	if rs.Kind == KindRWRenew {
		return redcon.AppendInt(dst, res[0])
	}
	dst = redcon.AppendArray(dst, len(res))
	for _, v := range res {
		dst = redcon.AppendInt(dst, v)
	}
	return dst
}

// rSetLatch writes an unlock's latch (its answer) on every master, best
// effort, in lockKey's slot.
func (s *Locks) rSetLatch(lockKey, latchKey, answer, latchTTL string) {
	timeout := s.eng.Config().CleanupTimeout
	ctx, cancel := context.WithTimeout(context.Background(), timeout+10*time.Millisecond)
	defer cancel()
	s.tr.Broadcast(ctx, lockKey, timeout, nil, resp.AppendCommandStrings(nil, "SET", latchKey, answer, "PX", latchTTL))
}
