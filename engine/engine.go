package engine

import (
	"context"
	"hash/maphash"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/scripts"
)

// TokenLen is the length of generated tokens: 20 random bytes, hex-encoded.
const TokenLen = 40

// Engine takes Redlock locks over N masters. It is safe for concurrent use
// by any number of goroutines. Create it with [New]; Close it when done.
type Engine struct {
	cfg   Config
	obs   Observer // cfg.Observer; nil when none
	addrs []string
	conns [][]*conn.Conn // [master][connection]
	fan   [][]master     // what fan-outs send on: conns, or a test's fake
	n, q  int
	rr    atomic.Uint32
	seed  maphash.Seed // of keyHash and connFor: fixed for the engine's life
	epoch time.Time    // monotonic origin of Lock deadlines
	ops   sync.Pool
	close sync.Once

	closed                            atomic.Bool
	closing                           chan struct{} // closed by Close: wakes calls sleeping between tries
	acquired, failed, unavailable     atomic.Uint64
	released, lost, relUnavailable    atomic.Uint64
	locksLost                         atomic.Uint64
	extended, extendFailed, cancelled atomic.Uint64
	handOffs                          atomic.Uint64 // hand-offs sent as one script per master (sendHandOff)
	masterErrs                        []atomic.Uint64

	// Master state, followed through the first connection of each master
	// (see watch); restart quarantine through every connection (serverUp).
	logMu      sync.Mutex
	mlog       []masterLog // guarded by logMu
	upCount    int         // guarded by logMu
	quorumLost bool        // guarded by logMu
	quorumSeen bool        // a quorum voted once (guarded by logMu): only then can it be lost
	// lastRun is the run_id of the server last met at each address of
	// each member (restart quarantine, quarantineFrom). Guarded by logMu.
	lastRun map[serverAt]string

	// Restart quarantine (see Config.DisableQuarantine, masters.go).
	quar []atomic.Int64             // per master: quarantined until (ns since epoch), 0: not
	hint atomic.Pointer[cachedHint] // the latest fresh-masters hint (cachedFreshHint)
	// Clock jumps the clock check saw (Config.DisableClockCheck), forward
	// and backward, all masters together.
	jumpsAhead, jumpsBack atomic.Uint64

	lastFence atomic.Int64 // largest fencing token this engine issued

	release *conn.Script // scripts.Release, or scripts.ReleaseNotify with a ReleaseChannel
	// clusters[i] is member i when it is a Redis Cluster (cluster.go);
	// nil when every member is a standalone master.
	clusters []*conn.Cluster
	// Merges of releases and extensions (Config.MergeMax); nil: off.
	releaseMerge, extendMerge *conn.Merge
	readReleaseMerge          *conn.Merge        // RWLock readers' releases
	readAcquireMerge          *conn.Merge        // and acquisitions
	subs                      []*conn.Subscriber // per master, with a ReleaseChannel: release notifications

	keep     keeper   // the watchdog and Done's scheduler (keeper.go)
	waits    waitRoom // blocked Lock calls per key (wait.go)
	watchers keyWatch // Election.Observe's wake-ups (election.go)
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
	names, members := cfg.members()
	e := &Engine{cfg: cfg, addrs: names, n: len(names), epoch: time.Now(), seed: maphash.MakeSeed(), closing: make(chan struct{})}
	e.q = e.n/2 + 1
	e.release = scripts.Release
	releaseMulti, releaseArgs := scripts.ReleaseMulti, 1
	if cfg.ReleaseChannel != "" {
		e.release = scripts.ReleaseNotify
		releaseMulti, releaseArgs = scripts.ReleaseNotifyMulti, 2
	}
	// Every script is loaded at each connection's handshake: a NOSCRIPT
	// answer is re-sent as EVAL only when nothing of its key was sent
	// after it (conn keeps one key's order), else the call fails — an
	// election's first record right after its lock did, when the election
	// scripts were not among these.
	loaded := scripts.Engine()
	if cfg.MergeMax >= 0 {
		max := cfg.MergeMax
		if max == 0 {
			max = DefaultMergeMax
		}
		e.releaseMerge = conn.NewMerge(e.release, releaseMulti, releaseArgs, max)
		e.extendMerge = conn.NewMerge(scripts.Extend, scripts.ExtendMulti, 2, max)
		e.readReleaseMerge = conn.NewMerge(scripts.ReadRelease, scripts.ReadReleaseMulti, 1, max)
		e.readAcquireMerge = conn.NewMerge(scripts.ReadAcquire, scripts.ReadAcquireMulti, 2, max)
	}
	e.keep.init(e)
	e.waits.init(e)
	e.masterErrs = make([]atomic.Uint64, e.n)
	e.ops.New = func() any {
		o := &op{e: e, done: make(chan struct{}, 1), all: make(chan struct{}, 1), results: make([]masterResult, e.n), cmd: make([]byte, 0, 128)}
		o.preset = append(o.presetBuf[:0], make([]int8, e.n)...) // in the op itself for n ≤ 8: read by every fan-out
		return o
	}
	e.mlog = make([]masterLog, e.n)
	e.quar = make([]atomic.Int64, e.n)
	e.conns = make([][]*conn.Conn, e.n)
	e.fan = make([][]master, e.n)
	e.obs = cfg.Observer
	for i, a := range names {
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
		if !cfg.DisableClockCheck {
			cc.OnClockJump = func(j conn.ClockJump) { e.clockJumped(i, j) }
			// The drift allowance of the interval, capped at MaxTTL's: idle
			// connections read the clock every ClockRefresh anyway.
			cc.ClockAllowance = func(d time.Duration) time.Duration { return e.cfg.drift(min(d, e.cfg.MaxTTL)) }
		}
		user := cfg.Conn.OnState
		cc.OnState = func(sc conn.StateChange) {
			e.watch(i, sc)
			if user != nil {
				user(sc)
			}
		}
		sub := a
		if seeds := members[i]; seeds != nil {
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
				e.watchers.notified(string(key))
			}))
		}
	}
	return e, nil
}

// Quorum returns N/2+1.
func (e *Engine) Quorum() int { return e.q }

// Masters returns every member's name in member order: a master's
// address, or a cluster member's [ClusterMember.String].
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
		close(e.closing)
		e.keep.close()
		e.waits.close()
		e.watchers.close()
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
		return 0 // no hash to compute
	}
	cix, _ := e.route(key)
	return cix
}

// keyHash is the conn.Request.KeyHash of key: requests on one key keep
// their order around merged releases and extensions. Never 0. A
// collision only makes a connection write held releases earlier (safe).
// hash/maphash: 7 ns for a 54-byte key where FNV-1a took 47.
func (e *Engine) keyHash(key string) uint64 {
	return maphash.String(e.seed, key) | 1
}

// route is key's connection index (connFor: the high half of keyHash,
// which its low bit leaves as it is) and KeyHash, from one hash: what a
// Lock keeps.
func (e *Engine) route(key string) (cix uint32, khash uint64) {
	khash = e.keyHash(key)
	if e.cfg.ConnsPerMaster != 1 {
		cix = uint32(khash >> 32)
	}
	return cix, khash
}

// nextConn chooses a connection index round robin, for commands that are
// not on one lock's key (Broadcast).
func (e *Engine) nextConn() uint32 {
	if e.cfg.ConnsPerMaster == 1 {
		return 0
	}
	return e.rr.Add(1)
}

// firstMaster chooses the master a lock's fan-outs start with, at random
// across locks so that no master is always enqueued last (the last one gets
// the smallest write batches and answers last). A lock keeps its order for
// acquire, extend and release: the release then starts with the masters
// that answered the acquire first rather than with its stragglers. The
// runtime's per-thread generator: a shared counter bounced between the
// cores on every acquisition.
func (e *Engine) firstMaster() int { return rand.IntN(e.n) }

func (e *Engine) pick(i int, cix uint32) master {
	cs := e.fan[i]
	if len(cs) == 1 {
		return cs[0]
	}
	return cs[cix%uint32(len(cs))]
}

// Stats are counters of an Engine since New.
type Stats struct {
	Acquired    uint64 // successful acquisitions
	Failed      uint64 // acquisitions a quorum refused (held) or granted too late
	Unavailable uint64 // acquisitions too few masters answered
	Cancelled   uint64 // acquisitions abandoned because ctx ended
	// Unlocks of locks this engine granted (an attached lock's Unlock —
	// the proxy's — is counted by its caller): Released, confirmed by a
	// quorum; Lost, a quorum answered and fewer held the token (it had
	// expired or been taken over); ReleaseUnavailable, too few masters
	// answered to tell. As [Observer.Release] reports them.
	Released, Lost, ReleaseUnavailable uint64
	// LocksLost are locks that ended other than by Unlock (an extension
	// failed, the validity ran out, the hold limit): as [Observer.Lost].
	LocksLost    uint64
	Extended     uint64   // successful extensions
	ExtendFailed uint64   // failed extensions
	MasterErrors []uint64 // per master: timeouts, I/O and server errors
	// ClockJumpsAhead and ClockJumpsBack count the masters' clock jumps
	// the clock check saw (Config.DisableClockCheck): forward (the master
	// was quarantined) and backward (logged only).
	ClockJumpsAhead, ClockJumpsBack uint64
	// QuarantinedUntil is, per master, when its restart quarantine ends
	// (zero time: not quarantined).
	QuarantinedUntil []time.Time
	// Cluster members (Config.Clusters): -MOVED and -ASK replies followed,
	// and slot map reloads, summed over members.
	ClusterMoved, ClusterAsked, ClusterRefreshes uint64
	// Waiting is the number of Lock calls waiting now, over every key;
	// HandOffs counts the unlocks whose release went to the masters in
	// one script with the acquire of the key's longest waiter (the
	// hand-off in one round trip, docs/algorithm.md "Waiting").
	Waiting  int
	HandOffs uint64
}

// Stats returns the Engine's counters.
func (e *Engine) Stats() Stats {
	s := Stats{
		Acquired: e.acquired.Load(), Failed: e.failed.Load(), Unavailable: e.unavailable.Load(), Cancelled: e.cancelled.Load(),
		Released: e.released.Load(), Lost: e.lost.Load(), ReleaseUnavailable: e.relUnavailable.Load(),
		LocksLost: e.locksLost.Load(), Extended: e.extended.Load(),
		ExtendFailed: e.extendFailed.Load(), MasterErrors: make([]uint64, e.n),
		ClockJumpsAhead: e.jumpsAhead.Load(), ClockJumpsBack: e.jumpsBack.Load(),
		Waiting: int(e.waits.n.Load()), HandOffs: e.handOffs.Load(),
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
