package lockcmds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/proxy/internal/redisson"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
	"github.com/redlock-dev/redlock/resp"
)

// Lock commands: SET NX PX, the recognised lock scripts, and quorum reads.

// cmdSet accepts SET key value NX PX ms | NX EX s (any order, any case).
func (h *Commands) cmdSet(c *client, args [][]byte) *call {
	for _, a := range args[3:] {
		if len(a) == 4 && bytes.EqualFold(a, ifeqOpt) {
			return h.setIfEq(c, args) // an extension (native.go)
		}
	}
	var nx bool
	var ttl time.Duration
	for i := 3; i < len(args); i++ {
		switch opt := respserver.Lower(args[i]); opt {
		case "nx":
			if nx {
				return respserver.ErrCall(msgSyntax)
			}
			nx = true
		case "px", "ex":
			var bad *call
			if ttl, bad = h.expireOpt(opt, args, i, ttl); bad != nil {
				return bad
			}
			i++
		default:
			return respserver.ErrCall(msgSetForm)
		}
	}
	if nx && ttl == 0 {
		return respserver.ErrCall(msgSetNoTTL)
	}
	if !nx {
		return respserver.ErrCall(msgSetForm)
	}
	return h.acquire(c, args, ttl, false)
}

// expireOpt reads SET's PX or EX option at args[i] (opt "px", "ex"),
// given the TTL read so far: a second one, or one without its argument, is
// a syntax error.
func (h *Commands) expireOpt(opt string, args [][]byte, i int, ttl time.Duration) (time.Duration, *call) {
	if ttl != 0 || i+1 >= len(args) {
		return 0, respserver.ErrCall(msgSyntax)
	}
	return h.setExpire(opt, args[i+1])
}

// setExpire reads SET's PX milliseconds or EX seconds (opt "px", "ex");
// bad is the reply when the proxy does not take it (clientTTL).
func (h *Commands) setExpire(opt string, arg []byte) (ttl time.Duration, bad *call) {
	unit := time.Millisecond
	if opt == "ex" {
		unit = time.Second
	}
	ttl, msg := h.clientTTL(arg, unit, msgBadExpire)
	if msg != "" {
		return 0, respserver.ErrCall(msg)
	}
	return ttl, nil
}

// maxClientMs is the largest TTL in milliseconds handed to the engine
// (its nanoseconds fit a time.Duration): far above any MaxTTL.
const maxClientMs = int64(1<<62) / int64(time.Millisecond)

// clientTTL reads a TTL a client sent, n in unit (ms or s), as Redis
// would, and returns it, or the error message: not an integer, Redis's
// own; n ≤ 0, or so large that Redis itself refuses it (its expiry in
// Unix milliseconds past int64), invalid (Redis's message for the
// command); any TTL Redis takes, however large, is passed on, and one over
// --max-ttl gets the --max-ttl refusal (the engine's, or here when it does
// not fit a time.Duration).
func (h *Commands) clientTTL(arg []byte, unit time.Duration, invalid string) (time.Duration, string) {
	n, ok := resp.ParseInt(arg)
	if !ok {
		return 0, msgNotInteger
	}
	perMs := int64(unit / time.Millisecond)
	if n <= 0 || n > math.MaxInt64/perMs || n*perMs > math.MaxInt64-time.Now().UnixMilli() {
		return 0, invalid
	}
	ms := n * perMs
	if ms > maxClientMs {
		cfg := h.eng.Config()
		return 0, fmt.Sprintf("ERR redlock proxy: invalid argument: ttl %d ms is longer than the maximum TTL %v: raise %s, or use a shorter TTL", ms, cfg.MaxTTL, cfg.Names.MaxTTL)
	}
	return time.Duration(ms) * time.Millisecond, ""
}

// acquire runs a quorum acquisition of key args[1] with the client's value
// args[2] as the token (and a fencing token when fenced): +OK (fenced: the
// token as an integer), nil when held, else the engine's error reply.
func (h *Commands) acquire(c *client, args [][]byte, ttl time.Duration, fenced bool) *call {
	if len(args[2]) == 0 {
		return respserver.ErrCall("ERR redlock proxy: the lock value (token) must not be empty")
	}
	key, token := keyToken(args[1], args[2])
	a := &setAcquire{h: h, args: args, key: key, ttl: ttl, fenced: fenced}
	a.opts[0], a.nopts = engine.WithToken(token), 1
	if fenced {
		a.opts[1], a.nopts = engine.WithFencing(), 2
	}
	return c.AsyncCmd(args[1:2], a)
}

// keyToken is a client's key and token as strings the engine keeps, in
// one allocation.
func keyToken(key, token []byte) (string, string) {
	kt := string(key) + string(token)
	return kt[:len(key)], kt[len(key):]
}

// setAcquire is one SET NX PX (or REDLOCK.LOCK) as a
// respserver.AsyncCommand: its run, its start, its completion and its
// reply in one allocation.
type setAcquire struct {
	h      *Commands
	args   [][]byte
	key    string
	opts   [2]engine.Option // the client's token, and WithFencing when fenced
	nopts  int
	ttl    time.Duration
	fenced bool
	done   respserver.Done // Start's
	l      *engine.Lock    // the result, for AppendReply
	err    error
}

// Run acquires on a goroutine.
func (a *setAcquire) Run(ctx context.Context, dst []byte) []byte {
	a.l, a.err = a.h.eng.TryLock(ctx, a.key, a.ttl, a.opts[:a.nopts]...)
	return a.AppendReply(dst)
}

// Start acquires where the masters' answers complete it. No context:
// every engine operation ends by its per-master deadlines (Run gets the
// server's, which Close cancels).
func (a *setAcquire) Start(done respserver.Done) {
	a.done = done
	a.h.eng.TryLockAsync(context.Background(), a.key, a.ttl, a.result, a.opts[:a.nopts]...)
}

// result receives TryLockAsync's outcome.
func (a *setAcquire) result(l *engine.Lock, err error) {
	a.l, a.err = l, err
	a.done.Reply(a)
}

// Expires implements respserver.Expiring: a grant is answered only while
// the lock is valid.
func (a *setAcquire) Expires() time.Time {
	if a.err != nil || a.l == nil {
		return time.Time{}
	}
	return a.l.Until()
}

// AppendReply answers the outcome (the refusal log learns it first).
func (a *setAcquire) AppendReply(dst []byte) []byte {
	h, args, l, err := a.h, a.args, a.l, a.err
	if err == nil {
		h.refused.granted(args[1], args[2])
	} else {
		h.refused.refused(args[1], args[2]) // its release is a cleanup
	}
	switch {
	case err == nil && a.fenced:
		return redcon.AppendInt(dst, l.FencingToken())
	case err == nil:
		return redcon.AppendOK(dst)
	case errors.Is(err, engine.ErrNotAcquired):
		return redcon.AppendNull(dst)
	}
	return h.engineErr(err)
}

// cmdRedlockLock is REDLOCK.LOCK key value ttl-ms: a Redlock acquire of key
// with token value that also takes a fencing token (engine.WithFencing).
// It answers the fencing token as an integer, nil when the key is held, or
// the unavailable error. Release and extend as for SET NX PX (the
// compare-and-delete / compare-and-pexpire scripts on key and value).
func (h *Commands) cmdRedlockLock(c *client, args [][]byte) *call {
	ttl, msg := h.clientTTL(args[3], time.Millisecond, "ERR invalid expire time in 'redlock.lock' command")
	if msg != "" {
		return respserver.ErrCall(msg)
	}
	return h.acquire(c, args, ttl, true)
}

// fenceCheck refuses script keys that name the fencing counter.
func (h *Commands) fenceCheck(c *client, keys [][]byte) *call {
	for _, k := range keys {
		if cl := h.reservedKey(k); cl != nil {
			return cl
		}
	}
	return nil
}

// reservedPrefixes name the keys the engine and the proxy keep beside a
// lock (a fair lock's queue, an election's leader record, an unlock
// latch, an obtain's mark): a client that took a lock on one could block that lock's
// commands (a fair lock's queue held as a string answers WRONGTYPE).
var reservedPrefixes = []string{"redlock:fair:", "redlock:leader:", "redlock:rlatch:", markPrefix}

// reservedKey refuses a key that is a fencing counter or one of the
// side keys kept beside a lock (nil: a client's key).
func (h *Commands) reservedKey(k []byte) *call {
	if h.isFenceKey(k) {
		return respserver.ErrCall(msgFenceKey)
	}
	for _, p := range reservedPrefixes {
		if len(k) >= len(p) && string(k[:len(p)]) == p {
			return respserver.ErrCall(msgReservedKey)
		}
	}
	return nil
}

// isFenceKey reports whether k names a fencing counter: the masters' one,
// or one of the per-key counters FenceKey{tag} used with Redis Cluster
// members.
func (h *Commands) isFenceKey(k []byte) bool {
	return string(k) == h.fenceKey || (len(k) > len(h.fenceKey) && string(k[:len(h.fenceKey)]) == h.fenceKey && k[len(h.fenceKey)] == '{')
}

// unavailableReply is the error a client gets when too few masters
// answered to decide: never the nil of "held". answered counts the masters
// that answered, quarantined those of them in restart quarantine (their
// grants do not count); failures says which masters did not vote and why
// (masterFailures). With masters in quarantine it says when a quorum
// votes and, where it could be true, how to declare fresh masters.
func (h *Commands) unavailableReply(answered, quarantined, total, quorum int, failures string) []byte {
	msg := fmt.Sprintf("ERR redlock proxy: unavailable: %d/%d masters answered, quorum %d", answered, total, quorum)
	if quarantined > 0 {
		msg = fmt.Sprintf("ERR redlock proxy: unavailable: %d/%d masters answered, %d of them in restart quarantine (their grants do not count yet), quorum %d",
			answered, total, quarantined, quorum)
		at, hint := h.eng.QuarantineOutlook()
		if !at.IsZero() {
			msg += fmt.Sprintf("; a quorum votes from %s (in %s)", at.UTC().Format(time.RFC3339), time.Until(at).Round(time.Second))
		}
		if hint != "" {
			msg += "; " + hint
		}
	}
	if failures != "" {
		msg += " (" + failures + ")"
	}
	return redcon.AppendError(nil, msg)
}

// engineErr turns an engine error other than the expected outcomes into an
// error reply. The reply names masters by index and failures by kind —
// stable for clients to read, and never a master's own message (a
// master's -WRONGPASS must not read as the client's); the whole error,
// with addresses, goes to the log, for every failed command (rate-limited:
// respserver.LogBurst lines per LogWindow, a client's bad arguments on the clients'
// budget). (INFO masters, the operator's view, maps indexes to addresses
// for authenticated clients.)
//
// "command timed out" is the caller's own deadline only: a master that
// cannot be reached (a refused dial, or one that times out because its
// address drops packets) is "not connected" inside the unavailable
// error, since conn's errors never match context.DeadlineExceeded
// (conn.ErrConnectTimeout).
func (h *Commands) engineErr(err error) []byte {
	if errors.Is(err, engine.ErrBadArgument) {
		h.srv.LogClient("proxy: command failed", "err", err)
		return redcon.AppendError(nil, "ERR redlock proxy: "+strings.TrimPrefix(err.Error(), "engine: "))
	}
	h.srv.LogBackend("proxy: command failed", "err", err)
	if errors.Is(err, engine.ErrMisconfigured) {
		// The masters refuse for good (an ACL rule, credentials): not an
		// outage for the client to retry; the message names the master,
		// the command refused and the fix.
		return redcon.AppendError(nil, "ERR redlock proxy: "+oneLine(strings.TrimPrefix(err.Error(), "engine: ")))
	}
	var qe *engine.QuorumError
	switch {
	case errors.Is(err, engine.ErrClosed), errors.Is(err, context.Canceled):
		return redcon.AppendError(nil, msgShuttingDown)
	case errors.Is(err, context.DeadlineExceeded):
		return redcon.AppendError(nil, "ERR redlock proxy: command timed out")
	}
	switch {
	case errors.As(err, &qe) && errors.Is(err, engine.ErrUnavailable):
		return h.unavailableReply(qe.Answered, qe.Quarantined, qe.Total, qe.Quorum, masterFailures(qe, nil))
	case errors.As(err, &qe):
		return redcon.AppendError(nil, fmt.Sprintf("ERR redlock proxy: %s failed: %d/%d masters granted, quorum %d (%s)",
			qe.Op, qe.Granted, qe.Total, qe.Quorum, masterFailures(qe, nil)))
	}
	for _, known := range []error{engine.ErrGrantedTooLate, engine.ErrTooManyExtensions, engine.ErrLockLost, engine.ErrNotAcquired} {
		if errors.Is(err, known) {
			return redcon.AppendError(nil, "ERR redlock proxy: "+strings.TrimPrefix(known.Error(), "engine: "))
		}
	}
	return redcon.AppendError(nil, "ERR redlock proxy: internal error (see the proxy's log)")
}

// masterFailures describes for a client which masters failed and how —
// "master 2: timed out; master 4: not connected" — from a QuorumError's
// per-master errors or a broadcast's replies (indexed by master).
func masterFailures(qe *engine.QuorumError, reps []enginex.MasterReply) string {
	var b strings.Builder
	add := func(i int, err error) {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "master %d: %s", i, failureKind(err))
	}
	if qe != nil {
		for _, err := range qe.Masters {
			if me := (*engine.MasterError)(nil); errors.As(err, &me) {
				add(me.Master, me.Err)
			}
		}
	}
	for i, r := range reps {
		if err := r.Failure(); err != nil {
			add(i, err)
		}
	}
	return b.String()
}

// failureKind names the kind of a master's failure, without its details.
func failureKind(err error) string {
	var re *resp.Error
	switch {
	case errors.Is(err, conn.ErrTimeout):
		return "timed out"
	case errors.Is(err, conn.ErrStalled):
		return "stalled"
	case errors.Is(err, conn.ErrAuth):
		return "refused the proxy's credentials"
	case errors.Is(err, conn.ErrOverloaded):
		return "too many requests pending"
	case errors.Is(err, conn.ErrDown), errors.Is(err, conn.ErrBroken), errors.Is(err, conn.ErrClosed):
		return "not connected"
	case errors.Is(err, engine.ErrQuarantined):
		if qe := (*engine.QuarantineError)(nil); errors.As(err, &qe) {
			return "in restart quarantine until " + qe.Until.UTC().Format(time.RFC3339)
		}
		return "in restart quarantine"
	case errors.Is(err, engine.ErrHeld):
		return "held"
	case errors.Is(err, engine.ErrNotHeld):
		return "not held"
	case errors.As(err, &re) && re.Prefix() != "":
		return re.Prefix() + " error reply"
	}
	return "failed"
}

func (h *Commands) cmdGet(c *client, args [][]byte) *call {
	key := args[1]
	if r := h.redisson; r.IsTokenKey(key) {
		// RFencedLock.getToken: the fencing token in the hold a quorum of
		// masters keeps (the Redisson room); nil when none.
		return c.Async(args[1:2], func(ctx context.Context, _ []byte) []byte { return r.Token(ctx, key) })
	}
	return c.Async(args[1:2], func(ctx context.Context, _ []byte) []byte { return h.get(ctx, key) })
}

func (h *Commands) cmdPTTL(c *client, args [][]byte) *call {
	key := args[1]
	return c.Async(args[1:2], func(ctx context.Context, _ []byte) []byte { return h.pttl(ctx, key) })
}

// cmdTTL is PTTL's answer in seconds, rounded as Redis rounds it.
func (h *Commands) cmdTTL(c *client, args [][]byte) *call {
	key := args[1]
	return c.Async(args[1:2], func(ctx context.Context, _ []byte) []byte { return h.ttl(ctx, key) })
}

// cmdCountKeys runs EXISTS and DEL.
func (h *Commands) cmdCountKeys(c *client, args [][]byte) *call {
	name, keys := respserver.Lower(args[0]), args[1:]
	if r := h.redisson; name == "del" && r.LatchKeys(keys) {
		// Redisson's DEL of its unlock latches after an unlock: the
		// latches are kept under the proxy's names (the Redisson room),
		// answered and kept to their TTL (a copy may be in flight).
		return c.Async(keys, func(ctx context.Context, _ []byte) []byte { return r.DelLatches(ctx, keys) })
	}
	if name == "del" && !h.cfg.AllowTokenlessWrites {
		return respserver.ErrCall(msgTokenless("DEL", "compare-and-delete (release)"))
	}
	return c.Async(keys, func(ctx context.Context, _ []byte) []byte { return h.countKeys(ctx, name, keys) })
}

func (h *Commands) cmdPExpire(c *client, args [][]byte) *call {
	if !h.cfg.AllowTokenlessWrites {
		return respserver.ErrCall(msgTokenless("PEXPIRE", "compare-and-pexpire (extend)"))
	}
	ttl, msg := h.clientTTL(args[2], time.Millisecond, "ERR invalid expire time in 'pexpire' command (the proxy accepts positive values only)")
	if msg != "" {
		return respserver.ErrCall(msg)
	}
	key, ms := args[1], ttl.Milliseconds()
	return c.Async(args[1:2], func(ctx context.Context, _ []byte) []byte { return h.pexpire(ctx, key, ms) })
}

// scriptArgs splits EVAL/EVALSHA/FCALL arguments: name-or-sha numkeys
// keys... args... .
func scriptArgs(args [][]byte) (keys, argv [][]byte, bad *call) {
	nkeys, ok := resp.ParseInt(args[2])
	switch {
	case !ok:
		return nil, nil, respserver.ErrCall(msgNotInteger)
	case nkeys < 0:
		return nil, nil, respserver.ErrCall("ERR Number of keys can't be negative")
	case nkeys > int64(len(args)-3):
		return nil, nil, respserver.ErrCall("ERR Number of keys can't be greater than number of args")
	}
	return args[3 : 3+nkeys], args[3+nkeys:], nil
}

// cmdEval handles EVAL script numkeys ... and EVALSHA sha numkeys ... . A
// recognised lock script becomes a quorum operation; any other script is
// refused unless the operator opted in (passthrough.go).
func (h *Commands) cmdEval(c *client, args [][]byte) *call {
	keys, argv, bad := scriptArgs(args)
	if bad == nil {
		bad = h.fenceCheck(c, keys)
	}
	if bad != nil {
		return bad
	}
	name := respserver.Lower(args[0])
	var sha string
	if name == "eval" {
		sha = scripts.SHA1(args[1])
	} else {
		sha = strings.ToLower(string(args[1]))
	}
	if rs := redisson.BySHA[sha]; rs != nil {
		return h.runRedisson(c, rs, keys, argv)
	}
	if what := redisson.Refused[sha]; what != "" {
		return respserver.ErrCall(redisson.RefusedMsg(what))
	}
	if ls := LibBySHA[sha]; ls != nil {
		if why := ls.misfit(keys, argv); why != "" {
			if !h.cfg.AllowScripts {
				if strings.HasPrefix(why, "called") {
					return respserver.ErrCall("ERR redlock proxy: " + ls.Name + " " + why + "; " + msgScriptsOff)
				}
				return respserver.ErrCall("ERR redlock proxy: " + ls.Name + ": " + why)
			}
			return h.passthrough(c, ls.script, keys, argv)
		}
		return h.libCall(c, ls, keys, argv)
	}
	if !h.cfg.AllowScripts {
		return respserver.ErrCall("ERR redlock proxy: not a recognised lock script; " + msgScriptsOff)
	}
	sc := h.scripts.get(sha)
	if sc == nil {
		if name == "evalsha" {
			return respserver.ErrCall(msgNoScript)
		}
		sc = h.scripts.put(args[1])
	}
	return h.passthrough(c, sc, keys, argv)
}

func (h *Commands) cmdScript(c *client, args [][]byte) *call {
	switch respserver.Lower(args[1]) {
	case "load":
		if len(args) != 3 {
			return respserver.ArityErr("script|load")
		}
		sha := scripts.SHA1(args[2])
		if what := redisson.Refused[sha]; what != "" {
			return respserver.ErrCall(redisson.RefusedMsg(what))
		}
		if LibBySHA[sha] == nil && redisson.BySHA[sha] == nil {
			if !h.cfg.AllowScripts {
				return respserver.ErrCall("ERR redlock proxy: not a recognised lock script; " + msgScriptsOff)
			}
			h.scripts.put(args[2])
		}
		return respserver.Reply(redcon.AppendBulkString(nil, sha))
	case "exists":
		if len(args) < 3 {
			return respserver.ArityErr("script|exists")
		}
		out := redcon.AppendArray(nil, len(args)-2)
		for _, a := range args[2:] {
			v := 0
			if h.scripts.exists(string(a)) {
				v = 1
			}
			out = redcon.AppendInt(out, int64(v))
		}
		return respserver.Reply(out)
	case "flush":
		if len(args) > 3 || (len(args) == 3 && respserver.Lower(args[2]) != "sync" && respserver.Lower(args[2]) != "async") {
			return respserver.ErrCall(msgSyntax)
		}
		h.scripts.flush()
		return respserver.Reply(redcon.AppendOK(nil))
	}
	return respserver.ErrCall("ERR unknown or unsupported command 'SCRIPT " + respserver.Sub(args) + "'")
}

// oneLine makes msg fit an error reply (no CR or LF).
func oneLine(msg string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(msg)
}
