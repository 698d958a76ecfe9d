package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

// ErrNoLeader is returned by [Election.Leader] when a quorum of masters
// says that nobody holds the election.
var ErrNoLeader = errors.New("engine: no leader")

// Election is a leader election over the engine's masters, as etcd's
// concurrency.Election: [Election.Campaign] blocks until the caller is
// leader and returns its [Leadership], whose [Leadership.Term] strictly
// increases from one leader to the next (the fencing token of the lock
// the election is: pass it to the storage the leader writes to).
//
// The election NAME is a fenced lock on the key NAME, kept by the
// watchdog ([WithAutoExtend]) for as long as the leader holds it, plus a
// leader record redlock:leader:{NAME}:NAME (a hash: the leader's token, term,
// value and the number of its proclamation) that only the holder of the
// lock key can write, on each master; Resign deletes it. (A leader that
// dies leaves its record, one small hash, until the next leader's.) [Election.Leader] reads both by quorum.
// At most one leader holds a valid leadership at a time, under the
// assumptions of the lock it is (docs/safety.md).
type Election struct {
	e    *Engine
	name string
	key  string // the lock key on the masters (prefixed)
	rkey string // the leader record (recordKey; shares key's hash tag)
	ttl  time.Duration
}

// NewElection returns the election name whose leaders hold it with the
// given TTL: a leader that dies is replaced about a TTL later. It sends
// nothing.
func (e *Engine) NewElection(name string, ttl time.Duration) (*Election, error) {
	if name == "" {
		return nil, errEmptyKey
	}
	ttl, err := e.lockTTL(ttl)
	if err != nil {
		return nil, err
	}
	key := e.cfg.KeyPrefix + name
	if _, err := e.fenceKeyFor(key); err != nil {
		return nil, err
	}
	return &Election{e: e, name: name, key: key, rkey: recordKey(key), ttl: ttl}, nil
}

// recordKey is the leader record of the election whose lock key is key:
// redlock:leader:{hashed part}:key (sideKey), outside the names of locks
// and elections (keys beginning "redlock:" are the engine's, as
// Config.FenceKey).
func recordKey(key string) string { return sideKey("redlock:leader:", key) }

// readTimeout is the per-master timeout of a quorum read or write the
// caller bounds by ctx: within ctx's deadline (nine tenths of what is
// left), so that the masters that did not answer by then count as
// failures and the call decides from the others, instead of returning
// ctx's error while a quorum had answered.
func (el *Election) readTimeout(ctx context.Context) time.Duration {
	return withinDeadline(ctx, el.e.cfg.masterTimeout(el.ttl))
}

// Name returns the election's name.
func (el *Election) Name() string { return el.name }

// Campaign waits until the caller is leader (or ctx ends: then ctx's
// error; or [Config.MaxTries] attempts failed, as for [Engine.Lock]) and
// returns its leadership, with value proclaimed: the election
// lock is taken as [Engine.Lock] takes it (fenced, kept by the watchdog),
// then the leader record is written on a quorum of masters. A campaign
// whose record does not reach a quorum, or whose validity runs out
// meanwhile, gives the lock back and returns the error.
func (el *Election) Campaign(ctx context.Context, value string) (*Leadership, error) {
	return el.campaign(ctx, value, true)
}

// TryCampaign is Campaign with one attempt: an error matching
// [ErrNotAcquired] when another leader holds the election.
func (el *Election) TryCampaign(ctx context.Context, value string) (*Leadership, error) {
	return el.campaign(ctx, value, false)
}

func (el *Election) campaign(ctx context.Context, value string, wait bool) (*Leadership, error) {
	opts := []Option{WithFencing(), WithAutoExtend(0)}
	var l *Lock
	var err error
	if wait {
		l, err = el.e.Lock(ctx, el.name, el.ttl, opts...)
	} else {
		l, err = el.e.TryLock(ctx, el.name, el.ttl, opts...)
	}
	if err != nil {
		return nil, err
	}
	ld := &Leadership{el: el, l: l, turn: make(chan struct{}, 1)}
	ld.seq.Store(1)
	err = el.publish(ctx, l, 1, value)
	if err == nil && !l.Valid() {
		// Checked last: the leadership is returned only while valid.
		err = fmt.Errorf("%w: %w: the leader record was written after the lock's validity ran out", ErrNotAcquired, ErrGrantedTooLate)
	}
	if err != nil {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), el.e.cfg.masterTimeout(el.ttl)+el.e.cfg.CleanupTimeout)
		l.Unlock(uctx)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("engine: election %q: won, but not announced within the validity (the election is given back): %w", el.name, err)
	}
	ld.value = value // not shared yet
	return ld, nil
}

// publish writes the leader record {l's token, term, seq, value} on
// every master whose lock key holds l's token: nil when a quorum did
// (masters in restart quarantine do not count).
func (el *Election) publish(ctx context.Context, l *Lock, seq int64, value string) error {
	e := el.e
	if err := ctx.Err(); err != nil {
		return err // nothing sent
	}
	cmd := scripts.ElectionProclaim.AppendEvalSha(nil, 2, 4)
	cmd = resp.AppendBulkString(cmd, el.key)
	cmd = resp.AppendBulkString(cmd, el.rkey)
	cmd = resp.AppendBulkString(cmd, l.token)
	cmd = resp.AppendBulkString(cmd, strconv.FormatInt(l.fence, 10))
	cmd = resp.AppendBulkString(cmd, strconv.FormatInt(seq, 10))
	cmd = resp.AppendBulkString(cmd, value)
	one := func(r resp.Reply) bool { return r.Type == resp.TypeInteger && r.Int == 1 }
	reps, err := e.broadcast(ctx, el.key, el.readTimeout(ctx), scripts.ElectionProclaim, cmd, one, nil)
	if err != nil {
		return err
	}
	qe := &QuorumError{Op: "proclaim", Total: e.n, Quorum: e.q, sentinel: ErrLockLost}
	for i, r := range reps {
		rerr := r.Err
		if rerr == nil && r.Reply.IsError() {
			rerr = r.Reply.Err()
		}
		switch {
		case errors.Is(rerr, ErrQuarantined):
			qe.Answered++
			qe.Quarantined++
		case rerr != nil:
		case one(r.Reply):
			qe.Answered++
			qe.Granted++
			continue
		case r.Reply.Type == resp.TypeInteger && r.Reply.Int == 0:
			qe.Answered++
			qe.Held++
			rerr = ErrNotHeld
		default:
			rerr = fmt.Errorf("engine: unexpected reply %s", r.Reply)
		}
		qe.Masters = append(qe.Masters, &MasterError{Master: i, Addr: e.addrs[i], Err: rerr})
	}
	if qe.Granted >= e.q {
		return nil
	}
	qe.unavailable = qe.Granted+qe.Held < e.q
	return qe
}

// Leader is a leader as [Election.Leader] read it.
type Leader struct {
	// Term is the leader's term (its [Leadership.Term]); 0 when its
	// campaign won the election lock and has not written its record yet
	// (its Campaign has not returned).
	Term int64
	// Value is the value the leader proclaimed last, as far as the masters
	// that answered know: a proclamation that reached a quorum, or a later
	// one that reached fewer (Proclaim returned an error for it).
	Value string
	// Token is the token of the leader's lock.
	Token string
	// Remaining is how long a quorum of masters will still hold the
	// leader's lock after the read, as their clocks count (see
	// [Holding.Remaining]).
	Remaining time.Duration
	// seq numbers the leader's proclamations (1: its campaign's).
	seq int64
}

// after reports whether ld is a later state than o: a later term, or a
// later proclamation of the same term.
func (ld Leader) after(o Leader) bool {
	return ld.Term > o.Term || ld.Term == o.Term && ld.seq > o.seq
}

// Leader reads the current leader as a quorum read (as [Engine.Holder]):
// [ErrNoLeader] when a quorum of masters holds nobody's lock, an error
// matching [ErrUnavailable] when too few answered to tell. Masters in
// restart quarantine do not count. A snapshot: the leader may change as
// soon as it returns.
func (el *Election) Leader(ctx context.Context) (Leader, error) {
	e := el.e
	cmd := scripts.ElectionLeader.AppendEvalSha(nil, 2, 0)
	cmd = resp.AppendBulkString(cmd, el.key)
	cmd = resp.AppendBulkString(cmd, el.rkey)
	t1 := time.Now()
	reps, err := e.broadcast(ctx, el.key, el.readTimeout(ctx), scripts.ElectionLeader, cmd, anyReply, nil)
	if err != nil {
		return Leader{}, err
	}
	return el.leaderOf(reps, time.Since(t1))
}

// leaderOf decides the leader from the masters' ElectionLeader replies:
// the token a quorum holds (quorumHolder), with the term and value of
// the highest-numbered record of that token among the answers.
func (el *Election) leaderOf(reps []enginex.MasterReply, elapsed time.Duration) (Leader, error) {
	tok, left, answers, err := el.e.quorumHolder("leader", reps, elapsed, parseLeaderReply)
	if err != nil {
		return Leader{}, err
	}
	if tok == "" {
		return Leader{}, ErrNoLeader
	}
	ld := Leader{Token: tok, Remaining: left}
	for _, a := range answers {
		if a != nil && a.token == tok && a.published && a.seq > ld.seq {
			ld.Term, ld.seq, ld.Value = a.term, a.seq, a.value
		}
	}
	return ld, nil
}

// parseLeaderReply reads one master's ElectionLeader reply (not nil).
func parseLeaderReply(r resp.Reply) (*keyAnswer, error) {
	bad := fmt.Errorf("engine: unexpected reply %s", r)
	if r.Type != resp.TypeArray || (len(r.Elems) != 2 && len(r.Elems) != 5) || r.Elems[0].Type != resp.TypeBulkString || r.Elems[1].Type != resp.TypeInteger {
		return nil, bad
	}
	if len(r.Elems[0].Str) == 0 {
		// Held (SET NX refuses it), by no leader's token: no answer, as
		// Holder's (quorumHolder counts only tokens).
		return nil, errors.New("engine: the election's key holds an empty value, not a leader's token")
	}
	a := &keyAnswer{token: string(r.Elems[0].Str), pttl: r.Elems[1].Int}
	if len(r.Elems) == 5 {
		term, err1 := strconv.ParseInt(string(r.Elems[2].Str), 10, 64)
		seq, err2 := strconv.ParseInt(string(r.Elems[3].Str), 10, 64)
		if err1 != nil || err2 != nil || r.Elems[4].Type != resp.TypeBulkString {
			return nil, bad
		}
		a.published, a.term, a.seq, a.value = true, term, seq, string(r.Elems[4].Str)
	}
	return a, nil
}

// observeEvery is how often Observe reads the leader: a tenth of the
// TTL, from 10ms to 1s (with a release channel, a resignation wakes it at
// once too).
func (el *Election) observeEvery() time.Duration {
	return min(max(el.ttl/10, 10*time.Millisecond), time.Second)
}

// Observe reads the leader until ctx ends (or the engine is closed) and
// sends each new state on the returned channel, which it then closes: a
// new leader (a higher term) or a new proclamation of the current one,
// never an older state than one it sent. Like etcd's Observe it
// guarantees the most recent state, not every one: a leader that held
// for less than the polling period (a tenth of the TTL, 10ms to 1s) may
// be skipped. A receiver that falls behind gets the latest state, not a
// backlog. With [Config.ReleaseChannel], a resignation is seen at once.
// Leaders whose record is not written yet (Term 0) and reads that fail
// are not sent.
func (el *Election) Observe(ctx context.Context) <-chan Leader {
	ch := make(chan Leader)
	wake := el.e.watchers.add(el.key)
	go func() {
		defer close(ch)
		defer el.e.watchers.remove(el.key, wake)
		every := el.observeEvery()
		t := time.NewTimer(0)
		defer t.Stop()
		var seen Leader
		var pending *Leader
		for {
			var out chan Leader
			var next Leader
			if pending != nil {
				out, next = ch, *pending
			}
			select {
			case <-ctx.Done():
				return
			case out <- next:
				pending = nil
				continue
			case <-t.C:
				t.Reset(every)
			case <-wake:
			}
			if el.e.closed.Load() {
				return
			}
			rctx, cancel := context.WithTimeout(ctx, every+el.e.cfg.masterTimeout(el.ttl))
			ld, err := el.Leader(rctx)
			cancel()
			if err == nil && ld.Term > 0 && ld.after(seen) {
				seen = ld
				pending = &ld
			}
		}
	}()
	return ch
}

// keyWatch wakes the goroutines that watch a key (Observe) when a
// release of it is announced on the release channel, and every one of
// them when the engine closes.
type keyWatch struct {
	mu     sync.Mutex
	keys   map[string]map[chan struct{}]struct{}
	closed bool
}

func (w *keyWatch) add(key string) chan struct{} {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		ch <- struct{}{}
		return ch
	}
	if w.keys == nil {
		w.keys = map[string]map[chan struct{}]struct{}{}
	}
	m := w.keys[key]
	if m == nil {
		m = map[chan struct{}]struct{}{}
		w.keys[key] = m
	}
	m[ch] = struct{}{}
	return ch
}

func (w *keyWatch) remove(key string, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if m := w.keys[key]; m != nil {
		delete(m, ch)
		if len(m) == 0 {
			delete(w.keys, key)
		}
	}
}

// notified wakes key's watchers.
func (w *keyWatch) notified(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.keys[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// close wakes every watcher (they find the engine closed), and each one
// added later at once.
func (w *keyWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for _, m := range w.keys {
		for ch := range m {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// Leadership is a won election: the election's lock, kept by the
// watchdog until [Leadership.Resign] or its loss ([Leadership.Done]).
type Leadership struct {
	el  *Election
	l   *Lock
	seq atomic.Int64 // the last proclamation's number
	// turn (one slot) orders proclamations: a Proclaim waits for the one
	// before it, or for its ctx.
	turn chan struct{}
	mu   sync.Mutex // guards value
	// value is the last value a quorum of masters accepted.
	value string
}

// Term is the leadership's term: the fencing token of its lock, strictly
// greater than every earlier leader's term of this election (and every
// fencing token issued before on these masters). Pass it to the storage
// the leader writes to, which refuses a write with a term lower than one
// it has seen: a leader paused past its validity cannot overwrite its
// successor's writes (docs/safety.md).
func (ld *Leadership) Term() int64 { return ld.l.fence }

// Value returns the last value a quorum of masters accepted from this
// leader (Campaign's, or a successful Proclaim's).
func (ld *Leadership) Value() string {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return ld.value
}

// Lock returns the election's lock the leader holds (its token, validity,
// Remaining).
func (ld *Leadership) Lock() *Lock { return ld.l }

// Done is closed when the leadership ends: resigned, or lost (its lock's
// validity ran out before an extension renewed it); Err says which.
func (ld *Leadership) Done() <-chan struct{} { return ld.l.Done() }

// Err is nil while the leadership holds, [ErrUnlocked] after Resign, or
// an error matching [ErrLockLost] once it was lost.
func (ld *Leadership) Err() error { return ld.l.Err() }

// Context returns a context derived from parent that is cancelled when
// the leadership ends (as [Lock.Context]).
func (ld *Leadership) Context(parent context.Context) (context.Context, context.CancelFunc) {
	return ld.l.Context(parent)
}

// Proclaim makes value the leader's value: the leader record is written
// on every master that still holds the leader's lock. It returns nil when
// a quorum did; an error matching [ErrLockLost] when a quorum no longer
// holds the leader's token (and [ErrUnavailable] too when too few
// answered to tell): the value may then be seen by some readers (see
// [Leader.Value]). Proclamations are numbered: a later one is never
// overwritten by an earlier one arriving late. A ctx that has ended sends
// nothing; one that ends while the masters are asked returns ctx's error,
// and the value may or may not have been written (as a write to one Redis
// whose reply is not awaited).
func (ld *Leadership) Proclaim(ctx context.Context, value string) error {
	if err := ld.l.Err(); err != nil {
		return err
	}
	if !ld.l.Valid() {
		return errValidityEnded
	}
	select {
	case ld.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-ld.turn }()
	err := ld.el.publish(ctx, ld.l, ld.seq.Add(1), value)
	if err == nil {
		ld.mu.Lock()
		ld.value = value
		ld.mu.Unlock()
		// Checked last (h): a record written after the leadership ended
		// is not reported as proclaimed by a leader (the masters still
		// held the token, but nothing proved it held meanwhile).
		if lerr := ld.l.Err(); lerr != nil {
			return lerr
		}
	}
	return err
}

// Resign gives the leadership up: the lock is released (as [Lock.Unlock])
// and the next campaigner can win at once; then the leader record is
// deleted where it is still this leader's (best effort: no reader counts
// a record once the lock is gone, and the next leader overwrites it).
func (ld *Leadership) Resign(ctx context.Context) error {
	err := ld.l.Unlock(ctx)
	if ctx.Err() == nil {
		el := ld.el
		cmd := scripts.ElectionResign.AppendEvalSha(nil, 1, 1)
		cmd = resp.AppendBulkString(cmd, el.rkey)
		cmd = resp.AppendBulkString(cmd, ld.l.token)
		el.e.broadcast(ctx, el.key, el.readTimeout(ctx), scripts.ElectionResign, cmd, nil, nil)
	}
	return err
}

// Lead campaigns (as [Election.Campaign]: ctx bounds the wait) and runs fn
// while leader — client-go's leaderelection OnStartedLeading, with
// OnStoppedLeading being fn's return: fn's context is cancelled when the
// leadership is lost (its cause matches [ErrLockLost]) or ctx ends, and
// the leadership is resigned when fn returns (or panics: the panic then
// goes on up the caller's stack). Lead returns the campaign's error when
// it did not lead; otherwise, when the leadership's validity had ended by
// the time Lead returns — read from the clock when fn returned and again
// after the resignation, not from the watchdog having noticed — the loss
// (matching [ErrLockLost]), joined with fn's error when fn failed too;
// otherwise fn's error, or nil. Run it in a
// loop to campaign again after a loss.
func (el *Election) Lead(ctx context.Context, value string, fn func(ctx context.Context, ld *Leadership) error) error {
	if fn == nil {
		return errNilFn
	}
	ld, err := el.Campaign(ctx, value)
	if err != nil {
		return err
	}
	fctx, cancel := ld.Context(ctx)
	resign := func() {
		cancel()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), doUnlockTimeout)
		_ = ld.Resign(rctx)
		rcancel()
	}
	resigned := false
	defer func() {
		if !resigned { // fn panicked: resign, and the panic goes on
			resign()
		}
	}()
	ferr := fn(fctx, ld)
	lost, until := ld.Err(), ld.l.Until()
	resigned = true
	resign()
	return outcome(ferr, lostBy(lost, until))
}
