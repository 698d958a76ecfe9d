package engine

import (
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

// The FIFO hand-off in one round trip: when a lock of this engine is
// unlocked while a Lock call of this engine waits for its key, the
// holder's release and the waiter's acquire go to each master as one
// script (scripts.HandOff): the key passes from the holder's token to the
// waiter's where it still holds the holder's, or is taken where it is
// free, and is left alone where another holder has it. Each master's one
// answer is split into the two answers the two separate commands would
// have given — the release's (1 where the holder's token was deleted, else
// 0) and the SET NX's (OK where the waiter's token was written, else nil)
// — and each goes to its own op, which counts, decides and cleans up
// exactly as for the two commands sent one behind the other on the same
// connection (docs/algorithm.md, "Waiting"; docs/safety.md, "The grant
// rule"): the waiter's validity counts from the send, a quorum of grants
// (no quarantined master's) inside it grants, the batch's clock check
// guards both, and a refused attempt releases its own token, never the
// holder's.

// handOff is one master's request of a hand-off: rel is the holder's
// release op, acq the waiter's acquire op.
type handOff struct{ rel, acq *op }

var _ conn.Callback = (*handOff)(nil)

var (
	replyReleased = resp.Reply{Type: resp.TypeInteger, Int: 1}
	replyNotHeld  = resp.Reply{Type: resp.TypeInteger, Int: 0}
	replyOK       = resp.Reply{Type: resp.TypeSimpleString, Str: []byte("OK")}
	replyNil      = resp.Reply{Type: resp.TypeNull}
)

// Complete implements [conn.Callback]: the script's answer (or the
// request's failure) as the release's and the acquire's.
func (h *handOff) Complete(tag uint64, r resp.Reply, err error) {
	rel, acq := r, r // an error reply or a failure: the same for both
	if err == nil && r.Type == resp.TypeInteger {
		rel, acq = replyNotHeld, replyNil
		if r.Int == 1 {
			rel = replyReleased
		}
		if r.Int == 1 || r.Int == 2 {
			acq = replyOK
		}
	}
	h.rel.Complete(tag, rel, err)
	h.acq.Complete(tag, acq, err)
}

// canHandOff reports whether the release of l and an acquisition with co
// can go as one script: a plain lock's release and a plain acquire (no
// fencing, read or write lock, fair lock or caller's token), and a
// first release (a retried Unlock's presets say which masters to skip).
func canHandOff(l *Lock, rel *op, co callOpts) bool {
	return !l.read && !rel.retry && !co.fencing && co.fair == nil && co.rw == rwNone && co.token == ""
}

// sendHandOff sends the release op rel (of lock l, by deadline) and the
// prepared acquisition a of l's key (collected with finish) as one script
// per master.
func (e *Engine) sendHandOff(l *Lock, rel *op, deadline time.Time, a *acquisition) {
	acq := a.o
	// One command for both: key, the holder's token, the waiter's, its TTL.
	rel.merge = nil
	rel.cmd = scripts.HandOff.AppendEvalSha(rel.cmd[:0], 1, 3)
	rel.cmd = resp.AppendBulkString(rel.cmd, l.key)
	rel.cmd = resp.AppendBulkString(rel.cmd, l.token)
	rel.cmd = resp.AppendBulkString(rel.cmd, a.l.token)
	rel.cmd = resp.AppendBulkInt(rel.cmd, a.ttl.Milliseconds())
	h := &handOff{rel: rel, acq: acq}
	t1 := time.Now()
	acq.t1, a.t1 = t1, t1
	if e.obs != nil && rel.t1.IsZero() {
		rel.t1 = t1
	}
	// The one request waits for the later of the two per-master
	// deadlines, never the earlier: the waiter's short timeout must not
	// fail a release its master executes within the release's own
	// timeout (Unlock would report ErrUnavailable for a release that
	// happened), nor the release's short one an acquire answered within
	// the waiter's. An answer past an op's own timeout is still the
	// master's answer: a release that ran, an acquire whose grant is
	// judged by its validity from the send (verdict, checked last).
	if d := t1.Add(a.mt); d.After(deadline) {
		deadline = d
	}
	for j := 0; j < e.n; j++ {
		i := rel.first + j
		if i >= e.n {
			i -= e.n
		}
		req := conn.Request{Cmd: rel.cmd, Deadline: deadline, Callback: h, Tag: uint64(i), Script: scripts.HandOff, Stable: true, KeyHash: rel.khash, Key: rel.key}
		if err := e.pick(i, rel.cix).Do(req); err != nil {
			if e.obs != nil {
				e.obs.MasterReply(i, 0, err)
			}
			for _, o := range [2]*op{rel, acq} {
				o.record(i, false, err)
				o.unref()
			}
		}
	}
	e.handOffs.Add(1)
}
