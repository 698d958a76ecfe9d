package redisson

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
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

// A Redisson hold lives on the masters only. Each master keeps the lock as
// a plain string whose value is the whole hold,
//
//	<owner>|<kind>|<hold count>|<random hex>|<fencing token>
//
// (kind R for RLock, F for RFencedLock; the token is 0 for an RLock). Every
// write puts a fresh random part in, so a value names the one attempt that
// wrote it, and every change of a hold is a compare-and-set of the value a
// quorum holds:
//
//   - tryLock from zero: SET NX PX on every master (the engine's grant
//     rule: TTL ≤ MaxTTL, no vote from a quarantined master); a quorum
//     within validity grants. Otherwise the value is compare-and-deleted
//     on every master: it is this attempt's, so the cleanup removes only
//     what the attempt created. RFencedLock then writes its token (the
//     engine's fencing counters, raised the way engine.WithFencing does)
//     into the value at a quorum.
//   - re-entry (a quorum holds one value of this owner): CAS to count+1,
//     PTTL raised to the lease; a quorum within validity grants, else the
//     new value is reverted to the old one on every master.
//   - unlock: a quorum read; CAS to count−1 (0) or compare-and-delete (1).
//     A failed decrement is reverted. With no value held by a quorum, the
//     answer is the unavailable error, never a 0, 1 or nil guessed.
//   - renewal: PEXPIRE where the value is a hold of exactly this owner; 1
//     where a quorum did it within validity.
//
// Why a count never under-counts (docs/safety.md, "Redisson"): a reply
// that reports count n was given only after a quorum held the value with
// count n; a master leaves that value only by a later compare-and-set of
// it (by the owner's next command), by its expiry, or by a revert of an
// attempt that was answered with an error. So a quorum read that finds a
// value finds that one (two quorums share a master) or a later one.

// rHold is a hold as the masters keep it.
type rHold struct {
	owner string
	kind  byte  // 'R' (RLock) or 'F' (RFencedLock)
	count int64 // ≥ 1
	rand  string
	token int64 // RFencedLock's fencing token; 0 before it is written
}

func (h rHold) value() string {
	return h.owner + "|" + string(h.kind) + "|" + strconv.FormatInt(h.count, 10) + "|" + h.rand + "|" + strconv.FormatInt(h.token, 10)
}

// next returns h with its count changed by d and a fresh random part.
func (h rHold) next(d int64) rHold {
	h.count += d
	h.rand = rRand()
	return h
}

// latchRand is the random part of the value an unlock with a latch (one
// client request) writes over v: derived from both, so that every run of
// the same request — Redisson resends it when a reply is late, through
// any connection or proxy — computes the same change, and the masters
// apply it once (RedissonCAS). A change without a latch takes rRand.
func latchRand(v, latchKey string) string {
	h := sha256.Sum256([]byte(v + "\x00" + latchKey))
	return hex.EncodeToString(h[:8])
}

// latchCount is how many of reps hold a latch value (RedissonRead's third
// element).
func latchCount(reps []enginex.MasterReply) int {
	n := 0
	for _, r := range reps {
		if r.Failure() == nil && r.Reply.Type == resp.TypeArray && len(r.Reply.Elems) > 2 && r.Reply.Elems[2].Text() != "" {
			n++
		}
	}
	return n
}

func rRand() string {
	var b [8]byte
	crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// parseHold parses a value of the form rHold.value writes (the fields
// after the owner contain no '|', so the owner is what precedes them).
func parseHold(v string) (rHold, bool) {
	var f [4]string
	for i := 3; i >= 0; i-- {
		j := strings.LastIndexByte(v, '|')
		if j < 0 {
			return rHold{}, false
		}
		f[i], v = v[j+1:], v[:j]
	}
	count, ok1 := parseDigits(f[1])
	token, ok2 := parseDigits(f[3])
	if v == "" || len(f[0]) != 1 || (f[0][0] != 'R' && f[0][0] != 'F') || !ok1 || !ok2 || count < 1 || f[2] == "" {
		return rHold{}, false
	}
	if _, err := hex.DecodeString(f[2]); err != nil {
		return rHold{}, false
	}
	return rHold{owner: v, kind: f[0][0], count: count, rand: f[2], token: token}, true
}

func parseDigits(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	n := int64(0)
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n, true
}

// maxLatchTTL bounds an unlock latch's life on the masters. Redisson sizes
// the latch to outlast its own resends of the unlock, (timeout +
// retryInterval) × retryAttempts: 13.5 s by default, 94.5 s for a 30 s
// timeout. A shorter latch than the client's lets its last resend find
// none and decrement the hold again (property i); ten minutes covers a
// three-minute timeout with three attempts. Latches are small and the
// client's own; a hostile client can keep keys longer with SET NX PX.
const maxLatchTTL = 10 * time.Minute

func msArg(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func strArgs(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// rGrant sends a Redisson script to every master on key's connection as a
// grant for lease: the engine's one grant rule (a TTL over MaxTTL is
// refused; a reply for which yes is true from a master in restart
// quarantine is not an answer).
func (s *Locks) rGrant(ctx context.Context, key string, lease time.Duration, sc *conn.Script, keys []string, argv []string, yes func(resp.Reply) bool) ([]enginex.MasterReply, error) {
	return s.tr.Grant(ctx, key, lease, sc, sc.AppendCall(nil, strArgs(keys...), strArgs(argv...)), yes)
}

// rAsk sends a script that grants nothing (a read, a decrement, a delete)
// with the same rule: no answer of a master in restart quarantine counts
// (it may have lost what it held).
func (s *Locks) rAsk(ctx context.Context, key string, sc *conn.Script, keys []string, argv []string) ([]enginex.MasterReply, error) {
	return s.tr.Ask(ctx, key, s.tr.MasterTimeout(s.eng.Config().MaxTTL), sc, sc.AppendCall(nil, strArgs(keys...), strArgs(argv...)))
}

// rBestEffort sends a cleanup or a revert to every master on key's
// connection (after the attempt's own commands there: FIFO), without
// waiting past the engine's cleanup timeout.
func (s *Locks) rBestEffort(key string, sc *conn.Script, keys []string, argv []string) {
	timeout := s.eng.Config().CleanupTimeout
	ctx, cancel := context.WithTimeout(context.Background(), timeout+10*time.Millisecond)
	defer cancel()
	s.tr.Broadcast(ctx, key, timeout, sc, sc.AppendCall(nil, strArgs(keys...), strArgs(argv...)))
}

// rCreated reports whether a master answered RedissonAcquire with
// {1, …}: it set the key.
func rCreated(r resp.Reply) bool {
	return r.Type == resp.TypeArray && len(r.Elems) > 0 && r.Elems[0].Type == resp.TypeInteger && r.Elems[0].Int == 1
}

func countYes(reps []enginex.MasterReply, yes func(resp.Reply) bool) int {
	n := 0
	for _, r := range reps {
		if r.Err == nil && yes(r.Reply) {
			n++
		}
	}
	return n
}

// rValid reports whether a grant sent at t1 for lease is still valid,
// and marks the reply of the command running with ctx as true only until
// that validity ends (LockReplies.Expire): the grant is answered only
// while it is valid, however long the reply waits for the connection's
// earlier ones.
func (s *Locks) rValid(ctx context.Context, t1 time.Time, lease time.Duration) bool {
	end := t1.Add(lease - s.drift(lease))
	if time.Until(end) <= 0 {
		return false
	}
	s.cfg.Replies.Expire(ctx, end)
	return true
}

// rFenceKey is the engine's fencing counter for key (engine.fenceKeyFor:
// in key's slot on a cluster member).
func (s *Locks) rFenceKey(key string) (string, bool) {
	cfg := s.eng.Config()
	if len(cfg.Clusters) == 0 {
		return cfg.FenceKey, true
	}
	tag := conn.HashTag(key)
	if strings.ContainsAny(tag, "{}") || strings.ContainsAny(cfg.FenceKey, "{}") {
		return "", false
	}
	return cfg.FenceKey + "{" + tag + "}", true
}

// rLatchKey is where the masters keep the latch of an unlock of lockKey
// whose client latch key is latch (…:<request id>): in the lock's slot.
func rLatchKey(lockKey, latch string) string {
	return "redlock:rlatch:{" + conn.HashTag(lockKey) + "}:" + latch[strings.LastIndexByte(latch, ':')+1:]
}

// msgDisagree is the reply when the masters that answered hold no value
// at a quorum: the hold cannot be decided, so no 0, 1 or nil is guessed.
const msgDisagree = "ERR redlock proxy: unavailable: no value of this lock is held by a quorum of masters (a change reached too few of them); retry, or let the lease end"

// rAgreed returns the value of the lock that a quorum of the read replies
// hold ("" for none), and the latch value any of them holds.
func (s *Locks) rAgreed(reps []enginex.MasterReply) (v, latch string, ok bool) {
	counts := map[string]int{}
	for _, r := range reps {
		if r.Failure() != nil || r.Reply.Type != resp.TypeArray || len(r.Reply.Elems) < 2 {
			continue
		}
		e := r.Reply.Elems
		counts[e[0].Text()]++
		if len(e) > 2 && e[2].Text() != "" {
			latch = e[2].Text()
		}
	}
	for v, n := range counts {
		if n >= s.eng.Quorum() {
			return v, latch, true
		}
	}
	return "", latch, false
}

// rRead is the quorum read of key's hold: the value a quorum holds ("" for
// none), or the error reply.
func (s *Locks) rRead(ctx context.Context, key string) (string, []byte) {
	reps, err := s.rAsk(ctx, key, scripts.RedissonRead, []string{key}, nil)
	if err != nil {
		return "", s.engineErr(err)
	}
	if r := s.undecided(reps); r != nil {
		return "", r
	}
	v, _, ok := s.rAgreed(reps)
	if !ok {
		return "", redcon.AppendError(nil, msgDisagree)
	}
	return v, nil
}

// rAcquired is tryLock's reply for a grant.
func rAcquired(dst []byte, rs *Script, token int64) []byte {
	if rs.Kind == KindFencedTryLockToken {
		dst = redcon.AppendArray(dst, 2)
		dst = redcon.AppendInt(dst, -1)
		return redcon.AppendInt(dst, token)
	}
	return redcon.AppendNull(dst)
}

// rTaken is tryLock's reply when another owner holds the lock.
func rTaken(dst []byte, rs *Script, pttl int64) []byte {
	if rs.Kind == KindFencedTryLockToken {
		dst = redcon.AppendArray(dst, 2)
		dst = redcon.AppendInt(dst, pttl)
		return redcon.AppendInt(dst, -1)
	}
	return redcon.AppendInt(dst, pttl)
}

func (s *Locks) rTryLock(ctx context.Context, dst []byte, rs *Script, keys, argv [][]byte) []byte {
	key, owner, lease := string(keys[0]), string(argv[1]), millis(argv[0])
	h := rHold{owner: owner, kind: 'R', count: 1, rand: rRand()}
	rkeys := []string{key}
	if rs.Kind != KindTryLock {
		h.kind = 'F'
		fk, ok := s.rFenceKey(key)
		if !ok {
			return redcon.AppendError(dst, "ERR redlock proxy: "+rs.Name+": a lock whose hash tag contains braces cannot be fenced on a cluster member")
		}
		rkeys = append(rkeys, fk)
	}
	v1 := h.value()
	t1 := time.Now()
	reps, err := s.rGrant(ctx, key, lease, scripts.RedissonAcquire, rkeys, []string{v1, msArg(lease)}, rCreated)
	if err != nil {
		if !errors.Is(err, engine.ErrBadArgument) {
			s.rBestEffort(key, scripts.RedissonCleanup, []string{key}, []string{v1})
		}
		return s.engineErr(err)
	}
	q := s.eng.Quorum()
	yes, fence, pttl := 0, int64(0), int64(-2)
	held := map[string]int{}
	for _, r := range reps {
		if r.Failure() != nil {
			continue
		}
		if rCreated(r.Reply) {
			yes++
			if len(r.Reply.Elems) > 1 {
				fence = max(fence, r.Reply.Elems[1].Int)
			}
		} else if e := r.Reply.Elems; r.Reply.Type == resp.TypeArray && len(e) == 3 {
			held[e[1].Text()]++
			pttl = max(pttl, e[2].Int)
		}
	}
	if yes >= q && s.rValid(ctx, t1, lease) {
		if h.kind == 'R' {
			return rAcquired(dst, rs, 0)
		}
		return s.rFence(ctx, dst, rs, rkeys, h, fence, t1, lease)
	}
	s.rBestEffort(key, scripts.RedissonCleanup, []string{key}, []string{v1})
	if r := s.undecided(reps); r != nil {
		return r
	}
	for v, n := range held {
		if cur, ok := parseHold(v); ok && n >= q && cur.owner == owner {
			if cur.kind != h.kind {
				return redcon.AppendError(dst, "ERR redlock proxy: "+rs.Name+": this owner holds the lock as "+rKindName(cur.kind)+", not as "+rKindName(h.kind)+" (one lock name, one kind)")
			}
			return s.rReenter(ctx, dst, rs, key, cur, lease)
		}
	}
	if yes >= q { // granted, but too late to be valid
		return s.engineErr(engine.ErrGrantedTooLate)
	}
	if pttl == -2 { // nobody holds it where we could not create it: no decision
		return redcon.AppendError(dst, msgDisagree)
	}
	return rTaken(dst, rs, pttl)
}

func rKindName(k byte) string {
	if k == 'F' {
		return "an RFencedLock"
	}
	return "an RLock"
}

// rFence completes an RFencedLock grant from zero: the token is the
// highest counter the granting masters returned; it is written back (the
// counter raised to it, the value rewritten to carry it) at a quorum that
// still holds this attempt's value, as engine.WithFencing does, so that
// every later holder's token is higher.
func (s *Locks) rFence(ctx context.Context, dst []byte, rs *Script, rkeys []string, h rHold, fence int64, t1 time.Time, lease time.Duration) []byte {
	key, v1 := rkeys[0], h.value()
	h.token = fence
	vf := h.value()
	reps, err := s.rGrant(ctx, key, lease, scripts.RedissonFence, rkeys, []string{v1, strconv.FormatInt(fence, 10), vf}, isOne)
	if err == nil && fence > 0 && countYes(reps, isOne) >= s.eng.Quorum() && s.rValid(ctx, t1, lease) {
		return rAcquired(dst, rs, fence)
	}
	s.rBestEffort(key, scripts.RedissonCleanup, []string{key}, []string{v1, vf})
	if err != nil {
		return s.engineErr(err)
	}
	if r := s.undecided(reps); r != nil {
		return r
	}
	return s.engineErr(engine.ErrNotAcquired)
}

// rReenter re-enters cur, the hold a quorum keeps: count+1 by a quorum's
// compare-and-set within validity, else reverted.
func (s *Locks) rReenter(ctx context.Context, dst []byte, rs *Script, key string, cur rHold, lease time.Duration) []byte {
	if cur.kind == 'F' && cur.token == 0 {
		// An RFencedLock value whose token was never written at a
		// quorum: its grant failed, and the value ends at its lease.
		return s.engineErr(engine.ErrNotAcquired)
	}
	nx := cur.next(1)
	t1 := time.Now()
	reps, err := s.rGrant(ctx, key, lease, scripts.RedissonCAS, []string{key}, []string{cur.value(), nx.value(), msArg(lease), "", "0"}, isOne)
	if err == nil && countYes(reps, isOne) >= s.eng.Quorum() && s.rValid(ctx, t1, lease) {
		return rAcquired(dst, rs, nx.token)
	}
	if err == nil || !errors.Is(err, engine.ErrBadArgument) {
		s.rBestEffort(key, scripts.RedissonCAS, []string{key}, []string{nx.value(), cur.value(), "0", "", "0"})
	}
	if err != nil {
		return s.engineErr(err)
	}
	if r := s.undecided(reps); r != nil {
		return r
	}
	return s.engineErr(engine.ErrNotAcquired)
}

func (s *Locks) rUnlock(ctx context.Context, dst []byte, rs *Script, keys, argv [][]byte) []byte {
	rkeys, latchTTL := []string{string(keys[0])}, "0"
	if rs.LatchArg > 0 {
		var bad []byte
		if rkeys, latchTTL, bad = s.unlockLatch(keys[0], keys[2], argv[rs.LatchArg]); bad != nil {
			return append(dst, bad...)
		}
	}
	ch := string(keys[1])
	return s.rUnlockHold(ctx, dst, rkeys, latchTTL, string(argv[2]), millis(argv[1]), nil, func() { s.Wake(ch) })
}

// rUnlockHold is an RLock-style unlock of owner's hold on rkeys[0] (with
// the latch rkeys[1], if any): a quorum read; not this owner's: nil (free:
// free, when set, with released called); count − 1 with the TTL set to
// lease (an extension): 0; count 1: delete, released called, 1.
func (s *Locks) rUnlockHold(ctx context.Context, dst []byte, rkeys []string, latchTTL, owner string, lease time.Duration, free []byte, released func()) []byte {
	key := rkeys[0]
	reps, err := s.rAsk(ctx, key, scripts.RedissonRead, rkeys, nil)
	if err != nil {
		return s.engineErr(err)
	}
	if r := s.undecided(reps); r != nil {
		return r
	}
	v, latch, ok := s.rAgreed(reps)
	if latch != "" {
		// A retried unlock (its first reply was lost): the first one's
		// answer, and no second decrement. A latch on fewer than a quorum
		// means the first one may not have taken effect: answering its
		// result anyway over-counts (the hold ends at its lease), never
		// under-counts.
		n, _ := strconv.ParseInt(latch, 10, 64)
		return redcon.AppendInt(dst, n)
	}
	if !ok {
		return redcon.AppendError(dst, msgDisagree)
	}
	if v == "" && free != nil {
		released()
		if len(rkeys) > 1 {
			// As Redisson's script: the latch is set for a free lock too,
			// so that a resend answers the same, not nil.
			s.rSetLatch(key, rkeys[1], "1", latchTTL)
		}
		return append(dst, free...)
	}
	cur, isHold := parseHold(v)
	if !isHold || cur.owner != owner {
		return redcon.AppendNull(dst) // not this owner's (or free, or expired)
	}
	if cur.count == 1 {
		reps, err = s.rAsk(ctx, key, scripts.RedissonCAS, rkeys, []string{cur.value(), "", "0", "1", latchTTL})
		if err == nil && countYes(reps, isOne) >= s.eng.Quorum() {
			released()
			return redcon.AppendInt(dst, 1)
		}
	} else {
		// Still held: Redisson's unlock resets the lease (pexpire) and
		// answers 0 — an extension, so it obeys the grant rule (the lease
		// at most MaxTTL, no vote from a quarantined master, 0 only
		// within the lease's validity, checked last).
		nx := cur.next(-1)
		if len(rkeys) > 1 {
			nx.rand = latchRand(cur.value(), rkeys[1])
		}
		t1 := time.Now()
		reps, err = s.rGrant(ctx, key, lease, scripts.RedissonCAS, rkeys, []string{cur.value(), nx.value(), msArg(lease), "0", latchTTL, "exact"}, isOne)
		if err == nil && countYes(reps, isOne) >= s.eng.Quorum() && s.rValid(ctx, t1, lease) {
			return redcon.AppendInt(dst, 0)
		}
		// Undo the decrement (and its latch) wherever it landed. A failed
		// delete is not undone: masters that deleted hold no lock, the
		// others keep it to its lease.
		s.rBestEffort(key, scripts.RedissonCAS, rkeys, []string{nx.value(), cur.value(), "0", "", "0"})
		if err == nil && countYes(reps, isOne) >= s.eng.Quorum() {
			return s.engineErr(engine.ErrGrantedTooLate)
		}
	}
	if err != nil {
		return s.engineErr(err)
	}
	if r := s.undecided(reps); r != nil {
		return r
	}
	return redcon.AppendError(dst, msgDisagree)
}

func (s *Locks) rForceUnlock(ctx context.Context, dst []byte, keys [][]byte) []byte {
	ch := string(keys[1])
	return s.rForceUnlockHold(ctx, dst, string(keys[0]), func() { s.Wake(ch) })
}

// rForceUnlockHold ends whatever hold a quorum keeps on key: 1 (released
// called) or 0 when none.
func (s *Locks) rForceUnlockHold(ctx context.Context, dst []byte, key string, released func()) []byte {
	hd, err := s.eng.Holder(ctx, key)
	if err != nil {
		return s.engineErr(err)
	}
	if hd.Token == "" {
		return redcon.AppendInt(dst, 0)
	}
	if err := s.tr.Attach(key, hd.Token, hd.Remaining).Unlock(ctx); err != nil {
		if errors.Is(err, engine.ErrLockLost) && !errors.Is(err, engine.ErrUnavailable) {
			return redcon.AppendInt(dst, 0) // released meanwhile
		}
		return s.engineErr(err)
	}
	released()
	return redcon.AppendInt(dst, 1)
}

// rRenew serves the watchdog's renewal (one lock, or a batch): each lock
// whose value a quorum holds as this owner's hold is extended to the
// lease (concurrently); 1 where a quorum extended it within validity, 0
// otherwise (Redisson then stops renewing it, and the lock ends at its
// lease). Any proxy serves it: it asks the masters, not its memory. (A
// read-write lock's write holder, <id>:<thread>:write, renews with it
// too: a read-write lock holding an entry of the owner is renewed.)
func (s *Locks) rRenew(ctx context.Context, dst []byte, rs *Script, keys, argv [][]byte) []byte {
	items := make([]renewItem, len(keys))
	for i, k := range keys {
		items[i] = renewItem{key: string(k), owners: []string{string(argv[i+1])}, rlock: true}
	}
	res, e := s.renew(ctx, millis(argv[0]), items)
	if e != nil {
		return append(dst, e...) // too few masters answered: no 0 guessed
	}
	if rs.Keys == 1 { // the single-lock script of 3.43.0 and earlier
		return redcon.AppendInt(dst, res[0])
	}
	dst = redcon.AppendArray(dst, len(res))
	for _, v := range res {
		dst = redcon.AppendInt(dst, v)
	}
	return dst
}

// renewItem is one lock of a renewal: renewed where its value is a hold
// of owners[0] (rlock: an RLock or RFencedLock hold), or a read-write
// lock with an entry of one of the owners.
type renewItem struct {
	key    string
	owners []string
	rlock  bool
}

// renew extends each item's lock to lease (concurrently): 1 where a
// quorum extended it within validity, else 0; or the error reply when a
// lock's masters could not tell (too few answered).
func (s *Locks) renew(ctx context.Context, lease time.Duration, items []renewItem) ([]int64, []byte) {
	res := make([]int64, len(items))
	errs := make([][]byte, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Go(func() {
			argv := make([]string, 0, 2+len(it.owners))
			if it.rlock {
				argv = append(argv, it.owners[0], msArg(lease))
			} else {
				argv = append(argv, "", msArg(lease))
			}
			for _, o := range it.owners {
				argv = append(argv, hex.EncodeToString([]byte(o)))
			}
			t1 := time.Now()
			reps, err := s.rGrant(ctx, it.key, lease, scripts.RedissonRenew, []string{it.key}, argv, isOne)
			switch {
			case err != nil:
				errs[i] = s.engineErr(err)
			case countYes(reps, isOne) >= s.eng.Quorum() && s.rValid(ctx, t1, lease):
				res[i] = 1
			default:
				errs[i] = s.undecided(reps)
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return nil, e
		}
	}
	return res, nil
}

// HExists answers Redisson's isHeldByThread (HEXISTS lock owner) and
// HGet its getHoldCount (HGET lock owner) — and a read-write lock's mode
// (HGET lock mode) — from the value a quorum of masters keeps: the
// masters hold plain strings, not Redisson's hashes. (The proxy runs
// them off the reader, so that they follow the connection's earlier
// commands on the key.)
func (s *Locks) HExists(key, field string) Run {
	return func(ctx context.Context, dst []byte) []byte {
		_, found, e := s.rField(ctx, key, field)
		switch {
		case e != nil:
			return e
		case found:
			return redcon.AppendInt(dst, 1)
		}
		return redcon.AppendInt(dst, 0)
	}
}

// HGet: see [Locks.HExists].
func (s *Locks) HGet(key, field string) Run {
	return func(ctx context.Context, dst []byte) []byte {
		v, found, e := s.rField(ctx, key, field)
		switch {
		case e != nil:
			return e
		case found:
			return redcon.AppendBulkString(dst, v)
		}
		return redcon.AppendNull(dst)
	}
}

// rField is field of key's Redisson hash as Redisson would find it, by a
// quorum read: an owner's hold count, or a read-write lock's mode
// ("read" or "write"); found false when absent; or the error reply.
func (s *Locks) rField(ctx context.Context, key, field string) (string, bool, []byte) {
	v, e := s.rRead(ctx, key)
	if e != nil {
		return "", false, e
	}
	if h, ok := parseHold(v); ok {
		if h.owner == field {
			return strconv.FormatInt(h.count, 10), true, nil
		}
	} else if st, ok := parseRW(v); ok {
		if field == "mode" {
			if st.mode == 'w' {
				return "write", true, nil
			}
			return "read", true, nil
		}
		if i := st.find(field); i >= 0 {
			return strconv.FormatInt(st.owners[i].count, 10), true, nil
		}
	}
	return "", false, nil
}

// rNamesFrom returns the lock names a key derived with prefix p (p + ":" +
// name, or p + ":{" + name + "}") can come from: with a braced rest, both
// the braced and the bare name.
func rNamesFrom(rest string) []string {
	names := []string{rest}
	if len(rest) > 2 && rest[0] == '{' && rest[len(rest)-1] == '}' && !strings.ContainsAny(rest[1:len(rest)-1], "{}") {
		names = append(names, rest[1:len(rest)-1])
	}
	return names
}

// IsTokenKey reports whether key (with the proxy's key prefix) is an
// RFencedLock's token key, whose GET [Locks.Token] answers.
func (s *Locks) IsTokenKey(key []byte) bool {
	return strings.HasPrefix(s.unprefixed(key), TokenPrefix)
}

// Token answers RFencedLock.getToken (GET of the lock's token key): the
// fencing token in the value a quorum holds, nil when no RFencedLock hold.
func (s *Locks) Token(ctx context.Context, tokenKey []byte) []byte {
	for _, name := range rNamesFrom(strings.TrimPrefix(s.unprefixed(tokenKey), TokenPrefix)) {
		v, e := s.rRead(ctx, s.cfg.KeyPrefix+name)
		if e != nil {
			return e
		}
		if h, ok := parseHold(v); ok && h.kind == 'F' && h.token > 0 {
			return redcon.AppendBulkString(nil, strconv.FormatInt(h.token, 10))
		}
	}
	return redcon.AppendNull(nil)
}

// DelLatches answers Redisson's DEL of its unlock latches, which it sends
// as soon as an unlock's first reply arrives: how many of the latches
// some master has (rLatchKey). It deletes none: another copy of the same
// unlock request may still be on its way — queued in another proxy, or
// its read held on the wire to the masters — and without the latch it
// would decrement the hold a second time (property i). Each latch ends at
// its TTL (the client's, at most maxLatchTTL).
func (s *Locks) DelLatches(ctx context.Context, keys [][]byte) []byte {
	n := int64(0)
	for _, k := range keys {
		l := s.unprefixed(k)
		rest := strings.TrimPrefix(l, rLatchPrefix)
		i := strings.LastIndexByte(rest, ':')
		if i < 0 {
			continue
		}
		found := false
		for _, name := range rNamesFrom(rest[:i]) {
			lock := s.cfg.KeyPrefix + name
			reps, err := s.tr.Broadcast(ctx, lock, 0, nil, resp.AppendCommandStrings(nil, "EXISTS", rLatchKey(lock, l)))
			if err != nil {
				return s.engineErr(err)
			}
			for _, r := range reps {
				found = found || (r.Err == nil && r.Reply.Type == resp.TypeInteger && r.Reply.Int > 0)
			}
		}
		if found {
			n++
		}
	}
	return redcon.AppendInt(nil, n)
}
