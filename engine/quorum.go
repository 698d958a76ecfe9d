package engine

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

type opKind uint8

const (
	opAcquire opKind = iota
	opRelease
	opExtend
	opFenced // acquire with a fencing token (scripts.FenceAcquire)
	opRaise  // fencing counter write-back (scripts.FenceRaise): yes where the key holds the token
	opRW     // read or write acquire of an RWLock (scripts.ReadAcquire/WriteAcquire): 1 granted, 0 held
)

var opNames = [...]string{opAcquire: "acquire", opRelease: "release", opExtend: "extend", opFenced: "acquire", opRaise: "fence", opRW: "acquire"}

// masterResult is one master's answer inside an op.
type masterResult struct {
	state int8 // 0 no answer yet, 1 yes, -1 no
	err   error
}

// op is one fan-out to all masters. It is pooled: it returns to the pool
// when the waiter and every master callback are done with it (refs == 0),
// so a straggling reply can never touch a recycled op.
type op struct {
	e       *Engine
	kind    opKind
	waitAll bool // decide only when every master answered (cleanup)
	// retry: a release retried after an Unlock without quorum; "not held"
	// counts as released (the earlier release may have deleted it).
	retry bool
	cix   uint32 // connection index used on every master (connFor; nextConn for broadcasts)
	khash uint64 // conn.Request.KeyHash of the op's key
	key   string // the op's key (conn.Request.Key: cluster members route by it)
	// merge, when set, lets each master's Conn merge this op's request
	// with others queued for the same write (releases, extensions).
	merge *conn.Merge
	first int // master the fan-out starts with (see Engine.firstMaster)
	// presetBuf is preset's storage for up to 8 masters.
	presetBuf [8]int8
	refs      atomic.Int32
	done      chan struct{} // receives one value when decided
	all       chan struct{} // receives one value when every master answered

	// counts packs the answers so far: yes in the low 32 bits, no (refusals
	// and failures) in the high 32. One atomic add per answer gives every
	// answer a consistent snapshot, so exactly one sees the decision point
	// and exactly one sees the last answer.
	counts  atomic.Uint64
	decided atomic.Bool
	yes     atomic.Uint64 // bit i: master i said yes (N ≤ 64)
	fence   atomic.Int64  // opFenced: the largest counter a granting master returned

	mu sync.Mutex
	// Guarded by mu (written before the answer is counted):
	results []masterResult

	// preset is, per master, an answer fanout records instead of sending
	// (owner only): 0 send, 1 yes, -1 no (ErrNotHeld).
	preset []int8

	cmd []byte // encoded command (only touched by the op's owner)

	// An extension's lock, start and TTL (set by its sender). t1 is also
	// an acquisition's start, and a release's when an Observer measures.
	lock *Lock
	t1   time.Time
	ttl  time.Duration
	seq  uint64 // an extension's number among its lock's (Lock.extSent)
	// raise: the extension is a Reentrant's re-acquisition (scripts.Reenter),
	// which raises the TTL and never lowers it.
	raise bool
	// notify, when set, receives the op at its decision instead of done
	// (the watchdog's extensions: nobody blocks on them).
	notify func(*op)
	// acq, when set, is the operation this op is a step of (an
	// acquisition's acquire, fencing write-back or cleanup; an unlock's
	// release): it receives the decision instead of done (chain.step).
	acq chain
	// cleanAfter: stage counts a failure decided (chain's own call) and
	// the last answer; the second of them calls chain.settled.
	cleanAfter bool
	stage      atomic.Int32
	// role is what the op is to its chain: its decision goes to that
	// step. Set by its owner, never inferred from pointers: a step's op
	// goes back to the pool when the step is done and may come back as a
	// later step's.
	role acqRole
}

// chain is an operation run as steps where the answers arrive
// (acquisition, unlocker).
type chain interface {
	// step receives the decision of one of its ops.
	step(o *op)
	// settled: o's failure was staged (o.stage) and every master
	// answered it.
	settled(o *op)
}

type acqRole uint8

const (
	roleNone acqRole = iota
	roleAcquire
	roleFence
	roleCleanup
	roleRelease
	roleExtend
)

var _ conn.Callback = (*op)(nil)

func (e *Engine) getOp(kind opKind, waitAll bool, cix uint32, first int) *op {
	o := e.ops.Get().(*op)
	o.kind, o.waitAll, o.cix, o.first = kind, waitAll, cix, first
	o.refs.Store(int32(e.n) + 1)
	return o
}

// unref drops one reference; the last one recycles the op.
func (o *op) unref() {
	if o.refs.Add(-1) != 0 {
		return
	}
	o.counts.Store(0)
	o.decided.Store(false)
	o.yes.Store(0)
	o.fence.Store(0)
	o.retry, o.raise = false, false
	o.lock, o.notify, o.acq, o.t1 = nil, nil, nil, time.Time{}
	o.cleanAfter, o.role = false, roleNone
	o.stage.Store(0)
	o.khash, o.merge, o.key = 0, nil, ""
	clear(o.results)
	clear(o.preset)
	select { // drain signals nobody waited for
	case <-o.done:
	default:
	}
	select {
	case <-o.all:
	default:
	}
	o.e.ops.Put(o)
}

// Complete implements [conn.Callback]: one master answered (or failed).
func (o *op) Complete(tag uint64, r resp.Reply, err error) {
	ok, cause := o.classify(r, err)
	if ok && o.kind == opFenced {
		// Before the answer is counted: whoever sees the decision sees
		// the maximum over every grant it counted.
		for cur := o.fence.Load(); r.Int > cur && !o.fence.CompareAndSwap(cur, r.Int); cur = o.fence.Load() {
		}
	}
	// A quarantined master's grant does not count, nor its confirmation of
	// a fencing write-back: the lock key it holds may have been set after
	// it lost a later holder's grant in a restart (docs/safety.md). Its
	// releases count as usual.
	if ok && o.kind != opRelease && o.e.quarantined(int(tag)) {
		ok, cause = false, ErrQuarantined
	}
	if obs := o.e.obs; obs != nil {
		rerr := err
		if rerr == nil && r.IsError() {
			rerr = r.Err()
		}
		obs.MasterReply(int(tag), time.Since(o.t1), rerr)
	}
	o.record(int(tag), ok, cause)
	o.unref()
}

func (o *op) classify(r resp.Reply, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	switch o.kind {
	case opAcquire:
		if r.IsOK() {
			return true, nil
		}
		if r.IsNull() {
			return false, ErrHeld
		}
	case opFenced:
		if r.Type == resp.TypeInteger && r.Int > 0 {
			if r.Int > scripts.MaxFence { // a script without the bound: not exact
				return false, errFenceRange
			}
			return true, nil
		}
		if r.IsNull() {
			return false, ErrHeld
		}
	case opRW:
		if r.Type == resp.TypeInteger {
			if r.Int == 1 {
				return true, nil
			}
			return false, ErrHeld // nothing written
		}
	case opRaise:
		if r.Type == resp.TypeInteger {
			if r.Int == 1 {
				return true, nil
			}
			return false, ErrNotHeld
		}
	case opRelease, opExtend:
		if r.Type == resp.TypeInteger {
			if r.Int == 1 || o.retry {
				return true, nil
			}
			return false, ErrNotHeld
		}
	}
	if r.IsError() {
		return false, r.Err()
	}
	return false, fmt.Errorf("engine: unexpected reply %s", r)
}

// decideHook, when a test sets it, runs where an op is decided, before
// its acquisition (if any) is told: a test delays a decision with it.
var decideHook atomic.Pointer[func(*op)]

func (o *op) record(i int, ok bool, cause error) {
	delta := uint64(1)
	if ok {
		o.yes.Or(1 << uint(i))
	} else {
		// Only failures carry data: write it before counting the answer,
		// so whoever sees the count (decision, all answered) sees it too.
		o.mu.Lock()
		o.results[i] = masterResult{state: -1, err: cause}
		o.mu.Unlock()
		delta = 1 << 32
	}
	c := o.counts.Add(delta)
	yes, no := int(uint32(c)), int(c>>32)
	n, q := o.e.n, o.e.q
	all := yes+no == n
	decide := all || (!o.waitAll && (yes >= q || no > n-q))
	if decide && o.decided.CompareAndSwap(false, true) {
		if h := decideHook.Load(); h != nil {
			(*h)(o)
		}
		switch {
		case o.acq != nil:
			o.acq.step(o)
		case o.notify != nil:
			o.notify(o)
		default:
			o.done <- struct{}{}
		}
	}
	// After the decision: an acquisition decided a success may be gone
	// by now, and is touched again only on the failure path, which waits
	// for this last answer (acquisition.failed).
	if all {
		if o.cleanAfter {
			if o.stage.Add(1) == 2 {
				o.acq.settled(o)
			}
		} else {
			o.all <- struct{}{}
		}
	}
	if !ok && cause != ErrHeld && cause != ErrNotHeld && cause != ErrQuarantined {
		o.e.masterErrs[i].Add(1)
	}
}

// fanout sends o.cmd to every master, one enqueue each.
func (o *op) fanout(deadline time.Time, script *conn.Script) {
	e := o.e
	if e.obs != nil && o.t1.IsZero() {
		o.t1 = time.Now() // for the round trips (a release)
	}
	req := conn.Request{Cmd: o.cmd, Deadline: deadline, Callback: o, Script: script, Stable: true, KeyHash: o.khash, Key: o.key}
	if o.merge != nil {
		req.Script, req.Merge = nil, o.merge
	}
	for j := 0; j < e.n; j++ {
		i := o.first + j
		if i >= e.n {
			i -= e.n
		}
		if p := o.preset[i]; p != 0 {
			if p > 0 {
				o.record(i, true, nil)
			} else {
				o.record(i, false, ErrNotHeld)
			}
			o.unref()
			continue
		}
		req.Tag = uint64(i)
		if err := e.pick(i, o.cix).Do(req); err != nil {
			if e.obs != nil {
				e.obs.MasterReply(i, 0, err) // refused at once (down, overloaded)
			}
			o.record(i, false, err)
			o.unref()
		}
	}
}

// wait blocks until o is decided or ctx ends. Every request carries a
// deadline, so a decision always comes.
//
// A release or an extension decided short of a quorum then also waits for
// the answers still out (each bounded by its request's deadline, the
// per-master timeout), or until ctx ends, and returns nil: its error then
// counts and names every master, not only those whose failures decided it
// (three masters refused at once because they are down decide a release
// on five before the two that are up have answered). Success answers at
// the decision, as before.
func (o *op) wait(ctx context.Context) error {
	d := ctx.Done()
	if d == nil { // a context that never ends: a plain receive is cheaper than select
		<-o.done
	} else {
		select {
		case <-o.done:
		case <-d:
			return ctx.Err()
		}
	}
	if (o.kind == opRelease || o.kind == opExtend) && o.granted() < o.e.q {
		select {
		case <-o.all:
		case <-d: // nil: never
		}
	}
	return nil
}

// granted returns the yes count.
func (o *op) granted() int { return int(uint32(o.counts.Load())) }

// errNoAnswer is the per-master cause, in a QuorumError, of a master that
// had not answered when the error was built: a watchdog's extension is
// judged at its decision, and a caller's ctx may end while the engine
// waits for the last answers (op.wait).
var errNoAnswer = errors.New("engine: no answer yet when the operation was decided")

// quorumError builds the error of a failed op from the answers so far:
// with fewer than a quorum of answers (yes, or a master's "no": held / not
// held) it also matches ErrUnavailable, and an acquisition then matches
// ErrUnavailable instead of ErrNotAcquired. Every master that did not say
// yes is listed, in master order: its failure, or errNoAnswer.
func (o *op) quorumError(sentinel error, extra error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	// Grants from the bitmap, not the count: one snapshot for both the
	// number and which masters are still out (a grant is in the bitmap
	// before it is counted).
	yes := o.yes.Load()
	e := &QuorumError{Op: opNames[o.kind], Granted: bits.OnesCount64(yes), Total: o.e.n, Quorum: o.e.q, sentinel: sentinel}
	if extra != nil {
		e.Masters = append(e.Masters, extra)
	}
	var quar []int
	for i, r := range o.results {
		cause := r.err
		switch {
		case r.state == -1:
			switch {
			case r.err == ErrHeld || r.err == ErrNotHeld:
				e.Held++
			case r.err == ErrQuarantined:
				quar = append(quar, i)
				cause = o.e.quarantineErr(i)
			}
		case yes&(1<<uint(i)) == 0:
			cause = errNoAnswer
		default:
			continue
		}
		e.Masters = append(e.Masters, &MasterError{Master: i, Addr: o.e.addrs[i], Err: cause})
	}
	e.Quarantined = len(quar)
	e.Answered = e.Granted + e.Held + e.Quarantined
	if e.Granted+e.Held < e.Quorum {
		e.unavailable = true
		if sentinel == ErrNotAcquired {
			e.sentinel = ErrUnavailable
		}
	}
	if len(quar) > 0 {
		o.e.explainQuarantine(e, quar)
	}
	return e
}
