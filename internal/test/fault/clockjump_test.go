package fault_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/clockfront"
	"github.com/redlock-dev/redlock/internal/test/fault"
	"github.com/redlock-dev/redlock/internal/test/history"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/proxy"
)

// Clock-jump scenarios (docs/safety.md, "Master clock jumps"): every
// master is reached through a clockfront front, and a nemesis jumps the
// clocks of one or two masters forward by more than the TTL while fenced
// lockers hold, write and release hot keys. A jumped master loses every
// lock key at once (clockfront cuts each TTL by the jump), so a contender
// can win a quorum while a holder is valid whose quorum the jump left
// short: one held on exactly three masters, one of them jumped, or on
// three or four, two of them jumped. Such holders come from split votes
// under contention; the nemesis aims at one (aim) and jumps while it is
// inside. Each scenario runs with the clock check on, which must keep
// every holder alone, and off, which must show the overlaps the jumps
// make — the scenario can fail — while fencing still refuses every write
// of a holder that lost its lock that way.
const (
	// clockJumpShare: each run takes 1/clockJumpShare of
	// REDLOCK_FAULT_ACQUISITIONS (make fault: 2000; go test: 200).
	clockJumpShare = 60
	// clockJumpBy is each jump: past every lock's TTL, so the jumped
	// masters lose every lock key.
	clockJumpBy = ttl * 3 / 2
	// clockJumpEvery is the least time between jumps: longer than the
	// quarantine period (MaxTTL = ttl), so that with the check on the
	// masters of at most one jump are quarantined at a time and the three
	// others still make a quorum.
	clockJumpEvery = ttl + ttl/5
	// clockJumpMin is the least number of jumps in a run; larger runs
	// make one per clockJumpPer acquisitions.
	clockJumpMin = 3
	clockJumpPer = 400
	// clockJumpMaxOff bounds the jumps of a check-off run that has shown
	// no overlap yet: it keeps aiming jumps until one lands (the negative
	// control must show what the check prevents, not hope to).
	clockJumpMaxOff = 15
	// clockProxyWorkers of the workers lock through a proxy (REDLOCK.LOCK).
	clockProxyWorkers = 4
	// clockMasterTimeout: no master is stopped or restarted here, so a
	// generous per-master timeout costs nothing and keeps -race runs on
	// two busy cores from timing out.
	clockMasterTimeout = 250 * time.Millisecond
	// clockDialTimeout: likewise for the 29 engines' handshakes (scripts
	// loaded through the fronts) at start, all at once.
	clockDialTimeout = 3 * time.Second
	// clockHoldMax bounds a holder's stay (but for clockLinger).
	clockHoldMax = 8 * time.Millisecond
	// clockAimFor is how long the nemesis looks for a lock to aim a jump
	// at (aim) before it jumps random masters.
	clockAimFor = 300 * time.Millisecond
	// clockLinger is how long the holders inside at a jump stay after it
	// (a critical section the jump lands in the middle of): time for a
	// contender to win the key where the jumped masters lost it.
	clockLinger = 50 * time.Millisecond
)

type clockScenario struct {
	name   string
	jumped int // masters whose clocks jump at once
}

var clockScenarios = []clockScenario{
	{"clock jump, one master", 1},
	{"clock jump, two masters", 2},
}

type clockRow struct {
	row
	checkOff bool
	jumps    int
	aimed    int // jumps aim found a target for
	detected int // forward jumps the engines' clock checks saw, all engines together
}

// TestFaultClockJump runs each clock-jump scenario with the clock check
// on (no overlap, no stale write accepted, the jumps seen) and off (an
// overlap required once a jump was aimed; fencing must still refuse every
// stale write and keep tokens in order).
func TestFaultClockJump(t *testing.T) {
	total := envInt("REDLOCK_FAULT_ACQUISITIONS", defaultAcquisitions)
	seed := uint64(envInt("REDLOCK_FAULT_SEED", defaultSeed))
	per := max(total/clockJumpShare, 100)
	t.Logf("clock jumps: seed %d, %d acquisitions per run, %d workers (%d through a proxy) on %d hot keys, all fenced, ttl %v, jumps of %v at least %v apart",
		seed, per, workers, clockProxyWorkers, hotKeys, ttl, clockJumpBy, clockJumpEvery)
	var rows []clockRow
	for i, sc := range clockScenarios {
		for _, off := range []bool{false, true} {
			name := sc.name + ", check on"
			if off {
				name = sc.name + ", check off"
			}
			t.Run(strings.NewReplacer(" ", "-", ",", "").Replace(name), func(t *testing.T) {
				r := runClockJump(t, sc, off, seed+100+uint64(i), per)
				r.name = name
				rows = append(rows, r)
				res := r.res
				if !off && (res.Violations() != 0 || res.Unordered != 0) {
					t.Errorf("check on: %d safety violations (overlaps %d, token order %d, stale accepted %d, valid holder refused %d, overlapping acquisitions out of token order %d); first: %s",
						res.Violations(), res.Overlaps, res.OrderViolations, res.StaleAccepted, res.LegitRejected, res.Unordered, res.FirstViolation)
				}
				if !off && r.detected == 0 {
					t.Error("check on: no engine saw a jump")
				}
				if !off && !r.hist.OK() {
					t.Errorf("check on: the history is not linearizable: %v", r.hist)
				}
				// The history check sees what the checker counted: an
				// overlap is a grant inside another holder's validity.
				if off && res.Overlaps > 0 && r.hist.OK() {
					t.Errorf("check off: %d overlaps, yet the history checker found it linearizable: %v", res.Overlaps, r.hist)
				}
				// Fencing's guarantee with an undetected jump (docs/safety.md):
				// every holder is ordered after each holder that entered
				// before its acquisition started; holders whose
				// acquisitions overlapped (the jump's two holders) may not be.
				if off && res.Violations() != res.Overlaps {
					t.Errorf("check off: fencing failed for holders it orders (token order %d, stale accepted %d, valid holder refused %d); first: %s",
						res.OrderViolations, res.StaleAccepted, res.LegitRejected, res.FirstViolation)
				}
				// The prediction: a jump aimed at a lock held on the masters
				// it hits hands a contender the key while the holder is in;
				// the run aims until one does (clockJumpMaxOff).
				if off && res.Overlaps == 0 {
					t.Errorf("check off: no overlap after %d jumps (%d aimed): the scenario cannot show what the check prevents", r.jumps, r.aimed)
				}
				if off && res.Overlaps > 0 {
					t.Logf("check off, as predicted: %d overlaps after %d jumps (%d aimed), %d pairs of overlapping acquisitions out of token order; first: %s",
						res.Overlaps, r.jumps, r.aimed, res.Unordered, res.FirstViolation)
				}
				if res.Entries < per {
					t.Errorf("only %d acquisitions of %d within %v", res.Entries, per, scenarioLimit)
				}
				if r.jumps < clockJumpMin {
					t.Errorf("only %d jumps", r.jumps)
				}
			})
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| scenario | acquisitions | jumps (aimed) | detections | overlaps | token order violations | overlapping acquisitions out of order | stale writes rejected | stale writes accepted | busy tries | unavailable tries | seconds |\n")
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %d (%d) | %d | %d | %d | %d | %d | %d | %d | %d | %.1f |\n", r.name, r.res.Entries, r.jumps, r.aimed, r.detected,
			r.res.Overlaps, r.res.OrderViolations, r.res.Unordered, r.res.StaleRejected, r.res.StaleAccepted, r.contendedTries, r.unavailableTries, r.elapsed.Seconds())
	}
	t.Log(b.String())
}

// runClockJump runs one clock-jump scenario: five real masters, each
// behind a front; 28 workers with an engine each (a process each: no
// in-process state orders them) and 4 through one proxy, every engine
// created before the first jump (the check judges a master by its
// previous reading); all fenced. A holder stays up to clockHoldMax
// (clockLinger more when a jump lands meanwhile: gate), then writes to
// the fenced storage — through the checker's StaleWrite: its lock may
// have been lost to a jump without its knowing, and the storage must then
// refuse its token — and releases.
func runClockJump(t *testing.T, sc clockScenario, checkOff bool, seed uint64, target int) clockRow {
	set := mastertest.Start(t, 5)
	mastertest.RequireReal(t, set)
	addrs := set.Addrs()
	var fronts []*clockfront.Front
	for i := range addrs {
		f := clockfront.Start(t, addrs[i])
		fronts, addrs[i] = append(fronts, f), f.Addr()
	}
	cfg := engine.Config{FreshMasters: true, Addrs: addrs, MaxTTL: ttl, MasterTimeout: clockMasterTimeout, DisableClockCheck: checkOff,
		Conn: conn.Config{DialTimeout: clockDialTimeout}}
	ctx, cancel := context.WithTimeout(context.Background(), scenarioLimit)
	defer cancel()

	var lockers []locker
	var engines []*engine.Engine
	for range workers - clockProxyWorkers {
		e := newEngine(t, ctx, cfg)
		engines, lockers = append(engines, e), append(lockers, engineLocker{e})
	}
	srv, paddr := inProcessProxy(t, ctx, cfg)
	engines = append(engines, srv.Engine())
	for range clockProxyWorkers {
		c, err := conn.Dial(ctx, paddr, conn.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		lockers = append(lockers, &proxyLocker{c: c})
	}

	// The nemesis reads the masters directly (aim).
	var direct []*conn.Conn
	for _, a := range set.Addrs() {
		c, err := conn.Dial(ctx, a, conn.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		direct = append(direct, c)
	}

	chk := &fault.Checker{Margin: margin}
	rec := history.NewRecorder() // what the lockers saw, checked at the end
	keys := make([]string, hotKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("fault:clock:%d:%d", sc.jumped, i)
	}
	var busy, unavailable, holderID atomic.Int64
	var jumpsDone atomic.Bool
	var gate sync.RWMutex
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)+1))
			l := lockers[w]
			for ctx.Err() == nil && (chk.Entries() < target || !jumpsDone.Load()) {
				key := keys[rng.IntN(len(keys))]
				call := rec.Acquire(w, key)
				started := time.Now()
				h, err := l.lock(ctx, key, true)
				if err != nil {
					switch {
					case errors.Is(err, errBusy):
						call.Refused()
						busy.Add(1)
						time.Sleep(time.Duration(500+rng.IntN(1000)) * time.Microsecond)
					default:
						call.Unavailable()
						unavailable.Add(1)
						time.Sleep(time.Duration(2+rng.IntN(3)) * time.Millisecond)
					}
					continue
				}
				g := call.Granted(h.fence, h.until)
				id := holderID.Add(1)
				entered, _ := chk.EnterFrom(key, id, started, h.until, h.fence)
				if entered {
					time.Sleep(time.Duration(1 + rng.Int64N(int64(clockHoldMax))))
				}
				// Leaving passes the gate, and releases before the gate can
				// close: while it is closed, every lock on the masters is
				// one whose holder is inside (or a grant on its way).
				gate.RLock()
				if entered {
					wr := rec.Write(g, h.fence)
					recordWrite(wr, true, chk.StaleWrite(key, id, h.fence))
					chk.Leave(key, id)
				}
				rel := rec.Release(g)
				h.unlock(ctx)
				rel.Released()
				gate.RUnlock()
			}
		}()
	}

	// The nemesis: jump k of n when the run reached k/(n+1) of its
	// acquisitions and clockJumpEvery has passed since the last, at the
	// worst moment: aimed at a held lock (aim) when it finds one within
	// clockAimFor, while holders wait (gate).
	n := max(clockJumpMin, target/clockJumpPer)
	rng := rand.New(rand.NewPCG(seed, 0))
	jumps, aimed := 0, 0
	var last time.Time
	more := func(k int) bool { // a check-off run jumps until it shows an overlap
		return k <= n || (checkOff && k <= clockJumpMaxOff && chk.Result().Overlaps == 0)
	}
	for k := 1; more(k) && ctx.Err() == nil; k++ {
		for ctx.Err() == nil && (float64(chk.Entries()) < float64(min(k, n))/float64(n+1)*float64(target) || time.Since(last) < clockJumpEvery) {
			time.Sleep(2 * time.Millisecond)
		}
		if ctx.Err() != nil {
			break
		}
		// The gate closed, no holder leaves: the locks aim sees stay
		// held through the jump and clockLinger after it.
		gate.Lock()
		idx, why := aim(ctx, direct, keys, sc.jumped, rng)
		for until := time.Now().Add(clockAimFor); idx == nil && time.Now().Before(until) && ctx.Err() == nil; {
			gate.Unlock()
			time.Sleep(2 * time.Millisecond)
			gate.Lock()
			idx, why = aim(ctx, direct, keys, sc.jumped, rng)
		}
		if idx == nil {
			idx, why = rng.Perm(len(fronts))[:sc.jumped], "random"
		} else {
			aimed++
		}
		at, entries := time.Since(start), chk.Entries()
		for _, i := range idx {
			if err := fronts[i].Jump(ctx, clockJumpBy); err != nil {
				t.Error(err)
			}
		}
		time.Sleep(clockLinger)
		gate.Unlock()
		t.Logf("%6.2fs at %5d acquisitions: masters %v jump %v ahead (%s); overlaps so far %d", at.Seconds(), entries, idx, clockJumpBy, why, chk.Result().Overlaps)
		last = time.Now()
		jumps++
	}
	time.Sleep(ttl / 4) // the last jump's aftermath
	jumpsDone.Store(true)
	wg.Wait()
	r := clockRow{row: row{name: sc.name, res: chk.Result(), elapsed: time.Since(start),
		contendedTries: busy.Load(), unavailableTries: unavailable.Load()}, checkOff: checkOff, jumps: jumps, aimed: aimed}
	for _, e := range engines {
		r.detected += int(e.Stats().ClockJumpsAhead)
	}
	var err error
	r.hist, err = history.Check(rec.Ops(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s, check off %v, history: %v", sc.name, checkOff, r.hist)
	t.Logf("%s, check off %v: %d acquisitions in %.1fs, %d jumps (%d aimed, %d detections), %d busy and %d unavailable tries; overlaps %d, token order violations %d, stale writes rejected %d, accepted %d",
		sc.name, checkOff, r.res.Entries, r.elapsed.Seconds(), jumps, aimed, r.detected, r.contendedTries, r.unavailableTries,
		r.res.Overlaps, r.res.OrderViolations, r.res.StaleRejected, r.res.StaleAccepted)
	return r
}

// aim looks for a lock of keys held on so few masters that a jump of m of
// them leaves it short of a quorum and hands a contender one — the
// jumped masters plus those that do not hold it —: held on exactly three
// masters for one jump, on three or four for two. It reads every
// master's values of keys (directly, not through the fronts) and returns
// m of the holder's masters and why, or nil. Redlock holders are on all
// five masters unless their acquisition raced another's (a split vote:
// the loser's grants are cleaned up) or a master missed it; such a lock
// is what a jump at the worst moment hits.
func aim(ctx context.Context, direct []*conn.Conn, keys []string, m int, rng *rand.Rand) ([]int, string) {
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	vals := make([][]string, len(direct))
	var wg sync.WaitGroup
	for i, c := range direct {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.Exec(cctx, append([]string{"MGET"}, keys...)...)
			if err != nil || len(r.Elems) != len(keys) {
				return
			}
			for _, e := range r.Elems {
				vals[i] = append(vals[i], string(e.Str))
			}
		}()
	}
	wg.Wait()
	for _, k := range rng.Perm(len(keys)) {
		on := map[string][]int{}
		for i := range direct {
			if len(vals[i]) == len(keys) && vals[i][k] != "" {
				on[vals[i][k]] = append(on[vals[i][k]], i)
			}
		}
		for _, held := range on {
			if len(held) >= 3 && len(held)-m < 3 && len(direct)-len(held)+m >= 3 {
				why := fmt.Sprintf("aimed: %s held on masters %v", keys[k], held)
				pick := rng.Perm(len(held))[:m]
				for j := range pick {
					pick[j] = held[pick[j]]
				}
				sort.Ints(pick)
				return pick, why
			}
		}
	}
	return nil, ""
}

// inProcessProxy serves a proxy whose engine has cfg (a dialer into the
// partition's namespaces, or the clock check off) until t ends, once its
// masters are connected; it returns the server and its address.
func inProcessProxy(t *testing.T, ctx context.Context, cfg engine.Config) (*proxy.Server, string) {
	srv, err := proxy.New(proxy.Config{EngineConfig: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; !errors.Is(err, proxy.ErrServerClosed) {
			t.Errorf("proxy Serve: %v", err)
		}
	})
	if _, err := srv.Engine().WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return srv, ln.Addr().String()
}
