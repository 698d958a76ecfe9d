package proxy

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/internal/test/clockfront"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/relay"
	"github.com/redlock-dev/redlock/proxy/internal/lockcmds"
	"github.com/redlock-dev/redlock/proxy/internal/redisson"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// The grant rule (docs/safety.md, "The grant rule"; ../shared/DESIGN.md
// §5) as one table: every entry point that grants, extends or re-enters a
// lock — the engine's kinds, each proxy lock command and recognised
// library script, Redisson's scripts and `redlock lock` — is a row, each
// property a column, and TestGrantRule checks every cell against real
// redis-server masters, two proxies (two engines) over them. A cell that
// does not apply says why. The quorum reads that report a lock's state
// are rows of column (a) (grantrule_reads_test.go). TestGrantRuleTableComplete fails when an entry
// point exists that the table does not list.

// ruleID names a property of the grant rule.
type ruleID byte

const (
	ruleQuarantine ruleID = 'a' // no vote from a master in restart quarantine
	ruleMaxTTL     ruleID = 'b' // TTL at most MaxTTL (the quarantine period rests on it)
	ruleValid      ruleID = 'c' // a grant is returned only while valid, checked last
	ruleCleanup    ruleID = 'd' // cleanup removes only what the attempt created
	ruleOnMasters  ruleID = 'e' // grant-deciding state lives on the masters, not in one process
	ruleFencing    ruleID = 'f' // fencing tokens strictly increase across holders
	// (g) No vote from a master whose clock jumped forward since the
	// previous reading (the clock check quarantines it before the batch's
	// grants count): checked for every acquisition in TestGrantRule.
	ruleClockJump ruleID = 'g'
	// (h) A call that reports work done under a lock (Engine.Do,
	// Election.Lead, redlock lock's exit status) reports the loss when
	// the validity ended before it returned, read from the clock.
	ruleOutcome ruleID = 'h'
	// (i) A duplicated request — the same arguments and request id, sent
	// again at once through another proxy — acts once.
	ruleOnce ruleID = 'i'
)

// outcome is what an entry point answered.
type outcome struct {
	granted bool
	fence   int64  // the fencing token of a fenced grant
	text    string // the reply, error or exit status, for messages
	// set is a set's handle (TryLockAll, LockAll, LockSet.Extend), whose
	// validity is checked when the call returns.
	set *engine.LockSet
}

// ruleEntry is one entry point.
type ruleEntry struct {
	name string
	// method is the entry point in its own package's table: an engine
	// method ("Engine.TryLock"), a proxy command ("set"), a script table
	// ("LibTable", "rTable") or a redlock subcommand ("lock").
	method  string
	acquire bool // takes a free key; otherwise it keeps (extends, re-enters) a held one
	fenced  bool // it returns a fencing token
	set     bool // it takes or keeps several keys one after another (key and key+":2")
	// callerToken: the client chooses the token, so a failed attempt may
	// meet the client's own valid lock under it (property d).
	callerToken bool
	// holdKey is the master key whose value marks a holder that an
	// acquisition must respect (nil: the key itself).
	holdKey func(key string) string
	// holdWith takes the key for a holder that excludes this entry's
	// acquisition (nil: take itself; a read lock's is a write lock, and
	// redlock lock's, which releases when its command exits, a plain lock).
	holdWith func(x *ruleRun, inst int, key, tok string, ttl time.Duration) outcome
	// take acquires key for ttl as token (or owner) tok through instance
	// inst; for a keeping entry it sets up the hold that keep keeps.
	take func(x *ruleRun, inst int, key, tok string, ttl time.Duration) outcome
	// keep extends or re-enters the hold tok on key through inst.
	keep func(x *ruleRun, inst int, key, tok string, ttl time.Duration) outcome
	// work runs work under a lock taken for ttl through inst, calling
	// during while it holds; granted is the success it reports (property
	// h). nil for an entry that reports no work (na says so).
	work func(x *ruleRun, inst int, key string, ttl time.Duration, during func()) outcome
	// countdown: keep is an unlock of one level of a hold of count 2 (a
	// nested unlock), answered 0; with x.latch changed it is a new request.
	countdown bool
	latchless bool // a countdown whose unlock carries no request id
	// exclude is another owner's acquisition, refused while the hold a
	// keeping entry keeps is held (nil: take's, for Redisson's rows; SET NX
	// for the others).
	exclude func(x *ruleRun, inst int, key, tok string, ttl time.Duration) outcome
	// na says, per property, why it does not apply.
	na map[ruleID]string
	// blocker is the suffix of a key the row has another holder keep
	// (not the attempt's: the cleanup checks leave it alone).
	blocker string
}

// ruleRun is one property's run: masters and two proxies over them.
type ruleRun struct {
	t       *testing.T
	set     *localmaster.Set
	p       [2]*env
	masters []*redis.Client
	cli     string // the redlock binary
	handles sync.Map
	maxTTL  time.Duration
	// cliFresh runs redlock lock with --fresh-masters; cliDrift is its
	// --drift-factor.
	cliFresh bool
	cliDrift string
	// addrs are the master addresses instance i uses (relays in column
	// c's latency run); pauser is instance 1's engine Observer.
	addrs  [2][]string
	pauser *pauser
	// latch is the request id of the nested unlocks' latch (nestedUnlock):
	// the same for every send unless changed.
	latch string
}

// pauser is an Observer that, once armed, holds up the goroutine of the
// next granted acquisition or successful extension (a pause between a
// set's keys).
type pauser struct {
	engine.NopObserver
	pause time.Duration
	armed atomic.Bool
}

func (p *pauser) Acquire(ev engine.AcquireEvent) {
	if ev.Result == engine.AcquireGranted && p.armed.CompareAndSwap(true, false) {
		time.Sleep(p.pause)
	}
}

func (p *pauser) Extend(ok, auto bool) {
	if ok && !auto && p.armed.CompareAndSwap(true, false) {
		time.Sleep(p.pause)
	}
}

// eng returns instance inst's engine.
func (x *ruleRun) eng(inst int) *engine.Engine { return x.p[inst].srv.Engine() }

// cmd sends one command through instance inst's proxy, on a connection
// of its own. It may run on goroutines of the test's (column i): a failure
// to get a reply is an error of t, and the reply "".
func (x *ruleRun) cmd(t *testing.T, inst int, args ...string) string {
	r := sendOnce(x.p[inst].addr, args...)
	if strings.HasPrefix(r, "dial: ") || strings.HasPrefix(r, "write: ") || strings.HasPrefix(r, "read: ") {
		t.Errorf("%q through proxy %d: %s", args, inst, r)
		return ""
	}
	return r
}

// value returns key's value on master i ("" when absent).
func (x *ruleRun) value(i int, key string) string {
	v, _ := x.masters[i].Get(context.Background(), key).Result()
	return v
}

// write writes key=value on the masters idx, for ttl.
func (x *ruleRun) write(t *testing.T, key, value string, ttl time.Duration, idx ...int) {
	t.Helper()
	for _, i := range idx {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		// The first command on a pooled connection to a restarted master
		// may meet the old, closed socket.
		for err := x.masters[i].Set(ctx, key, value, ttl).Err(); err != nil; err = x.masters[i].Set(ctx, key, value, ttl).Err() {
			if ctx.Err() != nil {
				t.Fatalf("master %d: SET %s: %v", i, key, err)
			}
		}
		cancel()
	}
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func engineOutcome(err error) outcome {
	if err != nil {
		return outcome{text: err.Error()}
	}
	return outcome{granted: true, text: "granted"}
}

func lockOutcome(l *engine.Lock, err error) outcome {
	o := engineOutcome(err)
	if err == nil {
		o.fence = l.FencingToken()
	}
	return o
}

// opCtx bounds one attempt (a waiting entry waits at most this long).
func opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 500*time.Millisecond)
}

// setOutcome is a set's outcome, with the set.
func setOutcome(s *engine.LockSet, err error) outcome {
	o := engineOutcome(err)
	o.set = s
	return o
}

// tryLockAll takes key and key+":2" with TryLockAll.
func tryLockAll(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
	ctx, cancel := opCtx()
	defer cancel()
	s, err := x.eng(inst).TryLockAll(ctx, []string{key, key + ":2"}, ttl)
	if err == nil {
		x.handles.Store(key, s)
	}
	return setOutcome(s, err)
}

// handOff is Engine.Lock granted by the FIFO hand-off in one round trip
// (engine/handoff.go): a Lock call of the same engine waits while a lock
// on key is held, and the holder's Unlock sends its release and the
// waiter's acquire as one script per master; the outcome is the waiter's
// (its first try finds the key held and it waits; the hand-off is its
// second and last). The holder is a lock of the engine when the key is
// free; when the column has another holder on the masters, a handle on a
// token no master holds (its Unlock releases nothing and hands the key on
// all the same), so that every column judges a hand-off's grant.
func handOff(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e := x.eng(inst)
	holdTTL := min(5*time.Second, x.maxTTL)
	var h enginex.Lock
	if l, err := e.TryLock(ctx, key, holdTTL); err == nil {
		h = l
	} else {
		h = enginex.Open(e).Attach(key, "hand-off-holder-0123456789", holdTTL)
	}
	type result struct {
		l   *engine.Lock
		err error
	}
	ch := make(chan result, 1)
	tries := func() uint64 { s := e.Stats(); return s.Failed + s.Unavailable }
	before := tries()
	go func() {
		l, err := e.Lock(ctx, key, ttl, engine.WithMaxTries(2), engine.WithRetryDelay(2*time.Second))
		ch <- result{l, err}
	}()
	var r result
	for waiting := false; !waiting; {
		select {
		case r = <-ch: // refused before it queued (a bad TTL)
			h.Unlock(ctx)
			return lockOutcome(r.l, r.err)
		case <-time.After(time.Millisecond):
			waiting = tries() > before
		}
	}
	time.Sleep(20 * time.Millisecond) // past its first try's end: it waits
	handOffs := e.Stats().HandOffs
	h.Unlock(context.Background())
	r = <-ch
	if e.Stats().HandOffs == handOffs {
		x.t.Errorf("the holder's Unlock did not hand the key off in one script (the row tests Engine.Lock's own tries)")
	}
	if r.err == nil {
		x.handles.Store(key, r.l)
	}
	return lockOutcome(r.l, r.err)
}

// engineEntries are the engine's entry points, through each proxy's engine.
func engineEntries() []ruleEntry {
	tryLock := func(opts ...engine.Option) func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
		return func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
			ctx, cancel := opCtx()
			defer cancel()
			l, err := x.eng(inst).TryLock(ctx, key, ttl, opts...)
			if err == nil {
				x.handles.Store(key, l)
			}
			return lockOutcome(l, err)
		}
	}
	// TryLockAsync's result comes to a callback on a master connection's
	// reader; the row waits for it.
	tryLockAsync := func(opts ...engine.Option) func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
		return func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
			ctx, cancel := opCtx()
			defer cancel()
			type result struct {
				l   *engine.Lock
				err error
			}
			ch := make(chan result, 1)
			x.eng(inst).TryLockAsync(ctx, key, ttl, func(l *engine.Lock, err error) { ch <- result{l, err} }, opts...)
			r := <-ch
			if r.err == nil {
				x.handles.Store(key, r.l)
			}
			return lockOutcome(r.l, r.err)
		}
	}
	waitOne := []engine.Option{engine.WithMaxTries(1)}
	notFenced := map[ruleID]string{ruleFencing: "not fenced (its WithFencing form is a row)"}
	holderProcess := "the holder's own process keeps it: another process holds another lock (the masters decide between them, column e of the acquisitions)"
	keepNA := map[ruleID]string{ruleCleanup: "an extension removes nothing when it fails", ruleOnMasters: holderProcess, ruleFencing: "an extension keeps the hold's token"}
	rw := func(x *ruleRun, inst int, key string) *engine.RWLock {
		rw, err := x.eng(inst).NewRWLock(key)
		if err != nil {
			x.t.Fatal(err)
		}
		return rw
	}
	sem := func(x *ruleRun, inst int, key string) *engine.Semaphore {
		s, err := x.eng(inst).NewSemaphore(key, 1)
		if err != nil {
			x.t.Fatal(err)
		}
		return s
	}
	permit := func(key string) string { return key + ":permit:0" }
	// Readers share: the holder that excludes a reader is a writer.
	writer := func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
		ctx, cancel := opCtx()
		defer cancel()
		return lockOutcome(rw(x, inst, key).TryLock(ctx, ttl))
	}
	reentrant := func(wait bool) func(x *ruleRun, inst int, key, tok string, ttl time.Duration) outcome {
		return func(x *ruleRun, inst int, key, tok string, ttl time.Duration) outcome {
			r, err := x.eng(inst).NewReentrant(key, tok)
			if err != nil {
				return engineOutcome(err)
			}
			ctx, cancel := opCtx()
			defer cancel()
			if wait {
				err = r.Lock(ctx, ttl, waitOne...)
			} else {
				err = r.TryLock(ctx, ttl)
			}
			if err == nil {
				x.handles.Store(key, r)
			}
			return engineOutcome(err)
		}
	}
	// An election is a fenced lock on its name: the rows campaign for the
	// election named key (value tok), and the leadership's term is the
	// fencing token.
	campaign := func(wait bool) func(x *ruleRun, inst int, key, tok string, ttl time.Duration) outcome {
		return func(x *ruleRun, inst int, key, tok string, ttl time.Duration) outcome {
			el, err := x.eng(inst).NewElection(key, ttl)
			if err != nil {
				return engineOutcome(err)
			}
			ctx, cancel := opCtx()
			defer cancel()
			var ld *engine.Leadership
			if wait {
				ld, err = el.Campaign(ctx, tok)
			} else {
				ld, err = el.TryCampaign(ctx, tok)
			}
			o := engineOutcome(err)
			if err == nil {
				x.handles.Store(key, ld)
				o.fence = ld.Term()
			}
			return o
		}
	}
	fair := func(wait bool) func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
		return func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
			fl, err := x.eng(inst).NewFairLock(key, 0)
			if err != nil {
				return engineOutcome(err)
			}
			ctx, cancel := opCtx()
			defer cancel()
			if wait {
				return lockOutcome(fl.Lock(ctx, ttl, waitOne...))
			}
			return lockOutcome(fl.TryLock(ctx, ttl))
		}
	}
	noFence := map[ruleID]string{ruleFencing: "not fenced (a FairLock refuses WithFencing)"}
	// Do and Lead report work done under the lock: their own return is a
	// row (an outcome, h), and their grant obeys every other column. The
	// holder that excludes them is a plain lock (a leader): they release
	// (resign) when fn returns.
	plainHolder := func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
		return lockOutcome(x.eng(inst).TryLock(context.Background(), key, ttl))
	}
	do := func(x *ruleRun, inst int, key string, ttl time.Duration, ctx context.Context, during func()) outcome {
		var fence int64
		err := x.eng(inst).Do(ctx, key, ttl, func(fctx context.Context) error {
			fence = engine.LockFrom(fctx).FencingToken()
			during()
			return nil
		}, engine.WithFencing(), engine.WithMaxTries(1))
		o := engineOutcome(err)
		o.fence = fence
		return o
	}
	lead := func(x *ruleRun, inst int, key, tok string, ttl time.Duration, ctx context.Context, during func()) outcome {
		el, err := x.eng(inst).NewElection(key, ttl)
		if err != nil {
			return engineOutcome(err)
		}
		var term int64
		err = el.Lead(ctx, tok, func(_ context.Context, ld *engine.Leadership) error {
			term = ld.Term()
			during()
			return nil
		})
		o := engineOutcome(err)
		o.fence = term
		return o
	}
	workCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 30*time.Second)
	}
	return []ruleEntry{
		{name: "Engine.Do", method: "Engine.Do", acquire: true, fenced: true, holdWith: plainHolder,
			take: func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
				ctx, cancel := opCtx()
				defer cancel()
				return do(x, inst, key, ttl, ctx, func() {})
			},
			work: func(x *ruleRun, inst int, key string, ttl time.Duration, during func()) outcome {
				ctx, cancel := workCtx()
				defer cancel()
				return do(x, inst, key, ttl, ctx, during)
			}},
		{name: "Election.Lead", method: "Election.Lead", acquire: true, fenced: true, holdWith: campaign(false),
			take: func(x *ruleRun, inst int, key, tok string, ttl time.Duration) outcome {
				ctx, cancel := opCtx()
				defer cancel()
				return lead(x, inst, key, tok, ttl, ctx, func() {})
			},
			work: func(x *ruleRun, inst int, key string, ttl time.Duration, during func()) outcome {
				ctx, cancel := workCtx()
				defer cancel()
				return lead(x, inst, key, "leader", ttl, ctx, during)
			}},
		{name: "FairLock.TryLock", method: "FairLock.TryLock", acquire: true, take: fair(false), na: noFence},
		{name: "FairLock.Lock", method: "FairLock.Lock", acquire: true, take: fair(true), na: noFence},
		{name: "Election.TryCampaign", method: "Election.TryCampaign", acquire: true, fenced: true, take: campaign(false)},
		{name: "Election.Campaign", method: "Election.Campaign", acquire: true, fenced: true, take: campaign(true)},
		{name: "Engine.TryLock", method: "Engine.TryLock", acquire: true, take: tryLock(), na: notFenced},
		{name: "Engine.TryLock WithFencing", method: "Engine.TryLock", acquire: true, fenced: true, take: tryLock(engine.WithFencing())},
		{name: "Engine.TryLockAsync", method: "Engine.TryLockAsync", acquire: true, take: tryLockAsync(), na: notFenced},
		{name: "Engine.TryLockAsync WithFencing", method: "Engine.TryLockAsync", acquire: true, fenced: true, take: tryLockAsync(engine.WithFencing())},
		{name: "Engine.Lock", method: "Engine.Lock", acquire: true, na: notFenced, take: func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
			ctx, cancel := opCtx()
			defer cancel()
			return lockOutcome(x.eng(inst).Lock(ctx, key, ttl, waitOne...))
		}},
		{name: "Engine.Lock hand-off", method: "Engine.Lock", acquire: true, na: notFenced, take: handOff},
		{name: "Engine.TryLockAll", method: "Engine.TryLockAll", acquire: true, set: true, na: notFenced, take: tryLockAll},
		{name: "Engine.LockAll", method: "Engine.LockAll", acquire: true, set: true, na: notFenced, take: func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
			ctx, cancel := opCtx()
			defer cancel()
			return setOutcome(x.eng(inst).LockAll(ctx, []string{key, key + ":2"}, ttl, waitOne...))
		}},
		{name: "Reentrant.TryLock", method: "Reentrant.TryLock", acquire: true, take: reentrant(false), na: notFenced},
		{name: "Reentrant.Lock", method: "Reentrant.Lock", acquire: true, take: reentrant(true), na: notFenced},
		{name: "RWLock.TryRLock", method: "RWLock.TryRLock", acquire: true, na: notFenced, holdWith: writer, take: func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
			ctx, cancel := opCtx()
			defer cancel()
			return lockOutcome(rw(x, inst, key).TryRLock(ctx, ttl))
		}},
		{name: "RWLock.RLock", method: "RWLock.RLock", acquire: true, na: notFenced, holdWith: writer, take: func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
			ctx, cancel := opCtx()
			defer cancel()
			return lockOutcome(rw(x, inst, key).RLock(ctx, ttl, waitOne...))
		}},
		{name: "RWLock.TryLock", method: "RWLock.TryLock", acquire: true, na: notFenced, take: func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
			ctx, cancel := opCtx()
			defer cancel()
			return lockOutcome(rw(x, inst, key).TryLock(ctx, ttl))
		}},
		{name: "RWLock.Lock", method: "RWLock.Lock", acquire: true, na: notFenced, take: func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
			ctx, cancel := opCtx()
			defer cancel()
			return lockOutcome(rw(x, inst, key).Lock(ctx, ttl, waitOne...))
		}},
		{name: "Semaphore.TryAcquire", method: "Semaphore.TryAcquire", acquire: true, holdKey: permit, na: notFenced, take: func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
			ctx, cancel := opCtx()
			defer cancel()
			return lockOutcome(sem(x, inst, key).TryAcquire(ctx, ttl))
		}},
		{name: "Semaphore.Acquire", method: "Semaphore.Acquire", acquire: true, holdKey: permit, na: notFenced, take: func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
			ctx, cancel := opCtx()
			defer cancel()
			return lockOutcome(sem(x, inst, key).Acquire(ctx, ttl, waitOne...))
		}},
		{name: "Lock.Extend", method: "Lock.Extend", take: tryLock(), na: keepNA, keep: func(x *ruleRun, _ int, key, _ string, ttl time.Duration) outcome {
			l, _ := x.handles.Load(key)
			ctx, cancel := opCtx()
			defer cancel()
			return engineOutcome(l.(*engine.Lock).Extend(ctx, ttl))
		}},
		{name: "Lock.ExtendAsync", method: "Lock.ExtendAsync", take: tryLock(), na: keepNA, keep: func(x *ruleRun, _ int, key, _ string, ttl time.Duration) outcome {
			l, _ := x.handles.Load(key)
			ch := make(chan error, 1)
			l.(*engine.Lock).ExtendAsync(ttl, func(err error) { ch <- err })
			return engineOutcome(<-ch)
		}},
		{name: "LockSet.Extend", method: "LockSet.Extend", set: true, na: keepNA, take: tryLockAll, keep: func(x *ruleRun, _ int, key, _ string, ttl time.Duration) outcome {
			h, _ := x.handles.Load(key)
			s := h.(*engine.LockSet)
			ctx, cancel := opCtx()
			defer cancel()
			o := engineOutcome(s.Extend(ctx, ttl))
			o.set = s
			return o
		}},
		{name: "Reentrant re-entry", method: "Reentrant.TryLock", take: reentrant(false), na: keepNA, keep: func(x *ruleRun, _ int, key, _ string, ttl time.Duration) outcome {
			r, _ := x.handles.Load(key)
			ctx, cancel := opCtx()
			defer cancel()
			return engineOutcome(r.(*engine.Reentrant).TryLock(ctx, ttl))
		}},
		// A nested frame's Unlock grants nothing; it reports the frame's
		// work: nil only while the hold is valid (found by the review of
		// issue #46: it counted down and said nil after the loss).
		{name: "Reentrant.Unlock, a nested frame", method: "Reentrant.Unlock",
			na: map[ruleID]string{
				ruleQuarantine: "it counts a frame down and counts no vote (the last frame's release is Lock.Unlock's)",
				ruleMaxTTL:     "it sets no TTL", ruleValid: "it returns no grant",
				ruleCleanup:   "it removes nothing (the last frame's release is Lock.Unlock's)",
				ruleOnMasters: holderProcess, ruleFencing: "it returns no fencing token", ruleClockJump: "it counts no vote",
			},
			work: func(x *ruleRun, inst int, key string, ttl time.Duration, during func()) outcome {
				r, err := x.eng(inst).NewReentrant(key, "frames")
				if err != nil {
					return engineOutcome(err)
				}
				ctx, cancel := workCtx()
				defer cancel()
				for range 2 {
					if err := r.TryLock(ctx, ttl); err != nil {
						return engineOutcome(err)
					}
				}
				during()
				o := engineOutcome(r.Unlock(ctx)) // the nested frame's report
				r.Unlock(ctx)
				return o
			}},
	}
}

// proxyEntries are the proxy's lock commands and recognised library
// scripts (every lockcmds.LibTable entry that acquires or extends: a new one is a
// row by construction), and Redisson's scripts (redisson.Table).
func proxyEntries(t *testing.T) []ruleEntry {
	isGrantReply := func(r string) bool {
		return r == "+OK\r\n" || (strings.HasPrefix(r, ":") && r != ":0\r\n" && !strings.HasPrefix(r, ":-"))
	}
	send := func(args func(key, tok string, ttl time.Duration) []string) func(x *ruleRun, inst int, key, tok string, ttl time.Duration) outcome {
		return func(x *ruleRun, inst int, key, tok string, ttl time.Duration) outcome {
			r := x.cmd(x.t, inst, args(key, tok, ttl)...)
			o := outcome{granted: isGrantReply(r), text: r}
			if o.granted && strings.HasPrefix(r, ":") {
				o.fence, _ = strconv.ParseInt(strings.TrimSpace(r[1:]), 10, 64)
			}
			return o
		}
	}
	// direct sets up a hold by writing the token on every master.
	direct := func(x *ruleRun, _ int, key, tok string, ttl time.Duration) outcome {
		x.write(x.t, key, tok, ttl, 0, 1, 2, 3, 4)
		return outcome{granted: true, text: "set on every master"}
	}
	setNX := send(func(k, tok string, ttl time.Duration) []string { return []string{"SET", k, tok, "NX", "PX", ms(ttl)} })
	notFenced := map[ruleID]string{ruleFencing: "not fenced (REDLOCK.LOCK is the proxy's fenced acquisition)"}
	keepNA := map[ruleID]string{ruleCleanup: "an extension removes nothing when it fails", ruleFencing: "an extension keeps the hold's token"}
	entries := []ruleEntry{
		{name: "SET NX PX", method: "set", acquire: true, callerToken: true, take: setNX, na: notFenced},
		{name: "REDLOCK.LOCK", method: "redlock.lock", acquire: true, callerToken: true, fenced: true,
			take: send(func(k, tok string, ttl time.Duration) []string { return []string{"REDLOCK.LOCK", k, tok, ms(ttl)} })},
		{name: "PEXPIRE", method: "pexpire", take: direct, na: keepNA,
			keep: send(func(k, _ string, ttl time.Duration) []string { return []string{"PEXPIRE", k, ms(ttl)} })},
		{name: "SET IFEQ", method: "set", take: direct, na: keepNA,
			keep: send(func(k, tok string, ttl time.Duration) []string {
				return []string{"SET", k, tok, "IFEQ", tok, "PX", ms(ttl)}
			})},
	}
	for i := range lockcmds.LibTable {
		ls := &lockcmds.LibTable[i]
		if ls.Op != lockcmds.OpAcquire && ls.Op != lockcmds.OpExtend {
			continue
		}
		modes := []string{""}
		if ls.AddOrReplace {
			modes = []string{"1", "0"} // replace, add
		}
		for _, mode := range modes {
			args := func(k, tok string, ttl time.Duration) []string {
				argv := make([]string, max(ls.TokenArg, ls.TTLArg, ls.PrefixArg, 2)+1)
				argv[ls.TokenArg], argv[ls.TTLArg] = tok, ms(ttl)
				if ls.PrefixArg > 0 {
					argv[ls.PrefixArg] = strconv.Itoa(len(tok))
				}
				if mode != "" {
					argv[2] = mode
				}
				for len(argv) > 0 && argv[len(argv)-1] == "" {
					argv = argv[:len(argv)-1]
				}
				return append([]string{"EVALSHA", ls.SHA, "1", k}, argv...)
			}
			e := ruleEntry{name: ls.Name, method: "LibTable", acquire: ls.Op == lockcmds.OpAcquire, callerToken: true, na: notFenced}
			if mode != "" {
				e.name += " mode " + mode
			}
			if e.acquire {
				e.take = send(args)
			} else {
				e.take, e.keep, e.na = direct, send(args), keepNA
			}
			entries = append(entries, e)
		}
	}
	for i := range redisson.Table {
		rs := &redisson.Table[i]
		rEval := func(k, owner string, ttl time.Duration) []string {
			keys := []string{k}
			if rs.Keys == 2 {
				keys = append(keys, redisson.TokenPrefix+k)
			}
			argv := []string{ms(ttl), owner}
			return append(append([]string{"EVALSHA", rs.SHA, strconv.Itoa(len(keys))}, keys...), argv...)
		}
		// Redisson's tryLock answers nil when it acquired or re-entered,
		// else the holder's PTTL; tryLockAndGetToken {-1, token}.
		tryLock := func(x *ruleRun, inst int, key, owner string, ttl time.Duration) outcome {
			r := x.cmd(x.t, inst, rEval(key, owner, ttl)...)
			o := outcome{text: r}
			switch {
			case rs.Kind == redisson.KindFencedTryLockToken && strings.HasPrefix(r, "*2\r\n:-1\r\n:"):
				o.granted = true
				o.fence, _ = strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(r, "*2\r\n:-1\r\n:")), 10, 64)
			case rs.Kind != redisson.KindFencedTryLockToken && r == "$-1\r\n":
				o.granted = true
			}
			return o
		}
		switch rs.Kind {
		case redisson.KindTryLock, redisson.KindFencedTryLock, redisson.KindFencedTryLockToken:
			na := map[ruleID]string{ruleFencing: "its token is not returned (tryLockAndGetToken is a row)"}
			if rs.Kind == redisson.KindFencedTryLockToken {
				na = nil
			}
			entries = append(entries,
				ruleEntry{name: rs.Name, method: "rTable", acquire: true, fenced: rs.Kind == redisson.KindFencedTryLockToken, take: tryLock, na: na},
				ruleEntry{name: rs.Name + " re-entry", method: "rTable", take: tryLock, keep: tryLock, na: keepNA})
		case redisson.KindRenew:
			renew := func(x *ruleRun, inst int, key, owner string, ttl time.Duration) outcome {
				args := rEval(key, owner, ttl)
				r := x.cmd(x.t, inst, args...)
				return outcome{granted: r == ":1\r\n" || r == "*1\r\n:1\r\n", text: r}
			}
			// The hold a renewal keeps is a Redisson lock of the same
			// release (its tryLock, the first row of its family).
			take := func(x *ruleRun, inst int, key, owner string, ttl time.Duration) outcome {
				r := x.cmd(x.t, inst, "EVALSHA", redisson.Table[0].SHA, "1", key, ms(ttl), owner)
				return outcome{granted: r == "$-1\r\n", text: r}
			}
			if strings.HasPrefix(rs.Name, "node-redisson") {
				take = func(x *ruleRun, inst int, key, owner string, ttl time.Duration) outcome {
					sha := ""
					for _, o := range redisson.Table {
						if o.Kind == redisson.KindTryLock && strings.HasPrefix(o.Name, "node-redisson") {
							sha = o.SHA
						}
					}
					r := x.cmd(x.t, inst, "EVALSHA", sha, "1", key, ms(ttl), owner)
					return outcome{granted: r == "$-1\r\n", text: r}
				}
			}
			entries = append(entries, ruleEntry{name: rs.Name, method: "rTable", take: take, keep: renew, na: keepNA})
		case redisson.KindUnlock:
			// A nested unlock (count 2 → 1) resets the lease and answers
			// 0: an extension. (At count 1 it ends the hold.)
			family := redisson.Table[0].SHA // holds are the same whichever release took them
			if strings.HasPrefix(rs.Name, "node-redisson") {
				for _, o := range redisson.Table {
					if o.Kind == redisson.KindTryLock && strings.HasPrefix(o.Name, "node-redisson") {
						family = o.SHA
					}
				}
			}
			take := func(x *ruleRun, inst int, key, owner string, ttl time.Duration) outcome {
				var r string
				for range 2 {
					if r = x.cmd(x.t, inst, "EVALSHA", family, "1", key, ms(ttl), owner); r != "$-1\r\n" {
						return outcome{text: r}
					}
				}
				return outcome{granted: true, text: r}
			}
			unlock := nestedUnlock(rs, func(key, owner string, ttl time.Duration) ([]string, []string, string) {
				return []string{key, "redisson_lock__channel:" + key}, []string{"0", ms(ttl), owner}, "redisson_unlock_latch:" + key
			})
			entries = append(entries, ruleEntry{name: rs.Name + " nested", method: "rTable", take: take, keep: unlock, na: keepNA, countdown: true, latchless: rs.LatchArg == 0})
		case redisson.KindForceUnlock:
			// Not a grant: it ends the hold.
		case redisson.KindRWRead, redisson.KindRWWrite, redisson.KindRWUnlockWrite, redisson.KindRWRenew, redisson.KindRWRenewTask, redisson.KindRWRenewTask44:
			entries = append(entries, rwRuleEntries(rs)...)
		case redisson.KindFairTry, redisson.KindFairWait, redisson.KindFairUnlock:
			entries = append(entries, fairRuleEntries(rs)...)
		case redisson.KindFairForce, redisson.KindFairLeave:
			// Not a grant: forceUnlock ends the hold; acquireFailed
			// leaves the queue.
		case redisson.KindRWUnlockRead, redisson.KindRWForceRead, redisson.KindRWForceWrite, redisson.KindRWIsLocked:
			// Not a grant: a read unlock counts down (the TTL as it is)
			// or ends the lock; forceUnlock ends it; isLocked reads.
		default:
			t.Errorf("rTable kind %d (%s) is not classified in the grant rule table", rs.Kind, rs.Name)
		}
	}
	return entries
}

// rwRuleEntries are the rows of a Redisson RReadWriteLock script: the
// read and write tryLocks (acquiring, and re-entering), the nested write
// unlock (it resets the lease: an extension) and the read renewals; and,
// with the first RLock renewal of each shape, that renewal keeping a
// write hold (owner <id>:<thread>:write).
func rwRuleEntries(rs *redisson.Script) []ruleEntry {
	sha := func(file string) string {
		for _, o := range redisson.Table {
			if o.File == file {
				return o.SHA
			}
		}
		panic(file)
	}
	readSHA, writeSHA := sha("redisson-3.20.0-rwReadTryLock"), sha("redisson-3.20.0-rwWriteTryLock")
	tryReply := func(r string) outcome { return outcome{granted: r == "$-1\r\n", text: r} }
	read := func(x *ruleRun, inst int, key, owner string, ttl time.Duration) outcome {
		return tryReply(x.cmd(x.t, inst, "EVALSHA", readSHA, "2", key, "{"+key+"}:"+owner+":rwlock_timeout", ms(ttl), owner, owner+":write"))
	}
	write := func(x *ruleRun, inst int, key, owner string, ttl time.Duration) outcome {
		return tryReply(x.cmd(x.t, inst, "EVALSHA", writeSHA, "1", key, ms(ttl), owner+":write"))
	}
	twice := func(take func(*ruleRun, int, string, string, time.Duration) outcome) func(*ruleRun, int, string, string, time.Duration) outcome {
		return func(x *ruleRun, inst int, key, owner string, ttl time.Duration) outcome {
			if o := take(x, inst, key, owner, ttl); !o.granted {
				return o
			}
			return take(x, inst, key, owner, ttl)
		}
	}
	notFenced := map[ruleID]string{ruleFencing: "not fenced (Redisson's read-write lock has no token)"}
	keepNA := map[ruleID]string{ruleCleanup: "an extension removes nothing when it fails", ruleFencing: "not fenced"}
	renewed := func(r string) bool { return r == ":1\r\n" || r == "*1\r\n:1\r\n" }
	switch rs.Kind {
	case redisson.KindRWRead:
		return []ruleEntry{
			{name: rs.Name, method: "rTable", acquire: true, na: notFenced, take: read, holdWith: write},
			{name: rs.Name + " re-entry", method: "rTable", take: read, keep: read, na: keepNA, exclude: write},
		}
	case redisson.KindRWWrite:
		return []ruleEntry{
			{name: rs.Name, method: "rTable", acquire: true, na: notFenced, take: write},
			{name: rs.Name + " re-entry", method: "rTable", take: write, keep: write, na: keepNA},
		}
	case redisson.KindRWUnlockWrite:
		unlock := nestedUnlock(rs, func(key, owner string, ttl time.Duration) ([]string, []string, string) {
			return []string{key, "redisson_rwlock:{" + key + "}"}, []string{"1", ms(ttl), owner + ":write"}, "redisson_unlock_latch:{" + key + "}"
		})
		return []ruleEntry{{name: rs.Name + " nested", method: "rTable", take: twice(write), keep: unlock, na: keepNA, countdown: true, latchless: rs.LatchArg == 0}}
	}
	// The read renewals.
	renew := func(x *ruleRun, inst int, key, owner string, ttl time.Duration) outcome {
		args := []string{"EVALSHA", rs.SHA, "2", key, "{" + key + "}", ms(ttl)}
		if rs.Kind == redisson.KindRWRenewTask44 {
			args = append(args, "1")
		}
		r := x.cmd(x.t, inst, append(args, owner)...)
		return outcome{granted: renewed(r), text: r}
	}
	// Readers share: the owner a read hold excludes is a writer.
	out := []ruleEntry{{name: rs.Name, method: "rTable", take: read, keep: renew, na: keepNA, exclude: write}}
	if rs.Kind == redisson.KindRWRenew || rs.Kind == redisson.KindRWRenewTask44 {
		// RLock's renewal (its single and its batched text) keeping a write hold.
		file := "redisson-3.12.0-renewExpiration"
		if rs.Kind == redisson.KindRWRenewTask44 {
			file = "redisson-3.44.0-renewLocksBatch"
		}
		rlock := sha(file)
		out = append(out, ruleEntry{name: file + " of a read-write lock's write hold", method: "rTable", take: write, na: keepNA,
			keep: func(x *ruleRun, inst int, key, owner string, ttl time.Duration) outcome {
				r := x.cmd(x.t, inst, "EVALSHA", rlock, "1", key, ms(ttl), owner+":write")
				return outcome{granted: renewed(r), text: r}
			}})
	}
	return out
}

// nestedUnlock is the keep of a nested-unlock row: rs's unlock with the
// keys and arguments base returns, then (as the release sends them) the
// latch key (latch + ":<request id>"), the publish command and the
// latch's TTL; 0 (held, its lease reset) is the grant.
func nestedUnlock(rs *redisson.Script, base func(key, owner string, ttl time.Duration) (keys, argv []string, latch string)) func(x *ruleRun, inst int, key, owner string, ttl time.Duration) outcome {
	return func(x *ruleRun, inst int, key, owner string, ttl time.Duration) outcome {
		keys, argv, latch := base(key, owner, ttl)
		if rs.LatchArg > 0 {
			keys = append(keys, latch+":"+x.latch)
		}
		for len(argv) < rs.Argc {
			if len(argv) == rs.LatchArg {
				argv = append(argv, "10000")
			} else {
				argv = append(argv, "publish")
			}
		}
		r := x.cmd(x.t, inst, append(append([]string{"EVALSHA", rs.SHA, strconv.Itoa(len(keys))}, keys...), argv...)...)
		return outcome{granted: r == ":0\r\n", text: r}
	}
}

// fairRuleEntries are the rows of a Redisson RFairLock script: its two
// tryLocks (acquiring, and re-entering) and its nested unlock (it resets
// the lease: an extension). A waiting tryLock that is not granted sends
// acquireFailed, as Redisson's tryLock(wait) does when its wait ends, so
// that the attempt leaves nothing on the masters (the queue's keys).
func fairRuleEntries(rs *redisson.Script) []ruleEntry {
	leave := redisson.Table[0].SHA
	for _, o := range redisson.Table {
		if o.Kind == redisson.KindFairLeave {
			leave = o.SHA
		}
	}
	fairKeys := func(key string) []string {
		return []string{key, "redisson_lock_queue:{" + key + "}", "redisson_lock_timeout:{" + key + "}"}
	}
	now := func() string { return strconv.FormatInt(time.Now().UnixMilli(), 10) }
	try := func(x *ruleRun, inst int, key, owner string, ttl time.Duration) outcome {
		args := append([]string{"EVALSHA", rs.SHA, "3"}, fairKeys(key)...)
		if rs.Kind == redisson.KindFairTry {
			args = append(args, ms(ttl), owner, now(), "300000")
		} else {
			args = append(args, ms(ttl), owner, "300000", now())
		}
		r := x.cmd(x.t, inst, args...)
		o := outcome{granted: r == "$-1\r\n", text: r}
		if !o.granted && rs.Kind == redisson.KindFairWait {
			x.cmd(x.t, inst, "EVALSHA", leave, "2", fairKeys(key)[1], fairKeys(key)[2], owner, "300000")
		}
		return o
	}
	notFenced := map[ruleID]string{ruleFencing: "not fenced (Redisson's fair lock has no token)"}
	keepNA := map[ruleID]string{ruleCleanup: "an extension removes nothing when it fails", ruleFencing: "not fenced"}
	if rs.Kind != redisson.KindFairUnlock {
		return []ruleEntry{
			{name: rs.Name, method: "rTable", acquire: true, na: notFenced, take: try},
			{name: rs.Name + " re-entry", method: "rTable", take: try, keep: try, na: keepNA},
		}
	}
	var tryNoWait string
	for _, o := range redisson.Table {
		if o.Kind == redisson.KindFairTry {
			tryNoWait = o.SHA
		}
	}
	take := func(x *ruleRun, inst int, key, owner string, ttl time.Duration) outcome {
		var r string
		for range 2 {
			if r = x.cmd(x.t, inst, append(append([]string{"EVALSHA", tryNoWait, "3"}, fairKeys(key)...), ms(ttl), owner, now(), "300000")...); r != "$-1\r\n" {
				return outcome{text: r}
			}
		}
		return outcome{granted: true, text: r}
	}
	unlock := nestedUnlock(rs, func(key, owner string, ttl time.Duration) ([]string, []string, string) {
		return append(fairKeys(key), "redisson_lock__channel:{"+key+"}"), []string{"0", ms(ttl), owner, now()}, "redisson_unlock_latch:{" + key + "}"
	})
	return []ruleEntry{{name: rs.Name + " nested", method: "rTable", take: take, keep: unlock, na: keepNA, countdown: true, latchless: rs.LatchArg == 0}}
}

// cliEntries are `redlock lock` over the masters and through a proxy.
func cliEntries() []ruleEntry {
	run := func(viaProxy bool, extra ...string) func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
		return func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
			args := append([]string{"lock", "--ttl", ms(ttl) + "ms", "--drift-factor", x.cliDrift}, extra...)
			if viaProxy {
				args = append(args, "--proxy", x.p[inst].addr)
			} else {
				args = append(args, "--masters", strings.Join(x.addrs[inst], ","), "--max-ttl", x.maxTTL.String(), "--master-timeout", "300ms")
				if x.cliFresh {
					args = append(args, "--fresh-masters")
				}
			}
			args = append(args, key, "--", "sh", "-c", "echo fence=$REDLOCK_FENCING_TOKEN")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, x.cli, args...).CombinedOutput()
			o := outcome{text: fmt.Sprintf("%v: %s", err, out)}
			if err == nil {
				if m := regexp.MustCompile(`fence=(\d+)`).FindSubmatch(out); m != nil {
					o.granted = true
					o.fence, _ = strconv.ParseInt(string(m[1]), 10, 64)
				}
			}
			return o
		}
	}
	// work runs `redlock lock … -- sh -c 'echo started; sleep …'`, calls
	// during once the command started (it holds the lock), and reports
	// exit status 0 as success.
	work := func(viaProxy bool, extra ...string) func(x *ruleRun, inst int, key string, ttl time.Duration, during func()) outcome {
		return func(x *ruleRun, inst int, key string, ttl time.Duration, during func()) outcome {
			args := append([]string{"lock", "--ttl", ms(ttl) + "ms"}, extra...)
			if viaProxy {
				args = append(args, "--proxy", x.p[inst].addr)
			} else {
				args = append(args, "--masters", strings.Join(x.addrs[inst], ","), "--max-ttl", x.maxTTL.String(), "--master-timeout", "300ms", "--fresh-masters")
			}
			sleep := strconv.FormatFloat((3 * ttl).Seconds(), 'f', 3, 64)
			args = append(args, key, "--", "sh", "-c", "echo started; sleep "+sleep)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, x.cli, args...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				x.t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				x.t.Fatal(err)
			}
			if line, _ := bufio.NewReader(out).ReadString('\n'); line != "started\n" {
				cmd.Wait()
				x.t.Fatalf("the command did not start under the lock (%q): %s", line, stderr.String())
			}
			during()
			err = cmd.Wait()
			return outcome{granted: err == nil, text: fmt.Sprintf("%v: %s", err, stderr.String())}
		}
	}
	uniqueToken := "its token is random per attempt: a failed attempt cannot meet a lock of its own (as Engine.Lock, a row)"
	// It releases when its command exits: the holder that must exclude it
	// is a plain lock.
	holdWith := func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
		return lockOutcome(x.eng(inst).TryLock(context.Background(), key, ttl))
	}
	// redlock lock -n 2 walks both permits of KEY; permit 1 is held by
	// another for the whole row (written again before each try, on every
	// master that answers), so its grants are on permit 0, the key the
	// columns check, by the -n code path.
	permit0 := func(key string) string { return key + ":permit:0" }
	const permit1 = ":permit:1"
	holders := func(x *ruleRun, inst int, key, tok string, ttl time.Duration) outcome {
		for _, c := range x.masters {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			c.Set(ctx, key+permit1, "other-holder", x.maxTTL) // a stopped master keeps the earlier one
			cancel()
		}
		return run(false, "-n", "2")(x, inst, key, tok, ttl)
	}
	return []ruleEntry{
		{name: "redlock lock", method: "lock", acquire: true, fenced: true, take: run(false), holdWith: holdWith, work: work(false),
			na: map[ruleID]string{ruleCleanup: uniqueToken}},
		{name: "redlock lock -n 2", method: "lock", acquire: true, fenced: true, take: holders, holdKey: permit0, work: work(false, "-n", "2"),
			holdWith: func(x *ruleRun, inst int, key, _ string, ttl time.Duration) outcome {
				return lockOutcome(x.eng(inst).TryLock(context.Background(), permit0(key), ttl))
			},
			na: map[ruleID]string{ruleCleanup: uniqueToken}, blocker: permit1},
		// --leader campaigns in the election KEY (Election.Campaign, a row),
		// for at most --wait here.
		{name: "redlock lock --leader", method: "lock", acquire: true, fenced: true, take: run(false, "--leader", "--wait", "300ms"), holdWith: holdWith, work: work(false, "--leader"),
			na: map[ruleID]string{ruleCleanup: uniqueToken}},
		{name: "redlock lock --proxy", method: "lock", acquire: true, fenced: true, take: run(true), holdWith: holdWith, work: work(true),
			na: map[ruleID]string{ruleCleanup: uniqueToken}},
	}
}

// ruleEntries is the whole table. Columns h and i do not apply to every
// row: each row that they skip is given its reason here, by what the row is.
func ruleEntries(t *testing.T) []ruleEntry {
	entries := append(append(engineEntries(), proxyEntries(t)...), cliEntries()...)
	for i := range entries {
		e := &entries[i]
		na := map[ruleID]string{}
		for r, why := range e.na {
			na[r] = why
		}
		if e.work == nil {
			if e.acquire {
				na[ruleOutcome] = "it reports a grant, not work done under it: (c) checks that the grant is valid when returned; the work after it is the caller's (Lock.Err reads the clock)"
			} else {
				na[ruleOutcome] = "it reports a keeping, not work done under it: (c) checks that the hold is valid when returned"
			}
		}
		switch {
		case e.method == "lock":
			na[ruleOnce] = "a process: each run is a new acquisition with a random token; nothing resends a run's requests"
		case unicode.IsUpper(rune(e.method[0])):
			na[ruleOnce] = "an in-process call, not a request: nothing resends it, and a call made twice is two calls (a Reentrant counts both, as its callers expect)"
		case e.acquire && e.method == "rTable":
			na[ruleOnce] = "Redisson's tryLock carries no request id: a resend is a second re-entry, on one Redis as through the proxy; the count is then over (the hold lasts to its lease or one more unlock), never under"
		case e.acquire:
			na[ruleOnce] = "an acquisition with the client's own token: a resend finds the key held by that token (refused, or the same hold renewed: column d); its effect is the one hold"
		case e.countdown && e.latchless:
			na[ruleOnce] = "this release's unlock sends no request id: a resent unlock cannot be told from a second one, on one Redis as through the proxy (Redisson added its unlock latch in 3.24.0 for this); clients that resend need 3.24.0+"
		case strings.HasSuffix(e.name, "re-entry"):
			na[ruleOnce] = "Redisson's tryLock carries no request id: a resent re-entry counts twice, on one Redis as through the proxy (over, never under: the hold lasts to its lease)"
		}
		e.na = na
	}
	return entries
}

// startRuleRun starts five masters and two proxies over them.
func startRuleRun(t *testing.T, cli string, mod func(i int, c *Config)) *ruleRun {
	return startRuleRunOn(t, mastertest.Start(t, 5), cli, mod)
}

// startRuleRunOn starts two proxies over the masters of set.
func startRuleRunOn(t *testing.T, set *localmaster.Set, cli string, mod func(i int, c *Config)) *ruleRun {
	mastertest.RequireReal(t, set)
	x := &ruleRun{t: t, set: set, cli: cli, maxTTL: 10 * time.Second, cliFresh: true, cliDrift: "0.01", pauser: &pauser{pause: 400 * time.Millisecond},
		latch: "0123456789abcdef0123456789abcdef"}
	for i := range x.p {
		x.p[i] = startEnvOn(t, set, func(c *Config) {
			c.EngineConfig.MaxTTL = x.maxTTL
			c.AllowTokenlessWrites = true // PEXPIRE is an entry point too
			c.EngineConfig.Conn.ReconnectMin, c.EngineConfig.Conn.ReconnectMax = time.Millisecond, 20*time.Millisecond
			if i == 1 {
				c.EngineConfig.Observer = x.pauser
			}
			if mod != nil {
				mod(i, c)
			}
			x.addrs[i] = c.EngineConfig.Addrs
		})
	}
	x.masters = x.p[0].masters
	return x
}

// buildCLI builds the redlock binary for the `redlock lock` rows.
func buildCLI(t *testing.T) string {
	bin := filepath.Join(t.TempDir(), "redlock")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/redlock").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/redlock: %v\n%s", err, out)
	}
	return bin
}

// entryKey is a key of its own for each entry and property (a hash tag,
// so that derived keys stay in its slot).
func entryKey(r ruleID, e ruleEntry) string {
	return fmt.Sprintf("gr:%c:{%s}", r, e.name)
}

func (e ruleEntry) holdKeyOf(key string) string {
	if e.holdKey != nil {
		return e.holdKey(key)
	}
	return key
}

// TestGrantRule checks every property of the grant rule on every entry
// point (docs/safety.md states each property once, with its argument).
func TestGrantRule(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 25 masters and the redlock binary")
	}
	cli := buildCLI(t)
	entries := ruleEntries(t)
	const holder, other = "holder-token-0123456789", "other-token-0123456789ab"
	ttl := 5 * time.Second

	forEach := func(t *testing.T, r ruleID, body func(t *testing.T, e ruleEntry, key string)) {
		for _, e := range entries {
			t.Run(e.name, func(t *testing.T) {
				if why, ok := e.na[r]; ok {
					t.Skipf("(%c) does not apply: %s", r, why)
				}
				body(t, e, entryKey(r, e))
			})
		}
	}

	// (b) No entry point grants or keeps a lock for longer than MaxTTL:
	// the restart quarantine lasts MaxTTL, so a longer lock could outlive
	// a restarted master's quarantine.
	t.Run("b MaxTTL", func(t *testing.T) {
		x := startRuleRun(t, cli, nil)
		forEach(t, ruleMaxTTL, func(t *testing.T, e ruleEntry, key string) {
			x.t = t
			long := x.maxTTL + time.Millisecond
			var o outcome
			if e.acquire {
				o = e.take(x, 0, key, other, long)
			} else {
				if o = e.take(x, 0, key, holder, ttl); !o.granted {
					t.Fatalf("setting up the hold: %s", o.text)
				}
				o = e.keep(x, 0, key, holder, long)
			}
			if o.granted || !strings.Contains(strings.ToLower(o.text), "maximum ttl") && !strings.Contains(o.text, "max-ttl") {
				t.Errorf("a TTL of MaxTTL+1ms: %q; want the maximum TTL refusal", o.text)
			}
			x.noneOverMaxTTL(t, e.holdKeyOf(key))
			if !e.acquire {
				// A keeping within MaxTTL of a hold with 9 s left (redis-py's
				// adding extend: 9 s + 9 s, capped) stays within it.
				key += ":legal"
				if o = e.take(x, 0, key, holder, 9*time.Second); !o.granted {
					t.Fatalf("setting up the hold: %s", o.text)
				}
				e.keep(x, 0, key, holder, 9*time.Second)
				x.noneOverMaxTTL(t, e.holdKeyOf(key))
			}
		})
		// TTLs whose milliseconds do not fit a time.Duration are refused by
		// every command that takes a client's TTL: 1000 + 2^58 ms once
		// wrapped to 1 s past PEXPIRE's MaxTTL check while the masters got
		// 2^58 ms (found by the review of issue #30).
		c := dialRaw(t, x.p[0].addr)
		var rsha, plainExtend string
		for _, rs := range redisson.Table {
			if rs.Kind == redisson.KindTryLock && rsha == "" {
				rsha = rs.SHA
			}
		}
		for _, ls := range lockcmds.LibTable {
			if ls.Op == lockcmds.OpExtend && ls.Engine && plainExtend == "" {
				plainExtend = ls.SHA
			}
		}
		for _, huge := range []string{"288230376151712744", "9223372036854775807"} {
			x.write(t, "gr:b:huge", holder, ttl, 0, 1, 2, 3, 4)
			for _, args := range [][]string{
				{"PEXPIRE", "gr:b:huge", huge},
				{"SET", "gr:b:huge", holder, "IFEQ", holder, "PX", huge},
				{"EVALSHA", plainExtend, "1", "gr:b:huge", holder, huge},
				{"SET", "gr:b:free", holder, "NX", "PX", huge},
				{"REDLOCK.LOCK", "gr:b:free", holder, huge},
				{"EVALSHA", rsha, "1", "gr:b:free", huge, "owner:1"},
			} {
				if r := c.cmd(args...); !strings.HasPrefix(r, "-ERR") {
					t.Errorf("%q: %q; want an error", args, r)
				}
			}
			x.noneOverMaxTTL(t, "gr:b:huge")
			x.noneOverMaxTTL(t, "gr:b:free")
		}
	})

	// (c) A grant is returned only while it is valid, checked last —
	// three ways. Drift: instance 1 allows 99% of the TTL for drift, so a
	// lock taken or kept for 100 ms through it has no validity left when
	// its quorum arrives. Latency: instance 1 reaches the masters through
	// relays that add 60 ms each way, so a 100 ms lock's quorum arrives
	// after 120 ms (the per-master timeout is 300 ms: the masters answer,
	// and grant). Sets: a 400 ms pause after the first key of a 300 ms set
	// (taken or extended) leaves the first lock expired when the last is
	// done. The holds that keeping entries keep are taken for 9 s first.
	t.Run("c valid at return", func(t *testing.T) {
		try := func(t *testing.T, x *ruleRun, e ruleEntry, key string, short time.Duration, before func()) outcome {
			x.t = t
			if !e.acquire {
				if o := e.take(x, 1, key, holder, 9*time.Second); !o.granted {
					t.Fatalf("setting up the hold: %s", o.text)
				}
			}
			before()
			if e.acquire {
				return e.take(x, 1, key, other, short)
			}
			return e.keep(x, 1, key, holder, short)
		}
		t.Run("drift", func(t *testing.T) {
			x := startRuleRun(t, cli, func(i int, c *Config) {
				if i == 1 {
					c.EngineConfig.DriftFactor = 0.99
				}
			})
			x.cliDrift = "0.99"
			forEach(t, ruleValid, func(t *testing.T, e ruleEntry, key string) {
				if o := try(t, x, e, key, 100*time.Millisecond, func() {}); o.granted {
					t.Errorf("reported a grant with no validity left: %q", o.text)
				}
			})
		})
		t.Run("latency", func(t *testing.T) {
			set := mastertest.Start(t, 5)
			relays, addrs := startRelays(t, set.Addrs())
			x := startRuleRunOn(t, set, cli, func(i int, c *Config) {
				if i == 1 {
					c.EngineConfig.Addrs = addrs
				}
			})
			forEach(t, ruleValid, func(t *testing.T, e ruleEntry, key string) {
				o := try(t, x, e, key, 100*time.Millisecond, func() {
					for _, r := range relays {
						r.SetDelay(60 * time.Millisecond)
					}
				})
				for _, r := range relays {
					r.SetDelay(0)
				}
				if o.granted {
					t.Errorf("reported a grant whose quorum came after its 100 ms TTL: %q", o.text)
				}
			})
		})
		t.Run("sets", func(t *testing.T) {
			x := startRuleRun(t, cli, nil)
			forEach(t, ruleValid, func(t *testing.T, e ruleEntry, key string) {
				if !e.set {
					t.Skip("one key: the verdict of its one round trip is the last step (drift, latency)")
				}
				o := try(t, x, e, key, 300*time.Millisecond, func() { x.pauser.armed.Store(true) })
				x.pauser.armed.Store(false)
				if o.granted && !o.set.Valid() {
					t.Errorf("returned a set whose first lock expired while the second was done: %q", o.text)
				}
			})
		})
	})

	// (d) The cleanup of a failed attempt removes only what that attempt
	// created: with another holder on three masters the attempt fails and
	// leaves nothing on the other two, and the holder's keys stay; a
	// client retrying with the token of a lock it holds while three
	// masters are stopped keeps its lock on all five; and a client that
	// gives up on an attempt still under way (one master silent), releases
	// its value and is granted again with it through the other proxy
	// keeps that grant when the first attempt fails.
	t.Run("d cleanup", func(t *testing.T) {
		x := startRuleRun(t, cli, nil)
		// xr's proxy 0 reaches master 4 through a relay the retry check
		// holds, and waits for it; its proxy 1 is straight to the masters.
		rl, err := relay.Start(x.set.Addrs()[4])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rl.Close() })
		xr := startRuleRunOn(t, x.set, cli, func(i int, c *Config) {
			if i == 0 {
				c.EngineConfig.Addrs = slices.Clone(c.EngineConfig.Addrs)
				c.EngineConfig.Addrs[4] = rl.Addr()
				c.EngineConfig.MasterTimeout = 8 * time.Second
			}
		})
		forEach(t, ruleCleanup, func(t *testing.T, e ruleEntry, key string) {
			x.t = t
			hk := e.holdKeyOf(key)
			x.write(t, hk, other, ttl, 2, 3, 4)
			if o := e.take(x, 0, key, holder, ttl); o.granted {
				t.Fatalf("granted while another holder has 3 of 5 masters: %q", o.text)
			}
			waitFor(t, "the attempt's keys gone from masters 0 and 1", func() bool {
				return len(x.keysOf(0, e))+len(x.keysOf(1, e)) == 0
			})
			for i := 2; i < 5; i++ {
				if v := x.value(i, hk); v != other {
					t.Errorf("master %d: %s = %q after the failed attempt; want the holder's %q", i, hk, v, other)
				}
			}
			if !e.callerToken {
				return
			}
			own := key + ":own"
			if o := e.take(x, 0, own, holder, ttl); !o.granted {
				t.Fatalf("taking %s: %q", own, o.text)
			}
			// A grant answers at a quorum: master 4's write may still be
			// on its way.
			var held string
			waitFor(t, "the client's lock on master 4", func() bool {
				held = x.value(4, e.holdKeyOf(own))
				return held != ""
			})
			ms := x.set.Masters()
			for _, i := range []int{0, 1, 2} {
				if err := ms[i].Pause(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { ms[i].Resume() })
			}
			o := e.take(x, 0, own, holder, ttl)
			for _, i := range []int{0, 1, 2} {
				if err := ms[i].Resume(); err != nil {
					t.Fatal(err)
				}
			}
			if o.granted {
				t.Fatalf("granted with 3 of 5 masters stopped: %q", o.text)
			}
			x.cmd(t, 0, "GET", own) // after what was queued for the stopped masters
			for i := range x.masters {
				if v := x.value(i, e.holdKeyOf(own)); v != held {
					t.Errorf("master %d: %q after the failed retry; want the client's lock %q kept", i, v, held)
				}
			}
			xr.t = t
			retryAfterRelease(t, xr, rl, e, key+":retry", holder, other)
		})
	})

	// (e) What decides a grant lives on the masters: a key granted
	// through one proxy (one engine) is refused to another holder through
	// the other, and a hold kept through the other proxy is kept — any
	// proxy serves any request, and a proxy that restarts is one that
	// never saw the grant.
	t.Run("e state on masters", func(t *testing.T) {
		x := startRuleRun(t, cli, nil)
		forEach(t, ruleOnMasters, func(t *testing.T, e ruleEntry, key string) {
			x.t = t
			if e.acquire {
				hold := e.take
				if e.holdWith != nil {
					hold = e.holdWith
				}
				if o := hold(x, 0, key, holder, ttl); !o.granted {
					t.Fatalf("the holder through proxy 0: %q", o.text)
				}
				if o := e.take(x, 1, key, other, ttl); o.granted {
					t.Errorf("another holder through proxy 1 while the first holds: %q", o.text)
				}
				return
			}
			if o := e.take(x, 0, key, holder, ttl); !o.granted {
				t.Fatalf("the hold through proxy 0: %q", o.text)
			}
			if o := e.keep(x, 1, key, holder, ttl); !o.granted {
				t.Errorf("kept through proxy 1: %q; want it kept (the hold is on the masters)", o.text)
			}
		})
	})

	// (f) Fencing tokens strictly increase across holders, whichever
	// proxy (engine, process) grants them.
	t.Run("f fencing", func(t *testing.T) {
		x := startRuleRun(t, cli, nil)
		forEach(t, ruleFencing, func(t *testing.T, e ruleEntry, key string) {
			x.t = t
			if !e.fenced {
				t.Fatalf("a row neither fenced nor excused from (f)")
			}
			// Master 0's counter runs far ahead: the first holder's token
			// is above it, and the second holder, granted without master
			// 0, must still be above the first (the write-back raised the
			// others' counters).
			ahead := strconv.FormatInt(time.Now().UnixMicro()+1e12, 10)
			if err := x.masters[0].Set(context.Background(), engine.DefaultFenceKey, ahead, 0).Err(); err != nil {
				t.Fatal(err)
			}
			short := 300 * time.Millisecond
			var last int64
			for round, inst := range []int{0, 1, 0} {
				if round == 1 {
					// Master 0 refuses the second holder (it holds the key
					// for someone else): the others' counters decide.
					x.write(t, e.holdKeyOf(key), "blocker", short, 0)
				}
				o := e.take(x, inst, key, fmt.Sprintf("holder-%d-0123456789abcdef", round), short)
				if !o.granted {
					t.Fatalf("holder %d through proxy %d: %q", round, inst, o.text)
				}
				if o.fence <= last {
					t.Errorf("holder %d's fencing token %d, not above the previous holder's %d", round, o.fence, last)
				}
				last = o.fence
				if h, ok := x.handles.LoadAndDelete(key); ok {
					if ld, ok := h.(*engine.Leadership); ok {
						// A leadership is kept until it resigns.
						ctx, cancel := opCtx()
						ld.Resign(ctx)
						cancel()
					}
				}
				time.Sleep(short + 100*time.Millisecond) // its lock expires (or was released)
			}
		})
	})

	// (h) The outcome at return: work run under the lock while three of
	// five masters are stopped for longer than the TTL (no extension can
	// reach a quorum: the validity runs out under the work) is not
	// reported as done; the same work without the stop is.
	t.Run("h outcome at return", func(t *testing.T) {
		x := startRuleRun(t, cli, nil)
		const short = time.Second
		forEach(t, ruleOutcome, func(t *testing.T, e ruleEntry, key string) {
			x.t = t
			if o := e.work(x, 0, key, short, func() {}); !o.granted {
				t.Fatalf("work under the lock with the masters up: %q; want success", o.text)
			}
			stop := func() {
				ms := x.set.Masters()
				for _, i := range []int{0, 1, 2} {
					if err := ms[i].Pause(); err != nil {
						t.Error(err)
					}
				}
				time.Sleep(short + 300*time.Millisecond)
				for _, i := range []int{0, 1, 2} {
					if err := ms[i].Resume(); err != nil {
						t.Error(err)
					}
				}
			}
			if o := e.work(x, 0, key+":lost", short, stop); o.granted {
				t.Errorf("reported success for work whose lock's validity ended under it: %q", o.text)
			}
		})
	})

	// (i) A duplicated request acts once: a keeping request of a hold is
	// sent twice at the same moment through the two proxies (the same
	// arguments and request id). The hold stays (another owner is
	// refused) and within MaxTTL; a nested unlock of a hold of count 2
	// leaves count 1 — one more unlock, a request of its own, frees it.
	t.Run("i once", func(t *testing.T) {
		x := startRuleRun(t, cli, nil)
		forEach(t, ruleOnce, func(t *testing.T, e ruleEntry, key string) {
			x.t = t
			if e.acquire {
				t.Fatal("an acquisition neither checked nor excused from (i)")
			}
			if o := e.take(x, 0, key, holder, 9*time.Second); !o.granted {
				t.Fatalf("setting up the hold: %s", o.text)
			}
			var got [2]outcome
			var wg sync.WaitGroup
			start := make(chan struct{})
			for inst := range 2 {
				wg.Go(func() {
					<-start
					got[inst] = e.keep(x, inst, key, holder, 9*time.Second)
				})
			}
			close(start)
			wg.Wait()
			if !got[0].granted && !got[1].granted {
				t.Errorf("neither run of the request kept the hold: %q, %q", got[0].text, got[1].text)
			}
			x.noneOverMaxTTL(t, e.holdKeyOf(key))
			refused := func() bool {
				if e.exclude != nil {
					return !e.exclude(x, 1, key, other, 9*time.Second).granted
				}
				if e.method == "rTable" {
					return !e.take(x, 1, key, other, 9*time.Second).granted
				}
				return x.cmd(t, 1, "SET", key, other, "NX", "PX", "9000") == "$-1\r\n"
			}
			if !refused() {
				t.Fatalf("another owner was granted after the request (sent twice: %q, %q)", got[0].text, got[1].text)
			}
			if !e.countdown {
				return
			}
			x.latch = "fedcba9876543210fedcba9876543210" // a new request
			defer func() { x.latch = "0123456789abcdef0123456789abcdef" }()
			e.keep(x, 0, key, holder, 9*time.Second)
			if o := e.take(x, 1, key, other, 9*time.Second); !o.granted {
				t.Errorf("another owner after one more unlock: %q; want granted (the duplicated unlock counted less than once)", o.text)
			}
		})
	})

	// (a) No vote from a master in restart quarantine: every key is held
	// (kept) through proxy 0, then three of five masters restart empty.
	// An acquisition through proxy 1 may count only the two masters that
	// kept the holder's key, so it must not be granted; a keeping entry
	// whose hold the restarted masters show again (and the other two
	// show another holder's) must not be kept. Last, since it restarts
	// masters; redlock lock, a new process, meets all five masters
	// younger than MaxTTL at first contact.
	t.Run("a quarantine", func(t *testing.T) {
		x := startRuleRun(t, cli, nil)
		x.cliFresh = false
		long := 9 * time.Second
		kept := map[string]string{} // keeping entry → its hold's value
		for _, e := range entries {
			if _, ok := e.na[ruleQuarantine]; ok {
				continue
			}
			key := entryKey(ruleQuarantine, e)
			x.t = t
			if e.acquire {
				hold := e.take
				if e.holdWith != nil {
					hold = e.holdWith
				}
				if o := hold(x, 0, key, holder, long); !o.granted {
					t.Fatalf("%s: the holder: %q", e.name, o.text)
				}
				continue
			}
			if o := e.take(x, 0, key, holder, long); !o.granted {
				t.Fatalf("%s: the hold: %q", e.name, o.text)
			}
			kept[e.name] = x.value(3, e.holdKeyOf(key))
		}
		// The reads' plain lock and read lock (grantrule_reads_test.go).
		if r := x.cmd(t, 0, "SET", readsKey, holder, "NX", "PX", ms(long)); r != "+OK\r\n" {
			t.Fatalf("%s: %q", readsKey, r)
		}
		holdReaders(t, x, 0, long)
		restartEmpty(t, x.p[0], 0, 1, 2)
		for _, p := range x.p {
			c := dialRaw(t, p.addr)
			waitFor(t, "3 masters quarantined", func() bool { return strings.Contains(c.cmd("INFO", "masters"), "masters_quarantined:3") })
		}
		for _, e := range entries {
			if v, ok := kept[e.name]; ok {
				key := entryKey(ruleQuarantine, e)
				x.write(t, e.holdKeyOf(key), v, long, 0, 1, 2)
				x.write(t, e.holdKeyOf(key), other, long, 3, 4)
			}
		}
		forEach(t, ruleQuarantine, func(t *testing.T, e ruleEntry, key string) {
			x.t = t
			var o outcome
			if e.acquire {
				o = e.take(x, 1, key, other, long)
			} else {
				o = e.keep(x, 0, key, holder, long)
			}
			if o.granted {
				t.Errorf("granted while 3 of 5 masters are quarantined and the others refuse: %q", o.text)
			}
			if e.acquire {
				// What the quarantined masters granted is cleaned up
				// like any other creation of a failed attempt (d).
				waitFor(t, "the attempt's keys gone from the quarantined masters", func() bool {
					return len(x.keysOf(0, e))+len(x.keysOf(1, e))+len(x.keysOf(2, e)) == 0
				})
			}
		})
		checkReadsQuarantined(t, x, holder)
	})

	t.Run("g clock jump", func(t *testing.T) { clockJumpRule(t, cli, entries, holder, other) })
}

// clockJumpRule checks (g) on every acquisition: a holder takes the key
// through proxy 0; then the clocks of masters 0-2 jump forward past the
// holder's TTL (clockfront: their TIME runs ahead, every key's TTL is cut
// by the jump, so they lose the holder's key while it is valid). A proxy
// that read their clocks before the jump (its handshakes) and reaches them
// through the fronts must refuse the acquisition; with the clock check off
// (DisableClockCheck) it grants it — two holders —, so each row can fail.
// Each row gets a proxy 1 and fronts of its own: the first detection
// quarantines the masters, which would answer for the rows after it.
// Keeping entries do not apply (a jump removes keys: an extension there
// finds none), nor redlock lock on the masters (a new process: it reads
// the clocks first after the jump, the residual window in safety.md).
func clockJumpRule(t *testing.T, cli string, entries []ruleEntry, holder, other string) {
	x := startRuleRun(t, cli, nil)
	const long, jump, short = 6 * time.Second, 8 * time.Second, time.Second
	for _, off := range []bool{false, true} {
		for _, e := range entries {
			name := e.name
			if off {
				name += " (check off)"
			}
			t.Run(name, func(t *testing.T) {
				switch {
				case !e.acquire:
					t.Skip("(g) a keeping entry: a forward jump only removes keys, and an extension finds none there")
				case e.method == "lock" && !strings.Contains(e.name, "--proxy"):
					t.Skip("(g) redlock lock on the masters is a new process: its first reading of each clock follows the jump (safety.md)")
				}
				x.t = t
				key := entryKey(ruleClockJump, e)
				if off {
					key += ":off"
				}
				hold := e.take
				if e.holdWith != nil {
					hold = e.holdWith
				}
				start := time.Now()
				if o := hold(x, 0, key, holder, long); !o.granted {
					t.Fatalf("the holder: %q", o.text)
				}
				addrs := x.set.Addrs()
				var fronts []*clockfront.Front
				for i := range 3 {
					f := clockfront.Start(t, addrs[i])
					fronts, addrs[i] = append(fronts, f), f.Addr()
				}
				x.p[1] = startEnvOn(t, x.set, func(c *Config) {
					c.EngineConfig.Addrs, c.EngineConfig.MaxTTL, c.EngineConfig.DisableClockCheck = addrs, x.maxTTL, off
					c.AllowTokenlessWrites = true
				})
				x.addrs[1] = addrs
				for _, f := range fronts {
					if err := f.Jump(context.Background(), jump); err != nil {
						t.Fatal(err)
					}
				}
				o := e.take(x, 1, key, other, short)
				if time.Since(start) > long-time.Second {
					t.Fatal("the holder's lock is about to end: the row proves nothing")
				}
				switch {
				case off && !o.granted:
					t.Errorf("check off: %q; want the grant the check prevents (masters 0-2 lost the holder's key early)", o.text)
				case !off && o.granted:
					t.Errorf("granted while the holder is valid, after masters 0-2's clocks jumped forward: %q", o.text)
				}
			})
		}
	}
}

// noneOverMaxTTL fails t if a master holds key for longer than MaxTTL
// (PTTL read as an integer: a time.Duration would wrap).
func (x *ruleRun) noneOverMaxTTL(t *testing.T, key string) {
	t.Helper()
	for i := range x.masters {
		if pttl, _ := x.masters[i].Do(context.Background(), "PTTL", key).Int64(); pttl > x.maxTTL.Milliseconds() {
			t.Errorf("master %d holds %s for %d ms, over MaxTTL", i, key, pttl)
		}
	}
}

// keysOf lists master i's keys that belong to the entry named name.
func (x *ruleRun) keysOf(i int, e ruleEntry) []string {
	keys, _ := x.masters[i].Keys(context.Background(), "*").Result()
	var out []string
	for _, k := range keys {
		if strings.Contains(k, "{"+e.name+"}") && (e.blocker == "" || !strings.HasSuffix(k, e.blocker)) {
			out = append(out, k)
		}
	}
	return out
}

// retryAfterRelease is column d's retry check of a row whose client
// chooses the token: attempt A takes key through xr's proxy 0 while
// another holder has masters 2, 3 and 4 and master 4's requests wait in
// rl; once A created the key on 0 and 1 and was refused on 2 and 3, the
// holder leaves master 2, the client releases its value (compare-and-
// delete) and takes the key again with it through proxy 1 (B, granted on
// 0, 1 and 2). Then A fails, and B's grant must still stand on a quorum:
// A's cleanup may delete only what A created and still marks.
func retryAfterRelease(t *testing.T, xr *ruleRun, rl *relay.Relay, e ruleEntry, key, tok, other string) {
	t.Helper()
	ctx := context.Background()
	ttl := xr.maxTTL // A's validity outlasts the check on a busy machine
	xr.write(t, key, other, 3*ttl, 2, 3, 4)
	var calls [5]int
	for _, i := range []int{2, 3} {
		calls[i] = lockCalls(t, xr.masters[i])
	}
	rl.Hold()
	defer rl.Release()
	first := make(chan outcome, 1)
	go func() { first <- e.take(xr, 0, key, tok, ttl) }()
	waitFor(t, "A under way: created on masters 0 and 1, refused on 2 and 3, waiting for 4", func() bool {
		return xr.value(0, key) == tok && xr.value(1, key) == tok && lockCalls(t, xr.masters[2]) > calls[2] &&
			lockCalls(t, xr.masters[3]) > calls[3] && rl.Holding([]byte(key))
	})
	if err := xr.masters[2].Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	xr.cmd(t, 1, "EVAL", scripts.Release.Source(), "1", key, tok) // the client's release
	waitFor(t, "the client's release on masters 0 and 1", func() bool { return xr.value(0, key) == "" && xr.value(1, key) == "" })
	if o := e.take(xr, 1, key, tok, ttl); !o.granted {
		t.Fatalf("B, the client's retry with the same value through the other proxy: %q", o.text)
	}
	rl.Release()
	if o := <-first; o.granted {
		t.Fatalf("A granted: %q", o.text)
	}
	n := 0
	for i := range xr.masters {
		if xr.value(i, key) == tok {
			n++
		}
	}
	if n < 3 {
		t.Errorf("after A failed, B's grant holds %d of 5 masters: A's cleanup deleted what B created", n)
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestGrantRuleTableComplete: every entry point is in the table — each
// exported method of the engine's lock types, each proxy command, each
// Redisson script kind (proxyEntries) and each redlock subcommand is a
// row or is listed here as not granting, with the reason. A new method,
// command or subcommand fails this test until it is classified.
func TestGrantRuleTableComplete(t *testing.T) {
	rows := map[string]bool{}
	for _, e := range ruleEntries(t) {
		rows[e.method] = true
	}
	for _, r := range readEntries() {
		rows[r.method] = true
	}
	notGrant := map[string]string{
		// engine
		"Engine.Close": "ends the engine", "Engine.Config": "a read",
		"Engine.Masters": "a read", "Engine.NewRWLock": "no master traffic", "Engine.NewReentrant": "no master traffic",
		"Engine.NewSemaphore": "no master traffic", "Engine.Quorum": "a read", "Engine.Stats": "a read",
		"Engine.Status": "a read", "Engine.Voting": "a read", "Engine.VoteMargin": "a read", "Engine.QuarantineOutlook": "a read",
		"Engine.WaitReady": "waits for connections",
		"Lock.Context":     "a view of the hold", "Lock.Done": "a view of the hold", "Lock.Err": "a view of the hold",
		"Lock.FencingToken": "a read", "Lock.Key": "a read", "Lock.Remaining": "a read", "Lock.Token": "a read",
		"Lock.Unlock": "releases", "Lock.UnlockAsync": "releases (Unlock's asynchronous form)", "Lock.Until": "a read", "Lock.Valid": "a read",
		"LockSet.Context": "a view", "LockSet.Done": "a view", "LockSet.Err": "a view", "LockSet.Locks": "a read",
		"LockSet.Remaining": "a read", "LockSet.Unlock": "releases", "LockSet.Valid": "a read",
		"Reentrant.Context": "a view", "Reentrant.Count": "a read", "Reentrant.Done": "a view", "Reentrant.Err": "a view",
		"Reentrant.Held": "a read", "Reentrant.Key": "a read",
		"Semaphore.PermitKey": "a name", "Semaphore.Permits": "a read",
		"Engine.NewElection": "no master traffic", "Engine.NewFairLock": "no master traffic", "Election.Name": "a read",
		"Election.Observe": "quorum reads",
		"Leadership.Term":  "a read", "Leadership.Value": "a read", "Leadership.Lock": "a read (the election's lock: its Extend is Lock.Extend's row)",
		"Leadership.Done": "a view of the hold", "Leadership.Err": "a view of the hold", "Leadership.Context": "a view of the hold",
		"Leadership.Resign":   "releases (Lock.Unlock)",
		"Leadership.Proclaim": "writes the leader record where the election's lock key holds the leader's token; grants and extends nothing",
		// proxy commands
		"setnx": "refused (a lock without a TTL)", "del": "deletes (tokenless, opt-in)",
		"delex": "a release", "delifeq": "a release",
		"eval":    "runs the scripts of lockcmds.LibTable and redisson.Table (rows), others only with --allow-scripts",
		"evalsha": "as eval", "script": "loads scripts", "fcall": "opt-in passthrough (--allow-scripts)", "fcall_ro": "as fcall",
		"subscribe": "pub/sub", "ssubscribe": "pub/sub", "unsubscribe": "pub/sub", "sunsubscribe": "pub/sub",
		"ping": "plumbing", "echo": "plumbing", "hello": "plumbing", "auth": "plumbing", "client": "plumbing",
		"select": "plumbing", "command": "plumbing", "wait": "plumbing", "waitaof": "plumbing", "info": "plumbing",
		"config": "plumbing", "quit": "plumbing", "reset": "plumbing",
		// redlock subcommands
		"proxy": "serves the proxy's rows", "bench": "load through the engine's and the proxy's rows", "inspect": "reads", "version": "prints the version",
	}
	// A callable that reports an outcome is a row of its own: "it wraps a
	// row" is no reason (a wrapper's own return is where Do and Lead lost
	// the loss, issue #41).
	for name, why := range notGrant {
		if strings.Contains(why, "wraps") {
			t.Errorf("%s is listed as not granting because it %q: a wrapper's own return is an entry point; make it a row", name, why)
		}
	}
	classify := func(name string) {
		if !rows[name] && notGrant[name] == "" {
			t.Errorf("%s is neither a row of the grant rule table (grantrule_test.go) nor listed as not granting", name)
		}
	}
	for _, v := range []any{(*engine.Engine)(nil), (*engine.Lock)(nil), (*engine.LockSet)(nil), (*engine.Reentrant)(nil), (*engine.RWLock)(nil), (*engine.Semaphore)(nil), (*engine.Election)(nil), (*engine.Leadership)(nil), (*engine.FairLock)(nil)} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumMethod() {
			classify(typ.Elem().Name() + "." + typ.Method(i).Name)
		}
	}
	for _, c := range (&lockcmds.Commands{}).Table() {
		classify(c.Name)
	}
	for _, c := range respserver.ServerCommands() {
		classify(c.Name)
	}
	out, _ := exec.Command("go", "run", "../cmd/redlock").CombinedOutput()
	subs := regexp.MustCompile(`(?m)^  ([a-z]+)  `).FindAllSubmatch(out, -1)
	if len(subs) == 0 {
		t.Fatalf("no subcommands in redlock's usage: %s", out)
	}
	for _, m := range subs {
		classify(string(m[1]))
	}
	if !rows["LibTable"] || !rows["rTable"] {
		t.Error("the library and Redisson scripts are not rows")
	}
}
