package engine

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

// TokenLen is the length of generated tokens: 20 random bytes, hex-encoded.
const TokenLen = 40

// Engine takes Redlock locks over N masters. It is safe for concurrent use
// by any number of goroutines. Create it with [New]; Close it when done.
type Engine struct {
	cfg    Config
	obs    Observer // cfg.Observer; nil when none
	addrs  []string
	conns  [][]*conn.Conn // [master][connection]
	fan    [][]master     // what fan-outs send on: conns, or a test's fake
	n, q   int
	rr     atomic.Uint32
	spread atomic.Uint32 // rotates the fan-out's first master
	epoch  time.Time     // monotonic origin of Lock deadlines
	ops    sync.Pool
	close  sync.Once

	closed                            atomic.Bool
	acquired, failed, unavailable     atomic.Uint64
	released, lost                    atomic.Uint64
	extended, extendFailed, cancelled atomic.Uint64
	masterErrs                        []atomic.Uint64

	// Master state, followed through the first connection of each master
	// (see watch); restart quarantine through every connection (serverUp).
	logMu      sync.Mutex
	mlog       []masterLog // guarded by logMu
	upCount    int         // guarded by logMu
	quorumLost bool        // guarded by logMu
	// lastRun is the run_id of the server last met at each address of
	// each member (restart quarantine, quarantineFrom). Guarded by logMu.
	lastRun map[serverAt]string

	// Restart quarantine (see Config.DisableQuarantine, masters.go).
	quar []atomic.Int64 // per master: quarantined until (ns since epoch), 0: not

	lastFence atomic.Int64 // largest fencing token this engine issued

	release *conn.Script // scripts.Release, or scripts.ReleaseNotify with a ReleaseChannel
	// clusters[i] is member i when it is a Redis Cluster (cluster.go);
	// nil when every member is a standalone master.
	clusters []*conn.Cluster
	// Merges of releases and extensions (Config.MergeMax); nil: off.
	releaseMerge, extendMerge *conn.Merge
	subs                      []*conn.Subscriber // per master, with a ReleaseChannel: release notifications

	keep  keeper   // the watchdog and Done's scheduler (keeper.go)
	waits waitRoom // blocked Lock calls per key (wait.go)
}

// New connects to the masters in the background and returns the Engine at
// once. Operations started while a master's first connect attempt is in
// progress wait for it within their per-master timeout; a master that is
// down after that fails fast. Use [Engine.WaitReady] at start-up to see
// every master's first dial result and refuse a bad topology.
func New(cfg Config) (*Engine, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, addrs: cfg.Addrs, n: len(cfg.Addrs), epoch: time.Now()}
	e.q = e.n/2 + 1
	e.release = scripts.Release
	releaseMulti, releaseArgs := scripts.ReleaseMulti, 1
	if cfg.ReleaseChannel != "" {
		e.release = scripts.ReleaseNotify
		releaseMulti, releaseArgs = scripts.ReleaseNotifyMulti, 2
	}
	loaded := []*conn.Script{e.release, scripts.Extend, scripts.FenceAcquire, scripts.FenceRaise}
	if cfg.MergeMax >= 0 {
		max := cfg.MergeMax
		if max == 0 {
			max = DefaultMergeMax
		}
		e.releaseMerge = conn.NewMerge(e.release, releaseMulti, releaseArgs, max)
		e.extendMerge = conn.NewMerge(scripts.Extend, scripts.ExtendMulti, 2, max)
		loaded = append(loaded, releaseMulti, scripts.ExtendMulti)
	}
	e.keep.init(e)
	e.waits.init(e)
	e.masterErrs = make([]atomic.Uint64, e.n)
	e.ops.New = func() any {
		return &op{e: e, done: make(chan struct{}, 1), all: make(chan struct{}, 1), results: make([]masterResult, e.n), preset: make([]int8, e.n), cmd: make([]byte, 0, 128)}
	}
	e.mlog = make([]masterLog, e.n)
	e.quar = make([]atomic.Int64, e.n)
	e.conns = make([][]*conn.Conn, e.n)
	e.fan = make([][]master, e.n)
	e.obs = cfg.Observer
	for i, a := range cfg.Addrs {
		cc := cfg.Conn
		if obs := cfg.Observer; obs != nil {
			user := cc.OnWrite
			cc.OnWrite = func(n int) {
				obs.WriteBatch(i, n)
				if user != nil {
					user(n)
				}
			}
		}
		cc.Scripts = append(append([]*conn.Script(nil), cc.Scripts...), loaded...)
		user := cfg.Conn.OnState
		cc.OnState = func(sc conn.StateChange) {
			e.watch(i, sc)
			if user != nil {
				user(sc)
			}
		}
		sub := a
		if seeds, ok := clusterSeeds(a); ok {
			if e.clusters == nil {
				e.clusters = make([]*conn.Cluster, e.n)
			}
			cc.OnState = user
			cl := e.newCluster(i, seeds, cc)
			e.clusters[i] = cl
			e.fan[i] = []master{cl}
			sub = seeds[0] // a cluster delivers PUBLISH on every node
		} else {
			for k := 0; k < cfg.ConnsPerMaster; k++ {
				if k > 0 {
					// The master's up/down state is followed on its first
					// connection; any connection that meets a (re)started
					// server quarantines the master before its session
					// serves a request.
					cc.OnState = func(sc conn.StateChange) {
						if sc.Up {
							e.serverUp(i, sc)
						}
						if user != nil {
							user(sc)
						}
					}
				}
				c := conn.New(a, cc)
				e.conns[i] = append(e.conns[i], c)
				e.fan[i] = append(e.fan[i], c)
			}
		}
		if cfg.ReleaseChannel != "" {
			e.subs = append(e.subs, conn.Subscribe(sub, cfg.Conn, cfg.ReleaseChannel, func(key []byte) {
				e.waits.notified(string(key))
			}))
		}
	}
	return e, nil
}

// Quorum returns N/2+1.
func (e *Engine) Quorum() int { return e.q }

// Masters returns the master addresses.
func (e *Engine) Masters() []string { return append([]string(nil), e.addrs...) }

// closeDrain bounds how long Close waits for requests in flight.
const closeDrain = time.Second

// Close closes every master connection and waits for their goroutines.
// Requests already sent (the rest of a release that returned at a quorum)
// are first given until their deadlines, at most a second, to be
// answered. Locks still held are not released (they expire by TTL).
// Idempotent.
func (e *Engine) Close() error {
	e.close.Do(func() {
		e.closed.Store(true)
		e.keep.close()
		e.waits.close()
		e.logMu.Lock()
		for i := range e.mlog {
			if t := e.mlog[i].quarTimer; t != nil {
				t.Stop() // the quarantine-end log timers
			}
		}
		e.logMu.Unlock()
		for _, s := range e.subs {
			s.Close()
		}
		// Let what is on its way finish: an Unlock returns at a quorum,
		// and its release to the other masters must not be cut off by
		// a Close right after it. Every engine request has a deadline of
		// at most the per-master timeout, so this is bounded.
		dctx, cancel := context.WithTimeout(context.Background(), closeDrain)
		var dwg sync.WaitGroup
		for _, cs := range e.conns {
			for _, c := range cs {
				dwg.Add(1)
				go func() { defer dwg.Done(); c.Drain(dctx) }()
			}
		}
		for _, cl := range e.clusters {
			if cl != nil {
				dwg.Add(1)
				go func() { defer dwg.Done(); cl.Drain(dctx) }()
			}
		}
		dwg.Wait()
		cancel()
		var wg sync.WaitGroup
		for _, cs := range e.conns {
			for _, c := range cs {
				wg.Add(1)
				go func() { defer wg.Done(); c.Close() }()
			}
		}
		for _, cl := range e.clusters {
			if cl != nil {
				wg.Add(1)
				go func() { defer wg.Done(); cl.Close() }()
			}
		}
		wg.Wait()
	})
	return nil
}

// connFor chooses the connection index that every command on key uses on
// every master: acquire, cleanup, extend and release, of every lock on that
// key. One key's commands then reach a master in the order they were sent,
// so the cleanup of a failed attempt can never overtake a later grant of
// the same key (and same token, when callers reuse one) on another
// connection, and a release never overtakes the SET it undoes.
func (e *Engine) connFor(key string) uint32 {
	if e.cfg.ConnsPerMaster == 1 {
		return 0
	}
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return h
}

// keyHash is the conn.Request.KeyHash of key: requests on one key keep
// their order around merged releases and extensions. Never 0. FNV-1a: a
// collision only makes a connection write held releases earlier (safe),
// and it measured cheaper here than hash/maphash.
func (e *Engine) keyHash(key string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * 1099511628211
	}
	return h | 1
}

// nextConn chooses a connection index round robin, for commands that are
// not on one lock's key (Broadcast).
func (e *Engine) nextConn() uint32 {
	if e.cfg.ConnsPerMaster == 1 {
		return 0
	}
	return e.rr.Add(1)
}

// firstMaster chooses the master a lock's fan-outs start with, rotating
// across locks so that no master is always enqueued last (the last one gets
// the smallest write batches and answers last). A lock keeps its order for
// acquire, extend and release: the release then starts with the masters
// that answered the acquire first rather than with its stragglers.
func (e *Engine) firstMaster() int { return int(e.spread.Add(1) % uint32(e.n)) }

func (e *Engine) pick(i int, cix uint32) master {
	cs := e.fan[i]
	if len(cs) == 1 {
		return cs[0]
	}
	return cs[cix%uint32(len(cs))]
}

// TryLock makes one attempt to acquire key for ttl. It returns the Lock,
// an error matching [ErrNotAcquired] (a quorum of masters answered: the key
// is held) or [ErrUnavailable] (too few masters answered to tell) — both a
// [*QuorumError] with per-master causes —, ctx's error as it is, or
// [ErrBadArgument]/[ErrClosed]. Masters still on their first connect
// attempt are waited for within the per-master timeout. On every
// failure the token has been released on all masters before it returns.
func (e *Engine) TryLock(ctx context.Context, key string, ttl time.Duration, opts ...Option) (*Lock, error) {
	var co callOpts
	if len(opts) > 0 {
		co = applyOpts(opts)
		if co.waitOnly != "" {
			return nil, fmt.Errorf("%w: %s applies to Lock, not TryLock", ErrBadArgument, co.waitOnly)
		}
	}
	if key == "" {
		return nil, errEmptyKey
	}
	return e.tryLock(ctx, e.cfg.KeyPrefix+key, ttl, co)
}

func applyOpts(opts []Option) callOpts { return applyOptsTo(callOpts{}, opts) }

func applyOptsTo(co callOpts, opts []Option) callOpts {
	for _, f := range opts {
		if f != nil {
			f(&co)
		}
	}
	return co
}

// lockTTL validates a lock's ttl and returns it as the masters will apply
// it: in whole milliseconds (PX), so that the validity is computed on what
// was sent, never on a sub-millisecond part the masters did not get.
func (e *Engine) lockTTL(ttl time.Duration) (time.Duration, error) {
	ttl = ttl.Truncate(time.Millisecond)
	if ttl < time.Millisecond {
		return 0, errBadTTL
	}
	if ttl > e.cfg.MaxTTL {
		return 0, fmt.Errorf("%w: ttl %v is longer than the maximum TTL %v (Config.MaxTTL, --max-ttl: the restart quarantine period rests on it)", ErrBadArgument, ttl, e.cfg.MaxTTL)
	}
	return ttl, nil
}

var (
	errBadTTL       = fmt.Errorf("%w: ttl must be at least 1ms", ErrBadArgument)
	errEmptyKey     = fmt.Errorf("%w: empty key", ErrBadArgument)
	errUnlocked     = fmt.Errorf("%w: already unlocked", ErrUnlocked)
	errBadTokenSize = fmt.Errorf("%w: token longer than 512 bytes", ErrBadArgument)
)

func (e *Engine) tryLock(ctx context.Context, key string, ttl time.Duration, co callOpts) (*Lock, error) {
	a, err := e.begin(ctx, key, ttl, co)
	if err != nil {
		return nil, err
	}
	return e.finish(ctx, a)
}

// attempt is an acquisition on the wire, between begin and finish.
type attempt struct {
	l   *Lock
	o   *op
	t1  time.Time
	mt  time.Duration // per-master timeout
	ttl time.Duration
	co  callOpts
}

// begin validates an acquisition and sends it to every master.
func (e *Engine) begin(ctx context.Context, key string, ttl time.Duration, co callOpts) (attempt, error) {
	ttl, err := e.lockTTL(ttl)
	if err != nil {
		return attempt{}, err
	}
	ms := ttl.Milliseconds()
	if key == "" {
		return attempt{}, errEmptyKey
	}
	if len(co.token) > 512 {
		return attempt{}, errBadTokenSize
	}
	fenceKey := ""
	if co.fencing {
		var err error
		if fenceKey, err = e.fenceKeyFor(key); err != nil {
			return attempt{}, err
		}
	}
	if e.closed.Load() {
		return attempt{}, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return attempt{}, err
	}
	l := &Lock{e: e, key: key, ttl: ttl, cix: e.connFor(key), khash: e.keyHash(key), first: e.firstMaster()}
	if co.token != "" {
		l.token = co.token
	} else {
		var raw [TokenLen / 2]byte
		crand.Read(raw[:])
		hex.Encode(l.tokenBuf[:], raw[:])
		l.token = unsafe.String(&l.tokenBuf[0], TokenLen)
	}
	kind, script := opAcquire, (*conn.Script)(nil)
	if co.fencing {
		kind, script = opFenced, scripts.FenceAcquire
	}
	o := e.getOp(kind, false, l.cix, l.first)
	o.khash, o.key = l.khash, l.key
	if co.fencing {
		o.cmd = appendFencedSet(o.cmd[:0], key, fenceKey, l.token, ms)
	} else {
		o.cmd = appendSet(o.cmd[:0], key, l.token, ms)
	}
	mt := co.masterTimeout
	if mt <= 0 {
		mt = e.cfg.masterTimeout(ttl)
	}
	t1 := time.Now()
	o.t1 = t1
	o.fanout(t1.Add(mt), script)
	return attempt{l: l, o: o, t1: t1, mt: mt, ttl: ttl, co: co}, nil
}

// finish waits for the decision of a begun acquisition and completes it:
// the lock, or an error after the cleanup.
func (e *Engine) finish(ctx context.Context, a attempt) (*Lock, error) {
	l, o, t1, mt, ttl, co, key := a.l, a.o, a.t1, a.mt, a.ttl, a.co, a.l.key
	if err := o.wait(ctx); err != nil {
		e.cancelled.Add(1)
		e.observeAcquire(err, o, t1, ttl)
		e.cleanup(o, key, l.token, l.cix)
		o.unref()
		return nil, err
	}
	if co.fencing && o.granted() >= e.q {
		var err error
		if l.fence, err = e.fence(ctx, o.fence.Load(), l, mt); err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
				e.cancelled.Add(1)
			} else if errors.Is(err, ErrUnavailable) {
				e.unavailable.Add(1)
			} else {
				e.failed.Add(1)
			}
			// A grant without a token that later holders are sure to
			// exceed is not handed out.
			e.observeAcquire(err, o, t1, ttl)
			e.cleanup(o, key, l.token, l.cix)
			o.unref()
			return nil, err
		}
	}
	ok, extra := e.verdict(o, t1, ttl)
	if ok {
		e.observeAcquire(nil, o, t1, ttl)
		o.unref()
		l.until.Store(e.untilAfter(t1, ttl))
		l.granted.Store(int64(t1.Sub(e.epoch)))
		e.acquired.Add(1)
		if co.autoExtend {
			l.auto = true
			if co.maxHold > 0 {
				l.holdEnd = int64(t1.Sub(e.epoch) + co.maxHold)
			}
			e.keep.watch(l)
		}
		return l, nil
	}
	// cleanup waits for every master's answer (bounded by the per-master
	// timeout): the error then tells "held" from "unavailable" on all of them.
	e.cleanup(o, key, l.token, l.cix)
	qerr := o.quorumError(ErrNotAcquired, extra)
	if errors.Is(qerr, ErrUnavailable) {
		e.unavailable.Add(1)
	} else {
		e.failed.Add(1)
	}
	e.observeAcquire(qerr, o, t1, ttl)
	o.unref()
	return nil, qerr
}

// observeAcquire reports an ended acquisition attempt to the Observer.
func (e *Engine) observeAcquire(err error, o *op, t1 time.Time, ttl time.Duration) {
	if e.obs == nil {
		return
	}
	now := time.Now()
	ev := AcquireEvent{Result: acquireResult(err), Latency: now.Sub(t1), Margin: o.granted() - e.q, TTL: ttl}
	if err == nil {
		ev.ValidityLeft = ttl - now.Sub(t1) - e.cfg.drift(ttl)
	}
	e.obs.Acquire(ev)
}

// verdict decides an acquire or extend o that started at t1 for ttl: ok
// when a quorum granted with validity left (ttl − elapsed − drift > 0);
// otherwise the extra cause for the error, ErrGrantedTooLate when the
// quorum came too late, nil when there was none.
func (e *Engine) verdict(o *op, t1 time.Time, ttl time.Duration) (bool, error) {
	if o.granted() < e.q {
		return false, nil
	}
	if ttl-time.Since(t1)-e.cfg.drift(ttl) > 0 {
		return true, nil
	}
	return false, ErrGrantedTooLate
}

// untilAfter is the validity deadline, ns since e.epoch, of a grant that
// started at t1 for ttl.
func (e *Engine) untilAfter(t1 time.Time, ttl time.Duration) int64 {
	return int64(t1.Sub(e.epoch) + ttl - e.cfg.drift(ttl))
}

// cleanup releases token after the failed acquisition acq and waits
// (bounded by CleanupTimeout per master) until each master answered, so a
// failed acquisition leaves nothing behind. It ignores the caller's
// cancellation. It first waits for every answer to acq (bounded by the
// per-master timeout), then skips masters that answered with a nil reply:
// SET NX wrote nothing there, and a release could only delete a lock that
// holds the same token — the caller's own, when it reuses a token (the
// proxy passes clients' values through). Every other master is released,
// including those that timed out (their SET may still execute; the release
// is queued behind it on the same connection).
func (e *Engine) cleanup(acq *op, key, token string, cix uint32) {
	<-acq.all
	o := e.getOp(opRelease, true, cix, acq.first)
	o.khash, o.merge, o.key = acq.khash, e.releaseMerge, key
	acq.mu.Lock()
	for i, r := range acq.results {
		if r.state == -1 && r.err == ErrHeld {
			o.preset[i] = 1 // nothing written there: not sent, counted as done
		}
	}
	acq.mu.Unlock()
	o.cmd = e.appendRelease(o.cmd[:0], key, token)
	o.fanout(time.Now().Add(e.cfg.CleanupTimeout), e.release)
	<-o.done
	o.unref()
}

// fence computes the fencing token of a fenced grant whose granting
// masters returned at most f, and writes it back to every master: the
// raise script raises the master's counter to the token where the lock key
// still holds this lock's token, and answers 0 (not counted) where it does
// not. It returns once a quorum stored it that way (answers of masters in
// restart quarantine do not count): on each of those masters, any later
// grant of the key comes after this lock's key left it, so after the
// raise, and counts above the token (docs/safety.md, "Fencing tokens").
// The token is also above every token this engine issued before. The error
// is ctx's, or a QuorumError (op "fence") matching ErrNotAcquired when a
// quorum answered but too few still held the token, ErrUnavailable when
// fewer than a quorum answered.
func (e *Engine) fence(ctx context.Context, f int64, l *Lock, mt time.Duration) (int64, error) {
	for {
		cur := e.lastFence.Load()
		if f <= cur {
			f = cur + 1
		}
		if e.lastFence.CompareAndSwap(cur, f) {
			break
		}
	}
	fenceKey, err := e.fenceKeyFor(l.key) // checked by begin
	if err != nil {
		return 0, err
	}
	o := e.getOp(opRaise, false, l.cix, l.first)
	o.khash, o.key = l.khash, l.key
	defer o.unref()
	o.cmd = scripts.FenceRaise.AppendEvalSha(o.cmd[:0], 2, 2)
	o.cmd = resp.AppendBulkString(o.cmd, l.key)
	o.cmd = resp.AppendBulkString(o.cmd, fenceKey)
	o.cmd = resp.AppendBulkString(o.cmd, l.token)
	o.cmd = resp.AppendBulkInt(o.cmd, f)
	o.fanout(time.Now().Add(mt), scripts.FenceRaise)
	if err := o.wait(ctx); err != nil {
		return 0, err
	}
	if o.granted() >= e.q {
		return f, nil
	}
	return 0, o.quorumError(ErrNotAcquired, nil)
}

func appendFencedSet(dst []byte, key, fenceKey, token string, ms int64) []byte {
	dst = scripts.FenceAcquire.AppendEvalSha(dst, 2, 2)
	dst = resp.AppendBulkString(dst, key)
	dst = resp.AppendBulkString(dst, fenceKey)
	dst = resp.AppendBulkString(dst, token)
	return resp.AppendBulkInt(dst, ms)
}

func appendSet(dst []byte, key, token string, ms int64) []byte {
	dst = append(dst, "*6\r\n$3\r\nSET\r\n"...)
	dst = resp.AppendBulkString(dst, key)
	dst = resp.AppendBulkString(dst, token)
	dst = append(dst, "$2\r\nNX\r\n$2\r\nPX\r\n"...)
	return resp.AppendBulkInt(dst, ms)
}

func (e *Engine) appendRelease(dst []byte, key, token string) []byte {
	if e.release == scripts.Release {
		dst = scripts.Release.AppendEvalSha(dst, 1, 1)
		dst = resp.AppendBulkString(dst, key)
		return resp.AppendBulkString(dst, token)
	}
	dst = e.release.AppendEvalSha(dst, 1, 2)
	dst = resp.AppendBulkString(dst, key)
	dst = resp.AppendBulkString(dst, token)
	return resp.AppendBulkString(dst, e.cfg.ReleaseChannel)
}

func appendExtend(dst []byte, key, token string, ms int64) []byte {
	dst = scripts.Extend.AppendEvalSha(dst, 1, 2)
	dst = resp.AppendBulkString(dst, key)
	dst = resp.AppendBulkString(dst, token)
	return resp.AppendBulkInt(dst, ms)
}

// Stats are counters of an Engine since New.
type Stats struct {
	Acquired     uint64   // successful acquisitions
	Failed       uint64   // acquisitions a quorum refused (held) or granted too late
	Unavailable  uint64   // acquisitions too few masters answered
	Cancelled    uint64   // acquisitions abandoned because ctx ended
	Released     uint64   // unlocks confirmed by a quorum
	Lost         uint64   // unlocks that found the lock gone
	Extended     uint64   // successful extensions
	ExtendFailed uint64   // failed extensions
	MasterErrors []uint64 // per master: timeouts, I/O and server errors
	// QuarantinedUntil is, per master, when its restart quarantine ends
	// (zero time: not quarantined).
	QuarantinedUntil []time.Time
	// Cluster members (ClusterPrefix): -MOVED and -ASK replies followed,
	// and slot map reloads, summed over members.
	ClusterMoved, ClusterAsked, ClusterRefreshes uint64
}

// Stats returns the Engine's counters.
func (e *Engine) Stats() Stats {
	s := Stats{
		Acquired: e.acquired.Load(), Failed: e.failed.Load(), Unavailable: e.unavailable.Load(), Cancelled: e.cancelled.Load(),
		Released: e.released.Load(), Lost: e.lost.Load(), Extended: e.extended.Load(),
		ExtendFailed: e.extendFailed.Load(), MasterErrors: make([]uint64, e.n),
	}
	for i := range e.masterErrs {
		s.MasterErrors[i] = e.masterErrs[i].Load()
	}
	s.QuarantinedUntil = make([]time.Time, e.n)
	for i := range e.quar {
		if e.quarantined(i) {
			s.QuarantinedUntil[i] = e.epoch.Add(time.Duration(e.quar[i].Load()))
		}
	}
	for _, cl := range e.clusters {
		if cl != nil {
			cs := cl.Stats()
			s.ClusterMoved += cs.Moved
			s.ClusterAsked += cs.Asked
			s.ClusterRefreshes += cs.Refreshes
		}
	}
	return s
}
