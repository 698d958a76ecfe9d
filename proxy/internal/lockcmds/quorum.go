package lockcmds

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
	"github.com/redlock-dev/redlock/resp"
)

// drift is the engine's allowance, so script acquisitions and SET NX PX
// (engine TryLock) compute validity alike, also with a given Config.Engine.
func (h *Commands) drift(ttl time.Duration) time.Duration { return h.tr.Drift(ttl) }

// libCall runs a recognised library script: as one value that starts
// where the masters' answers complete it when it has such a start — a
// single-key release or extension through the engine (Lock.UnlockAsync,
// Lock.ExtendAsync), as runLib runs it — else runLib on a goroutine.
func (h *Commands) libCall(c *client, ls *LibScript, keys, argv [][]byte) *call {
	if a := h.libEngine(ls, keys, argv); a != nil {
		return c.AsyncCmd(keys, a)
	}
	return c.Async(keys, func(ctx context.Context, dst []byte) []byte { return h.runLib(ctx, dst, ls, keys, argv) })
}

// libEngine is the library call as an engine release or extension that
// can start, or nil: not such a call, or an extension whose TTL runLib
// refuses.
func (h *Commands) libEngine(ls *LibScript, keys, argv [][]byte) *libEngineCall {
	if !ls.Engine || len(keys) != 1 || ls.AddOrReplace || ls.Op == OpAcquire {
		return nil
	}
	a := &libEngineCall{h: h, ls: ls, keys: keys, argv: argv}
	if ls.Op != OpRelease {
		ttl, msg := h.clientTTL(argv[ls.TTLArg], time.Millisecond, "invalid")
		if msg != "" {
			return nil
		}
		a.ttl = ttl
	}
	return a
}

// libEngineCall is a library's single-key release or extension through
// the engine as a respserver.AsyncCommand: its run, start, completion and
// reply in one allocation.
type libEngineCall struct {
	h          *Commands
	ls         *LibScript
	keys, argv [][]byte
	ttl        time.Duration // an extension's
	t1         time.Time     // when an extension started (Start)
	done       respserver.Done
	err        error     // the outcome, for AppendReply
	until      time.Time // when a granted extension's validity ends (Expires)
}

// Expires implements respserver.Expiring: an extension is answered only
// while its validity lasts.
func (a *libEngineCall) Expires() time.Time { return a.until }

// Run runs the script on a goroutine (runLib).
func (a *libEngineCall) Run(ctx context.Context, dst []byte) []byte {
	out, until := a.h.runLibUntil(ctx, dst, a.ls, a.keys, a.argv)
	a.until = until
	return out
}

// Start releases or extends the client's lock, attached by its key and
// token, where the masters' answers complete it.
func (a *libEngineCall) Start(done respserver.Done) {
	a.done = done
	key, token := keyToken(a.keys[0], a.argv[a.ls.TokenArg]) // the attached lock keeps both
	l := a.h.tr.Attach(key, token, a.ttl)
	if a.ls.Op == OpRelease {
		l.UnlockAsync(a.result)
		return
	}
	a.t1 = time.Now()
	l.ExtendAsync(a.ttl, a.result)
}

// result receives the engine's outcome.
func (a *libEngineCall) result(err error) {
	a.err = err
	if err == nil && a.ls.Op == OpExtend {
		a.until = a.t1.Add(a.ttl - a.h.drift(a.ttl))
	}
	a.done.Reply(a)
}

// AppendReply answers the outcome.
func (a *libEngineCall) AppendReply(dst []byte) []byte {
	token := a.argv[a.ls.TokenArg]
	if a.ls.Op == OpRelease {
		return a.h.libReleased(dst, a.ls, a.keys, token, a.err)
	}
	return a.h.libExtended(dst, a.ls, a.keys, token, a.err)
}

// libExtended answers a library's engine extension that ended with err.
// The engine counts and observes the extension, not the end of an
// attached lock.
func (h *Commands) libExtended(dst []byte, ls *LibScript, keys [][]byte, token []byte, err error) []byte {
	if err == nil {
		h.refused.granted(keys[0], token)
	} else if errors.Is(err, engine.ErrLockLost) {
		h.lockLost(err)
	}
	return h.libEngineReply(dst, ls, len(keys), err)
}

// libReleased answers a library's engine release that ended with err.
func (h *Commands) libReleased(dst []byte, ls *LibScript, keys [][]byte, token []byte, err error) []byte {
	h.observeRelease(keys[0], token, err) // the engine does not count an attached lock's
	return h.libEngineReply(dst, ls, len(keys), err)
}

// libEngineReply is a library's reply to an engine release or extension.
func (h *Commands) libEngineReply(dst []byte, ls *LibScript, nkeys int, err error) []byte {
	switch {
	case err == nil:
		return success(dst, ls, nkeys)
	case errors.Is(err, engine.ErrLockLost) && !errors.Is(err, engine.ErrUnavailable):
		return failure(dst, ls)
	}
	return h.engineErr(err)
}

// runLib runs a recognised library script as a quorum operation and
// answers in the library's reply contract.
// The caller checked ls.fits(keys, argv).
func (h *Commands) runLib(ctx context.Context, dst []byte, ls *LibScript, keys, argv [][]byte) []byte {
	out, until := h.runLibUntil(ctx, dst, ls, keys, argv)
	respserver.ExpireReply(ctx, until)
	return out
}

// runLibUntil is runLib, also returning when the grant or extension it
// answers stops being valid (zero: none): its reply is true only until
// then, however long it waits for the connection's earlier replies.
func (h *Commands) runLibUntil(ctx context.Context, dst []byte, ls *LibScript, keys, argv [][]byte) (reply []byte, until time.Time) {
	token := argv[ls.TokenArg]
	var ttl time.Duration
	if ls.TTLArg >= 0 {
		var msg string
		if ttl, msg = h.clientTTL(argv[ls.TTLArg], time.Millisecond, "invalid"); msg == "invalid" || msg == msgNotInteger {
			return redcon.AppendError(nil, "ERR redlock proxy: "+ls.Name+": TTL argument must be a positive integer (ms)"), time.Time{}
		} else if msg != "" {
			return redcon.AppendError(nil, msg), time.Time{}
		}
	}
	if ls.Engine && len(keys) == 1 && (!ls.AddOrReplace || string(argv[2]) == "1") {
		l := h.tr.Attach(string(keys[0]), string(token), ttl)
		if ls.Op == OpRelease {
			return h.libReleased(dst, ls, keys, token, l.Unlock(ctx)), time.Time{}
		}
		t1 := time.Now()
		err := l.Extend(ctx, ttl)
		if err == nil {
			until = t1.Add(ttl - h.drift(ttl))
		}
		return h.libExtended(dst, ls, keys, token, err), until
	}

	sc := ls.script
	var mk *obtainMarks
	if ls.Tells != nil {
		if mk = h.markObtain(keys); mk == nil {
			return redcon.AppendError(nil, msgMarkSlot), time.Time{}
		}
		sc = ls.Tells
	}
	if ls.AddOrReplace { // redis-py's extend adding to the TTL: capped at MaxTTL
		sc, argv = scripts.RedisPyExtendAdd, [][]byte{argv[0], argv[1], strconv.AppendInt(nil, h.eng.Config().MaxTTL.Milliseconds(), 10)}
	}
	var cmd []byte
	if mk != nil {
		cmd = sc.AppendCall(nil, slices.Concat(keys, mk.marks), slices.Concat(argv, [][]byte{mk.nonce}))
	} else {
		cmd = sc.AppendCall(nil, keys, argv)
	}
	t1 := time.Now()
	var reps []enginex.MasterReply
	var err error
	switch ls.Op {
	case OpAcquire:
		if err := ctx.Err(); err != nil { // Close: nothing is sent
			h.observeLib(ls, keys, token, t1, ttl, err, -h.eng.Quorum())
			return h.engineErr(err), time.Time{}
		}
		// The one grant rule (engine): TTL at most MaxTTL, no vote from
		// a master in restart quarantine. Every master's answer is
		// awaited (bounded by the per-master timeout) even when the
		// client goes away: the cleanup needs to know what was created.
		reps, err = h.tr.Grant(context.WithoutCancel(ctx), string(keys[0]), ttl, sc, cmd, func(r resp.Reply) bool { return vote(ls, r, len(keys)) })
		if err == nil && ctx.Err() != nil {
			// Close: the client will not see the answer. A failed attempt
			// is cleaned up (Close keeps the connection open until then);
			// a grant is left to its TTL, as the lock of a client that
			// went away: its value may since be a retry's own.
			h.observeLib(ls, keys, token, t1, ttl, ctx.Err(), -h.eng.Quorum())
			if !h.granted(ls, reps, len(keys), t1, ttl) {
				h.cleanup(ls, keys, token, mk, reps, t1, ttl)
			}
			return h.engineErr(ctx.Err()), time.Time{}
		}
	case OpExtend:
		reps, err = h.tr.Grant(ctx, string(keys[0]), ttl, sc, cmd, func(r resp.Reply) bool { return vote(ls, r, len(keys)) })
	default:
		// A release counts every master's answer (as the engine's); a TTL
		// read none from a master in restart quarantine.
		if ls.Op == OpPTTL {
			reps, err = h.tr.Ask(ctx, string(keys[0]), h.tr.MasterTimeout(ttl), sc, cmd)
		} else {
			reps, err = h.tr.Broadcast(ctx, string(keys[0]), h.tr.MasterTimeout(ttl), sc, cmd)
		}
	}
	if err != nil { // nothing was sent, or an extension's wait ended
		h.observeLib(ls, keys, token, t1, ttl, err, -h.eng.Quorum()) // no grant seen
		return h.engineErr(err), time.Time{}
	}
	q := h.eng.Quorum()
	yes, missing := 0, 0
	for _, r := range reps {
		if r.Err != nil {
			continue
		}
		if vote(ls, r.Reply, len(keys)) {
			yes++
		} else if r.Reply.Type == resp.TypeInteger && r.Reply.Int == -1 {
			missing++
		}
	}
	if r := h.undecided(reps); r != nil {
		h.observeLib(ls, keys, token, t1, ttl, engine.ErrUnavailable, yes-q)
		if ls.Op == OpAcquire {
			h.cleanup(ls, keys, token, mk, reps, t1, ttl)
		}
		return r, time.Time{}
	}
	if ls.Op == OpPTTL {
		return pttlReply(ls, reps, q), time.Time{}
	}
	ok := yes >= q
	if ok && ls.Op != OpRelease {
		ok = ttl-time.Since(t1)-h.drift(ttl) > 0
	}
	if ok {
		h.observeLib(ls, keys, token, t1, ttl, nil, yes-q)
		if ls.Op != OpRelease {
			until = t1.Add(ttl - h.drift(ttl))
		}
		return success(dst, ls, len(keys)), until
	}
	h.observeLib(ls, keys, token, t1, ttl, engine.ErrNotAcquired, yes-q)
	if ls.Op == OpAcquire {
		h.cleanup(ls, keys, token, mk, reps, t1, ttl)
	}
	if ls.Reply == replyRedsync && missing >= q {
		return redcon.AppendInt(nil, -1), time.Time{}
	}
	return failure(dst, ls), time.Time{}
}

// observeLib reports a library script run as a quorum operation on keys
// with token, as the engine reports its own operations (stats.go): an
// acquisition attempt (err nil: acquired; ErrNotAcquired: taken;
// ErrUnavailable: no quorum; a context error), an extension or a release
// (ErrNotAcquired: a quorum answered, fewer than a quorum said yes).
// margin is grants − quorum.
func (h *Commands) observeLib(ls *LibScript, keys [][]byte, token []byte, t1 time.Time, ttl time.Duration, err error, margin int) {
	if ls.Op == OpAcquire {
		h.observeAcquire(keys[0], token, t1, ttl, err, margin)
		return
	}
	// As the engine's Unlock and Extend fail.
	switch {
	case errors.Is(err, engine.ErrUnavailable):
		err = errLostUnavailable
	case errors.Is(err, engine.ErrNotAcquired):
		err = engine.ErrLockLost
	}
	if ls.Op == OpExtend {
		h.observeExtend(keys[0], token, err)
	} else if ls.Op == OpRelease {
		h.observeRelease(keys[0], token, err)
	}
}

var errLostUnavailable = fmt.Errorf("%w: %w", engine.ErrLockLost, engine.ErrUnavailable)

// vote reports whether one master's reply is a yes under ls's contract
// (for a script that tells what it wrote, 1 created or 2 overwrote).
func vote(ls *LibScript, r resp.Reply, nkeys int) bool {
	if ls.Tells != nil {
		return r.Type == resp.TypeInteger && (r.Int == 1 || r.Int == 2)
	}
	switch ls.Reply {
	case replyInt10, replyRedsync:
		return r.Type == resp.TypeInteger && r.Int == 1
	case replyOKNil:
		return r.IsOK()
	case replyNKeys:
		return r.Type == resp.TypeInteger && r.Int == int64(nkeys)
	}
	return false
}

func success(dst []byte, ls *LibScript, nkeys int) []byte {
	switch ls.Reply {
	case replyOKNil:
		return redcon.AppendOK(dst)
	case replyNKeys:
		return redcon.AppendInt(dst, int64(nkeys))
	}
	return redcon.AppendInt(dst, 1)
}

func failure(dst []byte, ls *LibScript) []byte {
	if ls.Reply == replyOKNil {
		return redcon.AppendNull(dst)
	}
	return redcon.AppendInt(dst, 0)
}

// quorumTTL returns the TTL a quorum of masters guarantees: the q-th
// largest positive value (after it, fewer than q masters hold the key).
func quorumTTL(vals []int64, q int) (int64, bool) {
	if len(vals) < q {
		return 0, false
	}
	slices.Sort(vals)
	return vals[len(vals)-q], true
}

func pttlReply(ls *LibScript, reps []enginex.MasterReply, q int) []byte {
	var vals []int64
	for _, r := range reps {
		if r.Err == nil && r.Reply.Type == resp.TypeInteger && r.Reply.Int > 0 {
			vals = append(vals, r.Reply.Int)
		}
	}
	if v, ok := quorumTTL(vals, q); ok {
		return redcon.AppendInt(nil, v)
	}
	if ls.Reply == replyPTTLNeg3 {
		return redcon.AppendInt(nil, -3)
	}
	return redcon.AppendNull(nil)
}

// cleanup undoes a failed library acquisition sent at t1 for ttl: it
// deletes keys holding token on the masters whose reply says this attempt
// created them (a quarantined master's too), waiting at most the engine's
// CleanupTimeout, whatever became of the client's command. It removes
// only what the attempt created (docs/safety.md, the grant rule's (d)):
// the token is the client's, so a master that refused, overwrote the
// client's own lock (bsm/redislock's re-obtain) or did not answer may
// hold a valid earlier lock under it; what a master that did not answer
// may have created expires at its TTL. And only while the attempt's
// validity lasts: a decision that late (the proxy paused, or a per-master
// timeout longer than the TTL) may come after the client gave up and
// took the same value again elsewhere, which a deletion by value would
// remove; the attempt's keys are then left to their TTL.
//
// Every library acquisition marks what it writes (mk), and a key is
// deleted only where its mark is still this attempt's: a client that gave
// up on an attempt still under way (its own timeout), released its value
// and sent it again, through another connection or proxy, may have been
// granted where this attempt had created the key (node-redlock) or by
// overwriting this attempt's writes (bsm/redislock), and a deletion by
// value alone would remove that grant (found by the review of issue #46
// for bsm/redislock, by the review of the marks for the others).
func (h *Commands) cleanup(ls *LibScript, keys [][]byte, token []byte, mk *obtainMarks, reps []enginex.MasterReply, t1 time.Time, ttl time.Duration) {
	if ttl-time.Since(t1)-h.drift(ttl) <= 0 {
		return
	}
	to := func(i int) bool { return created(ls, reps[i], len(keys)) }
	sc := scripts.CleanupMarked
	cmd := sc.AppendCall(nil, slices.Concat(keys, mk.marks), [][]byte{token, mk.nonce})
	timeout := h.eng.Config().CleanupTimeout
	ctx, cancel := context.WithTimeout(context.Background(), timeout+10*time.Millisecond)
	defer cancel()
	h.tr.BroadcastTo(ctx, string(keys[0]), timeout, sc, cmd, to)
}

// obtainMarks are a library acquisition's marks, one per key, and the
// attempt's nonce (LibScript.Tells, scripts.CleanupMarked).
type obtainMarks struct {
	marks [][]byte
	nonce []byte
}

// markPrefix begins the marks' names (reserved: reservedPrefixes).
const markPrefix = scripts.MarkPrefix

// markObtain returns an acquisition's marks and a fresh nonce: each key's
// mark is in the key's slot (scripts.AppendMark) — nil on a Redis Cluster
// member when a key's mark could not share its slot.
func (h *Commands) markObtain(keys [][]byte) *obtainMarks {
	cluster := len(h.eng.Config().Clusters) > 0
	mk := &obtainMarks{marks: make([][]byte, len(keys)), nonce: make([]byte, 32)}
	for i, k := range keys {
		m, ok := scripts.AppendMark(nil, string(k), cluster)
		if !ok {
			return nil
		}
		mk.marks[i] = m
	}
	var raw [16]byte
	rand.Read(raw[:])
	hex.Encode(mk.nonce, raw[:])
	return mk
}

// granted reports whether reps grant a library acquisition: a quorum
// voted yes within the validity.
func (h *Commands) granted(ls *LibScript, reps []enginex.MasterReply, nkeys int, t1 time.Time, ttl time.Duration) bool {
	yes := 0
	for _, r := range reps {
		if r.Err == nil && vote(ls, r.Reply, nkeys) {
			yes++
		}
	}
	return yes >= h.eng.Quorum() && ttl-time.Since(t1)-h.drift(ttl) > 0
}

// created reports whether a master's reply to a library acquisition says
// it created the keys: the vote, or 1 from a script that tells (Tells).
// A quarantined master's grant counts (what it wrote is there).
func created(ls *LibScript, r enginex.MasterReply, nkeys int) bool {
	if r.Err != nil && !errors.Is(r.Err, engine.ErrQuarantined) {
		return false
	}
	if ls.Tells != nil {
		return r.Reply.Type == resp.TypeInteger && r.Reply.Int == 1
	}
	return vote(ls, r.Reply, nkeys)
}

// undecided returns the unavailable error reply when fewer than a quorum
// of masters answered a quorum read or write (nil when enough did): as
// for SET NX PX, "cannot decide" is an error, never a nil or a 0. An error
// reply (-LOADING, -NOREPLICAS, -OOM, …) is not an answer, as in the
// engine.
func (h *Commands) undecided(reps []enginex.MasterReply) []byte {
	answered, quarantined := 0, 0
	for _, r := range reps {
		switch err := r.Failure(); {
		case err == nil:
			answered++
		case errors.Is(err, engine.ErrQuarantined):
			quarantined++
		}
	}
	if q := h.eng.Quorum(); answered < q {
		// The whole story, with addresses and the masters' own texts, for
		// the operator's log (the client's reply has neither).
		addrs := h.eng.Masters()
		var b strings.Builder
		for i, r := range reps {
			if err := r.Failure(); err != nil && i < len(addrs) {
				fmt.Fprintf(&b, "; master %d (%s): %v", i, addrs[i], err)
			}
		}
		h.srv.LogBackend("proxy: too few masters answered", "answered", answered, "quorum", q, "failures", strings.TrimPrefix(b.String(), "; "))
		return h.unavailableReply(answered+quarantined, quarantined, len(reps), q, masterFailures(nil, reps))
	}
	return nil
}

// get answers GET with the value a quorum of masters holds, else nil. Like
// every quorum read here (tr.Ask), it counts no answer from a master in
// restart quarantine: one restarted empty says "no key" for a lock a
// quorum may still hold.
func (h *Commands) get(ctx context.Context, key []byte) []byte {
	reps, err := h.tr.Ask(ctx, string(key), 0, nil, appendCmd("GET", key))
	if err != nil {
		return h.engineErr(err)
	}
	if r := h.undecided(reps); r != nil {
		return r
	}
	counts := map[string]int{}
	for _, r := range reps {
		if r.Err == nil && r.Reply.Type == resp.TypeBulkString {
			counts[string(r.Reply.Str)]++
			if counts[string(r.Reply.Str)] >= h.eng.Quorum() {
				return redcon.AppendBulk(nil, r.Reply.Str)
			}
		}
	}
	return redcon.AppendNull(nil)
}

// pttl answers PTTL with the TTL a quorum guarantees; -1 when a quorum
// holds the key without TTL; -2 otherwise.
func (h *Commands) pttl(ctx context.Context, key []byte) []byte {
	reps, err := h.tr.Ask(ctx, string(key), 0, nil, appendCmd("PTTL", key))
	if err != nil {
		return h.engineErr(err)
	}
	if r := h.undecided(reps); r != nil {
		return r
	}
	var vals []int64
	noTTL := 0
	for _, r := range reps {
		if r.Err == nil && r.Reply.Type == resp.TypeInteger {
			switch {
			case r.Reply.Int > 0:
				vals = append(vals, r.Reply.Int)
			case r.Reply.Int == -1:
				noTTL++
			}
		}
	}
	q := h.eng.Quorum()
	if v, ok := quorumTTL(vals, q); ok {
		return redcon.AppendInt(nil, v)
	}
	if noTTL >= q {
		return redcon.AppendInt(nil, -1)
	}
	return redcon.AppendInt(nil, -2)
}

// ttl answers TTL: pttl's answer in seconds, rounded to the nearest as
// Redis does; -1 and -2 (and errors) as pttl's.
func (h *Commands) ttl(ctx context.Context, key []byte) []byte {
	out := h.pttl(ctx, key)
	if n, ok := resp.ParseInt(bytes.TrimSuffix(bytes.TrimPrefix(out, []byte(":")), []byte("\r\n"))); ok && out[0] == ':' && n > 0 {
		return redcon.AppendInt(nil, (n+500)/1000)
	}
	return out
}

// countKeys answers EXISTS and DEL: the number of keys for which a quorum
// of masters answered 1 (existed / was deleted). DEL deletes on every
// master it reaches regardless.
func (h *Commands) countKeys(ctx context.Context, name string, keys [][]byte) []byte {
	cmdName := "EXISTS"
	if name == "del" {
		cmdName = "DEL"
	}
	n := 0
	for _, k := range keys {
		reps, err := h.tr.Ask(ctx, string(k), 0, nil, appendCmd(cmdName, k))
		if err != nil {
			return h.engineErr(err)
		}
		if r := h.undecided(reps); r != nil {
			return r
		}
		if countOnes(reps) >= h.eng.Quorum() {
			n++
		}
	}
	return redcon.AppendInt(nil, int64(n))
}

// isOne reports whether r is the integer 1.
func isOne(r resp.Reply) bool { return r.Type == resp.TypeInteger && r.Int == 1 }

func countOnes(reps []enginex.MasterReply) int {
	n := 0
	for _, r := range reps {
		if r.Err == nil && r.Reply.Type == resp.TypeInteger && r.Reply.Int == 1 {
			n++
		}
	}
	return n
}

// pexpire answers PEXPIRE: 1 when a quorum of masters set the TTL within
// its validity. It can extend a lock, so it obeys the grant rule
// (tr.Grant; the validity checked last, as for every extension).
func (h *Commands) pexpire(ctx context.Context, key []byte, ms int64) []byte {
	ttl := time.Duration(ms) * time.Millisecond
	t1 := time.Now()
	// The masters get the TTL that Grant checks, not the client's text.
	reps, err := h.tr.Grant(ctx, string(key), ttl, nil, appendCmd("PEXPIRE", key, strconv.AppendInt(nil, ttl.Milliseconds(), 10)), isOne)
	if err != nil {
		return h.engineErr(err)
	}
	if r := h.undecided(reps); r != nil {
		return r
	}
	if countOnes(reps) >= h.eng.Quorum() && ttl-time.Since(t1)-h.drift(ttl) > 0 {
		respserver.ExpireReply(ctx, t1.Add(ttl-h.drift(ttl)))
		return redcon.AppendInt(nil, 1)
	}
	return redcon.AppendInt(nil, 0)
}

// appendCmd encodes a command from a name and byte arguments.
func appendCmd(name string, args ...[]byte) []byte {
	dst := resp.AppendArrayHeader(nil, 1+len(args))
	dst = resp.AppendBulkString(dst, name)
	for _, a := range args {
		dst = resp.AppendBulk(dst, a)
	}
	return dst
}
