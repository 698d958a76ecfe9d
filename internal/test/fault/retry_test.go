package fault_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/fault"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/proctest"
	"github.com/redlock-dev/redlock/internal/test/redissonwire"
	"github.com/redlock-dev/redlock/resp"
)

// The retry nemesis (DESIGN.md §5 (i)): a client resends a request whose
// reply it did not get — Redisson after its timeout (retryAttempts),
// redis-py and node-redlock on a connection error — through the same
// connection, another connection or, behind a load balancer, another
// proxy. The Redisson rows of TestFaultKinds send each of their
// clients' acquisitions (tryLock, each try of lock()), renewals and
// latched unlocks (3.24.0+: the latch key is the request id) twice with
// probability retryShare: at once (a second connection to the same proxy,
// or the other proxy), or after a delay up to the client's timeout (the
// same connection, or the other proxy) with the first reply taken as lost.
//
// What the copies may do: an unlock with a latch acts once, and each copy
// answers what the first did (an error answer aside); copies of an
// acquisition carry no request id, so a copy that is granted re-enters
// (count + 1, as against one Redis) — the harness counts those levels and
// releases them. An unlock without a latch (before 3.24.0) is not resent:
// Redisson's retry double-decrements it against one Redis too.

const (
	retryShare   = 0.15                  // of the requests sent twice
	retryTimeout = 25 * time.Millisecond // the client's timeout: a late copy comes within it
	// nestedStay is how long a holder stays inside after a nested unlock
	// (count 2 → 1): long enough for a waiter woken by a release that
	// should not have happened to be granted.
	nestedStay = 3 * time.Millisecond
)

// retryNemesis resends Redisson clients' requests (Client.Resend).
type retryNemesis struct {
	// same and other are, per connection, one of the same client (ID) to
	// the same proxy and one to the other proxy.
	same, other map[*redissonwire.Client]*redissonwire.Client

	sent, concurrent, late, viaOther atomic.Int64 // copies sent
	acquires, renewals, unlocks      atomic.Int64 // of which copies of each request kind
	unlatched                        atomic.Int64 // unlocks without a latch: not resent
	extraGrants                      atomic.Int64 // copies of acquisitions granted (re-entries)
	// actedAgain: latched unlocks of a hold with levels left whose
	// copies answered differently — one decremented, another did not
	// answer that (a second decrement): violations. notKept: latched
	// unlocks of a last level whose copies answered differently (a copy
	// found the lock free or another's and answered so, not the first's
	// answer): reported.
	actedAgain, notKept             atomic.Int64
	levelLost, finalNil, extraLevel atomic.Int64 // unlock answers off the harness's count

	mu                      sync.Mutex
	firstDiff, firstNotKept string
}

func newRetryNemesis() *retryNemesis {
	return &retryNemesis{same: map[*redissonwire.Client]*redissonwire.Client{}, other: map[*redissonwire.Client]*redissonwire.Client{}}
}

// group registers one client's four connections: g[0], g[1] to the first
// and second proxy (the workers'), g[2], g[3] to the same (the copies').
func (n *retryNemesis) group(g [4]*redissonwire.Client) {
	n.same[g[0]], n.other[g[0]] = g[2], g[1]
	n.same[g[1]], n.other[g[1]] = g[3], g[0]
}

// retryCall is one hold's state for the nemesis, carried by its context:
// the worker's rng (the seed fixes the choices), the levels copies of its
// acquisitions were granted, and the levels the thread holds when it
// sends an unlock.
type retryCall struct {
	rng    *rand.Rand
	extra  int
	levels int
}

type retryKey struct{}

// call returns ctx carrying a retryCall for a hold of a worker with rng.
func (n *retryNemesis) call(ctx context.Context, rng *rand.Rand) (context.Context, *retryCall) {
	if n == nil {
		return ctx, &retryCall{}
	}
	rc := &retryCall{rng: rng}
	return context.WithValue(ctx, retryKey{}, rc), rc
}

// grants returns the levels granted to copies since the last call.
func (rc *retryCall) grants() int {
	g := rc.extra
	rc.extra = 0
	return g
}

type reqKind uint8

const (
	reqOther reqKind = iota
	reqAcquire
	reqRenew
	reqUnlock
)

func requestKind(r redissonwire.Request) reqKind {
	s := strings.ToLower(r.Script)
	switch {
	case strings.Contains(s, "trylock"):
		return reqAcquire
	case strings.Contains(s, "renew") || strings.Contains(s, "locktask"):
		return reqRenew
	case strings.Contains(s, "unlock") && !strings.Contains(s, "forceunlock"):
		return reqUnlock
	}
	return reqOther
}

func granted(r resp.Reply, err error) bool { return err == nil && r.IsNull() }

// sameAnswer reports whether two answers of a latched unlock agree (an
// error is no answer: it is not compared).
func sameAnswer(a, b resp.Reply, aerr, berr error) bool {
	// An error — the connection's, or an error reply (too few masters, a
	// grant whose validity ended before its reply could be written) — is
	// no answer to compare.
	if aerr != nil || berr != nil || a.IsError() || b.IsError() {
		return true
	}
	return a.IsNull() == b.IsNull() && a.Type == b.Type && a.Int == b.Int
}

// resend is the clients' Resend.
func (n *retryNemesis) resend(ctx context.Context, c *redissonwire.Client, r redissonwire.Request) (resp.Reply, error) {
	rc, _ := ctx.Value(retryKey{}).(*retryCall)
	kind := requestKind(r)
	if rc == nil || kind == reqOther {
		return c.Send(ctx, r)
	}
	if kind == reqUnlock && r.Latch() == "" {
		n.unlatched.Add(1)
		return c.Send(ctx, r)
	}
	if rc.rng.Float64() >= retryShare {
		return c.Send(ctx, r)
	}
	viaOther := rc.rng.IntN(2) == 0
	lateBy := time.Duration(0)
	if rc.rng.IntN(2) == 0 {
		lateBy = time.Duration(1 + rc.rng.Int64N(int64(retryTimeout)))
	}
	n.sent.Add(1)
	switch kind {
	case reqAcquire:
		n.acquires.Add(1)
	case reqRenew:
		n.renewals.Add(1)
	case reqUnlock:
		n.unlocks.Add(1)
	}
	if viaOther {
		n.viaOther.Add(1)
	}
	var first, dup resp.Reply
	var ferr, cerr error
	if lateBy == 0 {
		// At once: the copy on another connection (to this proxy, or the
		// other); the client takes the first request's reply.
		n.concurrent.Add(1)
		via := n.same[c]
		if viaOther {
			via = n.other[c]
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			dup, cerr = via.Send(ctx, r)
		}()
		first, ferr = c.Send(ctx, r)
		<-done
		if kind == reqAcquire && granted(dup, cerr) {
			rc.extra++
			n.extraGrants.Add(1)
		}
	} else {
		// Later: the first reply was lost; the copy goes after the
		// client's timeout (here up to retryTimeout) on the same
		// connection, or through the other proxy, and its reply is taken.
		n.late.Add(1)
		first, ferr = c.Send(ctx, r)
		t := time.NewTimer(lateBy)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		via := c
		if viaOther {
			via = n.other[c]
		}
		dup, cerr = via.Send(ctx, r)
		if kind == reqAcquire && granted(first, ferr) {
			rc.extra++
			n.extraGrants.Add(1)
		}
		first, dup, ferr, cerr = dup, first, cerr, ferr // the copy's reply is the one taken
	}
	if kind == reqUnlock && !sameAnswer(first, dup, ferr, cerr) {
		what := fmt.Sprintf("%s on %s (latch %s) of a hold with %d levels answered %s and %s (late by %v, via the other proxy %v)",
			r.Script, r.Keys[0], r.Latch(), rc.levels, first, dup, lateBy, viaOther)
		n.mu.Lock()
		if rc.levels > 1 {
			n.actedAgain.Add(1)
			if n.firstDiff == "" {
				n.firstDiff = what
			}
		} else {
			n.notKept.Add(1)
			if n.firstNotKept == "" {
				n.firstNotKept = what
			}
		}
		n.mu.Unlock()
	}
	return first, ferr
}

// violations returns the nemesis's own violations: latched unlocks that
// acted again.
func (n *retryNemesis) violations() int64 { return n.actedAgain.Load() }

func (n *retryNemesis) String() string {
	if n == nil {
		return "retry nemesis off"
	}
	return fmt.Sprintf("retry nemesis: %d copies sent (%d at once, %d late; %d via the other proxy): %d acquisitions (%d granted: re-entries), %d renewals, %d latched unlocks (%d acted again; %d of a last level answered differently); %d unlocks without a latch (not resent); unlock answers off the count: %d nested released, %d last nil, %d last still held",
		n.sent.Load(), n.concurrent.Load(), n.late.Load(), n.viaOther.Load(), n.acquires.Load(), n.extraGrants.Load(), n.renewals.Load(),
		n.unlocks.Load(), n.actedAgain.Load(), n.notKept.Load(), n.unlatched.Load(), n.levelLost.Load(), n.finalNil.Load(), n.extraLevel.Load())
}

// nestedUnlock is a holder's unlock of one level of count (> 1) while it
// is inside, after which it stays: were a copy of it to act twice, the
// lock would be free now, and a waiter granted while this holder is still
// inside an overlap. It returns the levels left.
func (k *kindRun) nestedUnlock(call *retryCall, count int, unlock func() (int64, error)) int {
	if count < 2 {
		return count
	}
	call.levels = count
	n, err := unlock()
	switch {
	case errors.Is(err, redissonwire.ErrNotOwner):
		// Nothing is left to unlock; the holder, not told, stays inside.
		k.nemCount(func(n *retryNemesis) { n.levelLost.Add(1) })
		count = 1
	case err != nil:
		return count // unknown: the remaining unlocks find out
	case n != 0:
		k.nemCount(func(n *retryNemesis) { n.levelLost.Add(1) })
	}
	time.Sleep(nestedStay)
	return count - 1
}

// release unlocks the levels a hold has left and, where 0 means "still
// held by this thread" (held0: not a read lock's unlock, whose 0 means
// other holds remain), one more when the last answers 0 (a level more
// than counted, which would otherwise hold the lock to its lease).
func (k *kindRun) release(call *retryCall, count int, held0 bool, unlock func() (int64, error)) {
	for i := 0; i < count; i++ {
		call.levels = count - i
		n, err := unlock()
		switch {
		case errors.Is(err, redissonwire.ErrNotOwner):
			k.nemCount(func(n *retryNemesis) { n.finalNil.Add(1) })
			return
		case err != nil:
			return
		case held0 && n == 0 && i == count-1 && count < 4:
			k.nemCount(func(n *retryNemesis) { n.extraLevel.Add(1) })
			count++
		}
	}
}

func (k *kindRun) nemCount(f func(n *retryNemesis)) {
	if k.nem != nil {
		f(k.nem)
	}
}

// The retry burst: the scenario a retry makes dangerous, aimed at on
// purpose and bounded — a thread holds a lock at count 2 (a re-entry),
// and its nested unlock, which must leave it one level, reaches the
// proxies as retryBurst copies with one latch (request id) at once, two
// through each proxy. Then another client tries the lock: granted while
// the holder is still inside (and valid) is two holders at once. Each
// kind with a latched unlock, each in two releases' texts.

const (
	retryBurst       = 4  // copies of each nested unlock, at once: half through each proxy
	retryBurstTrials = 12 // per case
)

type burstCase struct {
	name  string
	profs []redissonwire.Profile
	rw    bool // a read-write lock: the crowd checker; else the exclusive one
	write bool // the holder is a writer (a read-write lock)
	// lock takes a level for thread (granted or not); unlock releases one
	// (1 released, 0 still held); probe is another client's try.
	lock   func(ctx context.Context, c *redissonwire.Client, key string, thread int64) (bool, error)
	unlock func(ctx context.Context, c *redissonwire.Client, key string, thread int64) (int64, error)
	probe  func(ctx context.Context, c *redissonwire.Client, key string, thread int64) (bool, error)
}

func rwWriteTry(ctx context.Context, c *redissonwire.Client, key string, thread int64) (bool, error) {
	ok, _, err := c.WriteTryLock(ctx, key, thread, ttl)
	return ok, err
}

var burstCases = []burstCase{
	{name: "rwlock-write", profs: []redissonwire.Profile{redissonwire.RWProfiles[0], redissonwire.RWProfiles[3]}, rw: true, write: true,
		lock: rwWriteTry,
		unlock: func(ctx context.Context, c *redissonwire.Client, key string, thread int64) (int64, error) {
			return c.WriteUnlock(ctx, key, thread, ttl)
		},
		probe: rwWriteTry},
	{name: "rwlock-read", profs: []redissonwire.Profile{redissonwire.RWProfiles[0], redissonwire.RWProfiles[3]}, rw: true,
		lock: func(ctx context.Context, c *redissonwire.Client, key string, thread int64) (bool, error) {
			ok, _, err := c.ReadTryLock(ctx, key, thread, ttl)
			return ok, err
		},
		unlock: func(ctx context.Context, c *redissonwire.Client, key string, thread int64) (int64, error) {
			return c.ReadUnlock(ctx, key, thread)
		},
		probe: rwWriteTry},
	{name: "rlock", profs: []redissonwire.Profile{redissonwire.Profiles[0], redissonwire.Profiles[1]},
		lock: func(ctx context.Context, c *redissonwire.Client, key string, thread int64) (bool, error) {
			ok, _, err := c.TryLock(ctx, key, thread, ttl)
			return ok, err
		},
		unlock: func(ctx context.Context, c *redissonwire.Client, key string, thread int64) (int64, error) {
			return c.UnlockLease(ctx, key, thread, ttl)
		},
		probe: func(ctx context.Context, c *redissonwire.Client, key string, thread int64) (bool, error) {
			ok, _, err := c.TryLock(ctx, key, thread, ttl)
			return ok, err
		}},
	{name: "fairlock", profs: []redissonwire.Profile{redissonwire.RWProfiles[0], redissonwire.RWProfiles[4]},
		lock: func(ctx context.Context, c *redissonwire.Client, key string, thread int64) (bool, error) {
			return c.FairTryLock(ctx, key, thread, ttl)
		},
		unlock: func(ctx context.Context, c *redissonwire.Client, key string, thread int64) (int64, error) {
			return c.FairUnlock(ctx, key, thread, ttl)
		},
		probe: func(ctx context.Context, c *redissonwire.Client, key string, thread int64) (bool, error) {
			return c.FairTryLock(ctx, key, thread, ttl)
		}},
}

// burstResult is what one case's trials saw.
type burstResult struct {
	name                       string
	trials, copies             int
	differ                     int // trials whose copies answered differently
	probes                     int // trials whose probe was granted while the holder was inside
	lost                       int // trials whose holder's last unlock found no hold: a level lost
	overlaps                   int // the checkers' violations
	skipped                    int // trials whose holder did not get count 2, or a burst with an error
	firstDiffer, firstOverlaps string
}

func (r burstResult) violations() int { return r.differ + r.overlaps + r.lost }

// runRetryBurst runs each burst case against five fresh masters and two
// proxy processes.
func runRetryBurst(t *testing.T, seed uint64) []burstResult {
	set := mastertest.Start(t, 5)
	mastertest.RequireReal(t, set)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	flags := []string{"--master-timeout", masterTimeout.String(), "--max-ttl", ttl.String()}
	proxies := []string{proctest.StartProxy(t, nil, set.Addrs(), flags...).Addr, proctest.StartProxy(t, nil, set.Addrs(), flags...).Addr}
	rng := rand.New(rand.NewPCG(seed, 0xb0))
	var out []burstResult
	for _, bc := range burstCases {
		r := burstResult{name: bc.name}
		chk, crowd := &fault.Checker{Margin: margin}, &fault.Crowd{Margin: margin}
		enter := func(key string, id int64, until time.Time, write bool) bool {
			if bc.rw {
				return crowd.Enter(key, id, until, write, 0)
			}
			return chk.Enter(key, id, until, 0)
		}
		leave := func(key string, id int64) {
			if bc.rw {
				crowd.Leave(key, id)
			} else {
				chk.Leave(key, id)
			}
		}
		for i := range retryBurstTrials {
			prof := bc.profs[i%len(bc.profs)]
			holder := dialGroup(t, ctx, proxies, prof, retryBurst)
			other := dialGroup(t, ctx, proxies, prof, 1)[0]
			key := fmt.Sprintf("burst:%s:%d:%d", bc.name, seed, i)
			r.trials++
			t0 := time.Now()
			c := holder[rng.IntN(len(holder))]
			ok1, err1 := bc.lock(ctx, c, key, 1)
			ok2, err2 := bc.lock(ctx, holder[rng.IntN(len(holder))], key, 1)
			if !ok1 || !ok2 || err1 != nil || err2 != nil {
				r.skipped++
				t.Logf("%s trial %d: no count-2 hold (%v %v, %v %v)", bc.name, i, ok1, err1, ok2, err2)
				continue
			}
			drift := ttl/100 + 2*time.Millisecond
			if !enter(key, 1, t0.Add(ttl-drift), bc.write) {
				r.skipped++
				continue
			}
			// The nested unlock, its copies at once through both proxies.
			var answers []string
			var errs int
			c.Resend = func(ctx context.Context, c *redissonwire.Client, req redissonwire.Request) (resp.Reply, error) {
				if requestKind(req) != reqUnlock || req.Latch() == "" {
					return c.Send(ctx, req)
				}
				reps := make([]resp.Reply, len(holder))
				rerrs := make([]error, len(holder))
				start := make(chan struct{})
				var wg sync.WaitGroup
				for j, via := range holder {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						reps[j], rerrs[j] = via.Send(ctx, req)
					}()
				}
				close(start)
				wg.Wait()
				for j := range reps {
					if rerrs[j] != nil {
						errs++
						continue
					}
					answers = append(answers, reps[j].String())
				}
				return reps[0], rerrs[0]
			}
			n, err := bc.unlock(ctx, c, key, 1)
			c.Resend = nil
			r.copies += len(holder)
			if slices.ContainsFunc(answers, func(a string) bool { return a != answers[0] }) || err == nil && n != 0 {
				r.differ++
				if r.firstDiffer == "" {
					r.firstDiffer = fmt.Sprintf("trial %d (%s): the nested unlock's %d copies answered %v (%d errors)", i, prof.Name, len(holder), answers, errs)
				}
			}
			if errs > 0 && len(answers) == 0 {
				r.skipped++
			}
			// Another client tries while the holder, one level left, is
			// inside.
			if ok, err := bc.probe(ctx, other, key, 2); ok && err == nil {
				r.probes++
				if enter(key, 2, time.Now().Add(ttl-drift), true) {
					leave(key, 2)
				}
				bc.unlock(ctx, other, key, 2)
			}
			leave(key, 1)
			if _, err := bc.unlock(ctx, holder[0], key, 1); errors.Is(err, redissonwire.ErrNotOwner) {
				r.lost++
			}
		}
		ex, cr := chk.Result(), crowd.Result()
		r.overlaps = ex.Violations() + cr.Violations()
		r.firstOverlaps = ex.FirstViolation + cr.FirstViolation
		out = append(out, r)
	}
	return out
}

// dialGroup connects one Redisson client (one ID) n times, alternately to
// each proxy.
func dialGroup(t *testing.T, ctx context.Context, proxies []string, prof redissonwire.Profile, n int) []*redissonwire.Client {
	var g []*redissonwire.Client
	for j := range n {
		c, err := redissonwire.Dial(ctx, proxies[j%len(proxies)], prof)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		if j > 0 {
			c.ID = g[0].ID
		}
		g = append(g, c)
	}
	return g
}

// checkRetryBurst runs the retry burst, logs its table and fails t on a
// violation: copies that answered differently (the nested unlock acted
// more than once), a level lost, two holders at once.
func checkRetryBurst(t *testing.T, seed uint64) (trials, violations int) {
	start := time.Now()
	res := runRetryBurst(t, seed)
	var b strings.Builder
	fmt.Fprintf(&b, "\n| case (count-2 hold, nested unlock ×%d at once, one latch) | trials | copies | answered differently | another client granted | level lost | overlaps | skipped |\n", retryBurst)
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range res {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d |\n", r.name, r.trials, r.copies, r.differ, r.probes, r.lost, r.overlaps, r.skipped)
		trials += r.trials
		violations += r.violations()
		if r.violations() != 0 {
			t.Errorf("%s: %d of %d trials' copies answered differently, %d lost a level, %d overlaps (another client granted in %d); first: %s %s",
				r.name, r.differ, r.trials, r.lost, r.overlaps, r.probes, r.firstDiffer, r.firstOverlaps)
		}
		if r.skipped > r.trials/2 {
			t.Errorf("%s: %d of %d trials skipped", r.name, r.skipped, r.trials)
		}
	}
	t.Logf("retry burst, seed %d, %.1fs:%s", seed, time.Since(start).Seconds(), b.String())
	return trials, violations
}
