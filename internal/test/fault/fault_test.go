package fault_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/internal/test/fault"
	"github.com/redlock-dev/redlock/internal/test/history"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/relay"
	"github.com/redlock-dev/redlock/proxy"
	"github.com/redlock-dev/redlock/resp"
)

// Suite parameters. REDLOCK_FAULT_ACQUISITIONS sets the total number of
// acquisitions across scenarios (make fault: 120000), REDLOCK_FAULT_SEED
// the seed (printed; the same seed gives the same keys, holds, pauses and
// fault choices — not the same interleaving, which the scheduler decides).
const (
	defaultAcquisitions = 12000
	defaultSeed         = 11
	workers             = 32
	hotKeys             = 8
	ttl                 = time.Second
	masterTimeout       = 25 * time.Millisecond
	margin              = 5 * time.Millisecond // validity a holder needs left to enter
	pauseOneIn          = 200                  // fenced holders paused past their validity
	scenarioLimit       = 2 * time.Minute
)

// fixture is one scenario's masters (and relays) for its fault steps.
type fixture struct {
	t      *testing.T
	set    *localmaster.Set
	relay  *relay.Relay   // in front of master 4 (latency scenario)
	slowB  []*relay.Relay // engine B's paths to masters 0-2 (two-engine scenarios)
	direct *conn.Conn     // to master 0 (two-engine scenarios)
}

func (f *fixture) master(i int) *localmaster.Master { return f.set.Masters()[i] }

func (f *fixture) kill(idx ...int) {
	for _, i := range idx {
		if err := f.master(i).Kill(); err != nil {
			f.t.Error(err)
		}
	}
}

// restart starts killed masters again, empty (no persistence).
func (f *fixture) restart(idx ...int) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, i := range idx {
		if err := f.master(i).Restart(ctx); err != nil {
			f.t.Error(err)
		}
	}
}

func (f *fixture) restartEmpty(idx ...int) {
	f.kill(idx...)
	f.restart(idx...)
}

func (f *fixture) stop(idx ...int) {
	for _, i := range idx {
		if err := f.master(i).Pause(); err != nil {
			f.t.Error(err)
		}
	}
}

func (f *fixture) cont(idx ...int) {
	for _, i := range idx {
		if err := f.master(i).Resume(); err != nil {
			f.t.Error(err)
		}
	}
}

// delayB sets the latency of engine B's paths to masters 0-2.
func (f *fixture) delayB(d time.Duration) {
	for _, r := range f.slowB {
		r.SetDelay(d)
	}
}

// aheadScript pushes a fencing counter d µs past max(counter, clock): the
// master's clock, or the grants it counted, running ahead of the others'.
var aheadScript = conn.NewScript(`local t = redis.call("time")
local c = math.max(tonumber(redis.call("get",KEYS[1])) or 0, tonumber(t[1]) * 1000000 + tonumber(t[2]))
redis.call("set",KEYS[1],string.format("%d",c + tonumber(ARGV[1])))
return 1`)

// counterAhead pushes master 0's fencing counter d ahead.
func (f *fixture) counterAhead(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := f.direct.Exec(ctx, "EVAL", aheadScript.Source(), "1", engine.DefaultFenceKey, strconv.FormatInt(d.Microseconds(), 10)); err != nil {
		f.t.Error(err)
	}
}

// step is a fault injected once the scenario reached a share of its
// acquisitions.
type step struct {
	at   float64
	desc string
	do   func(f *fixture)
}

type scenario struct {
	name    string
	proxy   bool // lockers are proxy clients
	lib     bool // proxy clients lock and extend with the library scripts
	conns   int  // engine connections per master (0: 1)
	latency bool // master 4 behind a relay that adds latency
	// two: two engines (two processes) take turns on the keys; engine B
	// reaches masters 0-2 through relays (fixture.delayB).
	two   bool
	steps func(rng *rand.Rand) []step
}

// restartSteps restarts masters empty at eight points of the run: one at a
// time, then two at once, then three at once (a quorum: every lock the
// group held is gone from a majority, which only the quarantine covers).
func restartSteps(rng *rand.Rand) []step {
	var s []step
	for k := 1; k <= 8; k++ {
		a := rng.IntN(5)
		idx := []int{a}
		switch k {
		case 4:
			idx = append(idx, (a+1+rng.IntN(4))%5)
		case 7:
			idx = append(idx, (a+1)%5, (a+2)%5)
		}
		s = append(s, step{float64(k) / 10, fmt.Sprintf("restart masters %v empty", idx), func(f *fixture) { f.restartEmpty(idx...) }})
	}
	return s
}

var scenarios = []scenario{
	{name: "engine/kill-9", steps: func(*rand.Rand) []step {
		return []step{
			{0.2, "kill -9 masters 0,1", func(f *fixture) { f.kill(0, 1) }},
			{0.4, "restart 0,1 empty", func(f *fixture) { f.restart(0, 1) }},
			{0.6, "kill -9 masters 2,3", func(f *fixture) { f.kill(2, 3) }},
			{0.8, "restart 2,3 empty", func(f *fixture) { f.restart(2, 3) }},
		}
	}},
	{name: "engine/sigstop", steps: func(*rand.Rand) []step {
		return []step{
			{0.2, "SIGSTOP master 2", func(f *fixture) { f.stop(2) }},
			{0.4, "SIGCONT master 2", func(f *fixture) { f.cont(2) }},
			{0.6, "SIGSTOP masters 3,4", func(f *fixture) { f.stop(3, 4) }},
			{0.8, "SIGCONT masters 3,4", func(f *fixture) { f.cont(3, 4) }},
		}
	}},
	{name: "engine/restart-empty", steps: restartSteps},
	// Two connections per master: whichever meets a restarted master
	// first must quarantine it.
	{name: "engine/2-conns+restart-empty", conns: 2, steps: restartSteps},
	{name: "engine/latency", latency: true, steps: func(*rand.Rand) []step {
		return []step{
			{0, "master 4 +5ms each way", func(f *fixture) { f.relay.SetDelay(5 * time.Millisecond) }},
			{0.33, "master 4 +15ms each way (past the 25ms master timeout)", func(f *fixture) { f.relay.SetDelay(15 * time.Millisecond) }},
			{0.5, "master 4 +15ms, SIGSTOP master 0", func(f *fixture) { f.stop(0) }},
			{0.66, "master 4 +2ms, SIGCONT master 0", func(f *fixture) { f.relay.SetDelay(2 * time.Millisecond); f.cont(0) }},
		}
	}},
	// Issue #22 item 7: a holder whose SETs reach some masters late must
	// still get a token above an earlier holder's that a master with a
	// counter ahead gave (engine TestFencingDelayedSet is the exact
	// interleaving). Two engines, so that no in-process floor orders them.
	{name: "engine/fence-skew", two: true, steps: func(*rand.Rand) []step {
		return []step{
			{0, "engine B → masters 0-2 +3ms each way, master 0's counter +1s", func(f *fixture) { f.delayB(3 * time.Millisecond); f.counterAhead(time.Second) }},
			{0.25, "master 0's counter +1s", func(f *fixture) { f.counterAhead(time.Second) }},
			{0.5, "engine B → masters 0-2 +10ms, master 0's counter +1s", func(f *fixture) { f.delayB(10 * time.Millisecond); f.counterAhead(time.Second) }},
			{0.75, "engine B → masters 0-2 +1ms, master 0's counter +1s", func(f *fixture) { f.delayB(time.Millisecond); f.counterAhead(time.Second) }},
		}
	}},
	{name: "proxy/kill-9+sigstop", proxy: true, steps: func(*rand.Rand) []step {
		return []step{
			{0.2, "kill -9 masters 0,1", func(f *fixture) { f.kill(0, 1) }},
			{0.4, "restart 0,1 empty", func(f *fixture) { f.restart(0, 1) }},
			{0.6, "SIGSTOP master 2", func(f *fixture) { f.stop(2) }},
			{0.8, "SIGCONT master 2", func(f *fixture) { f.cont(2) }},
		}
	}},
	// Every broadcast grant path: bsm/redislock and node-redlock
	// acquisitions, redsync/bsm/node-redlock/redis-py extensions.
	{name: "proxy/library-scripts+restart-empty", proxy: true, lib: true, steps: restartSteps},
	{name: "proxy/sigstop+restart-empty", proxy: true, steps: func(rng *rand.Rand) []step {
		a := rng.IntN(3)
		return []step{
			{0.25, "SIGSTOP masters 3,4", func(f *fixture) { f.stop(3, 4) }},
			{0.5, "SIGCONT masters 3,4", func(f *fixture) { f.cont(3, 4) }},
			{0.7, fmt.Sprintf("restart master %d empty", a), func(f *fixture) { f.restartEmpty(a) }},
			{0.85, fmt.Sprintf("restart masters %d,%d empty", a+1, a+2), func(f *fixture) { f.restartEmpty(a+1, a+2) }},
		}
	}},
}

type row struct {
	name             string
	res              fault.Result
	paused           int64
	elapsed          time.Duration
	faultsInjected   int
	contendedTries   int64
	unavailableTries int64
	hist             history.Result // the lockers' history, checked
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestFault runs contended lockers through each scenario's faults against
// real redis-server masters and checks mutual exclusion and fencing.
func TestFault(t *testing.T) {
	total := envInt("REDLOCK_FAULT_ACQUISITIONS", defaultAcquisitions)
	seed := uint64(envInt("REDLOCK_FAULT_SEED", defaultSeed))
	per := (total + len(scenarios) - 1) / len(scenarios)
	t.Logf("fault suite: seed %d, %d acquisitions per scenario, %d workers on %d hot keys, ttl %v (REDLOCK_FAULT_SEED, REDLOCK_FAULT_ACQUISITIONS)",
		seed, per, workers, hotKeys, ttl)
	var rows []row
	for i, sc := range scenarios {
		t.Run(strings.ReplaceAll(sc.name, "/", "-"), func(t *testing.T) {
			r := runScenario(t, sc, seed+uint64(i), per)
			rows = append(rows, r)
			checkResult(t, r.res, per)
			if r.faultsInjected == 0 {
				t.Error("no fault was injected")
			}
			if !r.hist.OK() {
				t.Errorf("history: %v", r.hist)
				path := filepath.Join(os.TempDir(), "redlock-history-"+strings.ReplaceAll(sc.name, "/", "-")+".html")
				if err := r.hist.Visualize(path); err == nil {
					t.Logf("history: porcupine's view of the longest linearizations: %s", path)
				}
			}
		})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| scenario | acquisitions | fenced | overlaps | token order violations | stale writes rejected | stale writes accepted | busy tries | unavailable tries | seconds |\n")
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var sum fault.Result
	histOps := 0
	for _, r := range rows {
		histOps += r.hist.Ops
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %.1f |\n", r.name, r.res.Entries, r.res.Fenced,
			r.res.Overlaps, r.res.OrderViolations, r.res.StaleRejected, r.res.StaleAccepted, r.contendedTries, r.unavailableTries, r.elapsed.Seconds())
		sum.Entries += r.res.Entries
		sum.Fenced += r.res.Fenced
		sum.Overlaps += r.res.Overlaps
		sum.OrderViolations += r.res.OrderViolations
		sum.StaleRejected += r.res.StaleRejected
		sum.StaleAccepted += r.res.StaleAccepted
	}
	fmt.Fprintf(&b, "| **total** | %d | %d | %d | %d | %d | %d | | | |\n", sum.Entries, sum.Fenced, sum.Overlaps, sum.OrderViolations, sum.StaleRejected, sum.StaleAccepted)
	t.Log(b.String())
	t.Logf("history: %d ops checked over %d scenarios against the lock-with-fencing model (internal/test/history)", histOps, len(rows))
	if len(rows) == len(scenarios) && sum.StaleRejected == 0 {
		t.Error("no paused holder's write was rejected: the fencing path was not exercised")
	}
}

// checkResult fails t on any safety violation, or when fewer than target
// acquisitions were made.
func checkResult(t *testing.T, res fault.Result, target int) {
	t.Helper()
	if res.Violations() != 0 {
		t.Errorf("%d safety violations (overlaps %d, token order %d, stale accepted %d, valid holder refused %d); first: %s",
			res.Violations(), res.Overlaps, res.OrderViolations, res.StaleAccepted, res.LegitRejected, res.FirstViolation)
	}
	if res.Entries < target {
		t.Errorf("only %d acquisitions of %d within %v", res.Entries, target, scenarioLimit)
	}
}

func runScenario(t *testing.T, sc scenario, seed uint64, target int) row {
	set := mastertest.Start(t, 5)
	mastertest.RequireReal(t, set)
	f := &fixture{t: t, set: set}
	addrs := set.Addrs()
	if sc.latency {
		r, err := relay.Start(addrs[4])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		f.relay, addrs[4] = r, r.Addr()
	}
	t.Cleanup(func() { // never leave a master stopped
		for _, m := range set.Masters() {
			m.Resume()
		}
	})
	// REDLOCK_FAULT_NO_QUARANTINE=1 shows what the checker reports
	// without restart quarantine (docs/safety.md); never in CI.
	// Every client uses the one TTL: MaxTTL, the quarantine period, is it.
	cfg := engine.Config{FreshMasters: true, Addrs: addrs, MaxTTL: ttl, ConnsPerMaster: sc.conns, MasterTimeout: masterTimeout, DisableQuarantine: os.Getenv("REDLOCK_FAULT_NO_QUARANTINE") == "1",
		Conn: conn.Config{ReconnectMin: time.Millisecond, ReconnectMax: 50 * time.Millisecond, DialTimeout: 300 * time.Millisecond}}
	ctx, cancel := context.WithTimeout(context.Background(), scenarioLimit)
	defer cancel()

	var lockers []locker
	if sc.proxy {
		// The real binary, as operators run it, with the same settings.
		flags := []string{"--master-timeout", masterTimeout.String(), "--reconnect-max", "50ms", "--dial-timeout", "300ms", "--max-ttl", ttl.String()}
		if cfg.DisableQuarantine {
			flags = append(flags, "--no-quarantine")
		}
		addr := redlockProxy(t, addrs, flags...)
		for range workers {
			c, err := conn.Dial(ctx, addr, conn.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			lockers = append(lockers, &proxyLocker{c: c, lib: sc.lib})
		}
	} else {
		engines := []*engine.Engine{newEngine(t, ctx, cfg)}
		if sc.two {
			bcfg := cfg
			bcfg.Addrs = append([]string(nil), addrs...)
			for i := range 3 {
				r, err := relay.Start(addrs[i])
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Close() })
				f.slowB, bcfg.Addrs[i] = append(f.slowB, r), r.Addr()
			}
			engines = append(engines, newEngine(t, ctx, bcfg))
			c, err := conn.Dial(ctx, addrs[0], conn.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			f.direct = c
		}
		for w := range workers {
			// Fenced and unfenced workers on every engine.
			lockers = append(lockers, engineLocker{engines[w/2%len(engines)]})
		}
	}

	chk := &fault.Checker{Margin: margin}
	rec := history.NewRecorder() // what the lockers saw, checked at the end
	keys := make([]string, hotKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("fault:%s:%d", sc.name, i)
	}
	var paused, busy, unavailable atomic.Int64
	var holderID atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)+1))
			fenced := w%2 == 0
			l := lockers[w]
			for ctx.Err() == nil && chk.Entries() < target {
				key := keys[rng.IntN(len(keys))]
				call := rec.Acquire(w, key)
				h, err := l.lock(ctx, key, fenced)
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
				var wr history.Call
				if h.fence != 0 {
					wr = rec.Write(g, h.fence)
				}
				entered, accepted := chk.EnterWrite(key, id, h.until, h.fence)
				if h.fence != 0 {
					recordWrite(wr, entered, accepted)
				}
				if entered {
					if h.extend != nil && rng.IntN(4) == 0 {
						// Extended inside: the checker counts the new
						// validity, so an entry before it ends is an overlap.
						x := rec.Extend(g)
						if until, ok := h.extend(ctx); ok {
							x.Extended(until)
							chk.Extend(key, id, until)
							time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
						} else {
							x.Refused()
						}
					}
					if h.fence != 0 && rng.IntN(pauseOneIn) == 0 {
						// Paused inside the critical section past the lock's
						// validity, then writes with its old token — once
						// another holder took the key and wrote (waited
						// for, up to 3 TTLs: a fixed ttl/4 once saw no
						// other holder on a busy machine, and the suite
						// no stale write to refuse; issue #43).
						time.Sleep(time.Until(h.until))
						for until := time.Now().Add(3 * ttl); !chk.NewerEntered(key, id) && time.Now().Before(until) && ctx.Err() == nil; {
							time.Sleep(time.Millisecond)
						}
						wr := rec.Write(g, h.fence)
						recordWrite(wr, true, chk.StaleWrite(key, id, h.fence))
						paused.Add(1)
					} else {
						time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
					}
					chk.Leave(key, id)
				}
				rel := rec.Release(g)
				h.unlock(ctx)
				rel.Released()
			}
		}()
	}

	injected := 0
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, s := range sc.steps(rng) {
		for ctx.Err() == nil && float64(chk.Entries()) < s.at*float64(target) {
			time.Sleep(2 * time.Millisecond)
		}
		if ctx.Err() != nil {
			break
		}
		t.Logf("%6.2fs at %5d acquisitions: %s", time.Since(start).Seconds(), chk.Entries(), s.desc)
		s.do(f)
		injected++
	}
	wg.Wait()
	r := row{name: sc.name, res: chk.Result(), paused: paused.Load(), elapsed: time.Since(start),
		faultsInjected: injected, contendedTries: busy.Load(), unavailableTries: unavailable.Load()}
	var err error
	r.hist, err = history.Check(rec.Ops(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s history: %v; %d refused or failed calls not kept", sc.name, r.hist, rec.NoOps())
	t.Logf("%s: %d acquisitions (%d fenced) in %.1fs, %d busy and %d unavailable tries, %d holders paused past validity, %d of their writes rejected; overlaps %d, token order violations %d, stale writes accepted %d",
		sc.name, r.res.Entries, r.res.Fenced, r.elapsed.Seconds(), r.contendedTries, r.unavailableTries, r.paused, r.res.StaleRejected,
		r.res.Overlaps, r.res.OrderViolations, r.res.StaleAccepted)
	return r
}

// recordWrite completes a fenced write: accepted or refused by the
// storage, or not made (the holder did not enter).
func recordWrite(c history.Call, made, accepted bool) {
	switch {
	case !made:
		c.Unavailable()
	case accepted:
		c.Accepted()
	default:
		c.Refused()
	}
}

// newEngine starts an engine and waits for a quorum of its connections.
func newEngine(t *testing.T, ctx context.Context, cfg engine.Config) *engine.Engine {
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if _, err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return e
}

// errBusy is a locker's "the key is held".
var errBusy = errors.New("busy")

// held is one acquisition: its validity deadline, fencing token and release
// (and extension, where the locker has one: the new deadline and whether
// it was extended).
type held struct {
	until  time.Time
	fence  int64
	unlock func(ctx context.Context)
	extend func(ctx context.Context) (time.Time, bool)
}

type locker interface {
	lock(ctx context.Context, key string, fenced bool) (held, error)
}

// engineLocker takes locks with one TryLock per try.
type engineLocker struct{ e *engine.Engine }

func (l engineLocker) lock(ctx context.Context, key string, fenced bool) (held, error) {
	var opts []engine.Option
	if fenced {
		opts = append(opts, engine.WithFencing())
	}
	lk, err := l.e.TryLock(ctx, key, ttl, opts...)
	if err != nil {
		if errors.Is(err, engine.ErrNotAcquired) {
			return held{}, errBusy
		}
		return held{}, err
	}
	return held{until: lk.Until(), fence: lk.FencingToken(), unlock: func(ctx context.Context) { lk.Unlock(ctx) }}, nil
}

// proxyLocker is an unmodified-client view: SET NX PX (or REDLOCK.LOCK
// for a fencing token) and the compare-and-delete script, through the
// proxy — or, with lib, the client libraries' own acquire scripts in turn
// (bsm/redislock v0.9.4 and v0.10, node-redlock v5 and v4) and their
// extend scripts (redsync's touch-with-setnx, bsm v0.10's refresh,
// node-redlock v5's extend, redis-py's extend adding to the TTL): every
// path the proxy runs as a broadcast. Its validity is counted from before
// it sent the command, with the engine's drift allowance.
type proxyLocker struct {
	c   *conn.Conn
	lib bool
	n   int
}

// libCall is how a library sends one of its scripts: the recognised
// script's name, its argv after the key, and its success reply.
type libCall struct {
	name string
	argv func(token, ms string) []string
	ok   func(r resp.Reply) bool
}

func isOK(r resp.Reply) bool             { return r.IsOK() }
func isOne(r resp.Reply) bool            { return r.Type == resp.TypeInteger && r.Int == 1 }
func tokenMs(tok, ms string) []string    { return []string{tok, ms} }
func bsmObtain(tok, ms string) []string  { return []string{tok, strconv.Itoa(len(tok)), ms} }
func redisPyAdd(tok, ms string) []string { return []string{tok, ms, "0"} }

var (
	libAcquires = []libCall{
		{"bsm/redislock v0.9.4 obtain", bsmObtain, isOK},
		{"bsm/redislock v0.10 obtain", bsmObtain, isOK},
		{"node-redlock v5 acquire", tokenMs, isOne},
		{"node-redlock v4 lock", tokenMs, isOne},
	}
	libExtends = []libCall{
		{"redsync touch-with-setnx", tokenMs, isOne},
		{"bsm/redislock v0.10 refresh", tokenMs, isOK},
		{"node-redlock v5 extend", tokenMs, isOne},
		{"redis-py extend", redisPyAdd, isOne},
	}
	libSHA = func() map[string]string {
		m := map[string]string{}
		for _, ls := range proxy.LibraryScripts() {
			m[ls.Name] = ls.SHA
		}
		return m
	}()
)

// run sends call on key through the proxy.
func (l *proxyLocker) run(ctx context.Context, call libCall, key, token, ms string) (resp.Reply, error) {
	sha := libSHA[call.name]
	if sha == "" {
		panic("fault: no recognised script named " + call.name)
	}
	return l.c.Exec(ctx, append([]string{"EVALSHA", sha, "1", key}, call.argv(token, ms)...)...)
}

func (l *proxyLocker) lock(ctx context.Context, key string, fenced bool) (held, error) {
	l.n++
	token := fmt.Sprintf("%p-%d-0123456789", l, l.n) // ≥ 16 bytes: bsm's override prefix
	ms := strconv.FormatInt(ttl.Milliseconds(), 10)
	validity := ttl - (ttl/100 + 2*time.Millisecond)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	t0 := time.Now()
	var h held
	switch {
	case fenced:
		r, err := l.c.Exec(cctx, "REDLOCK.LOCK", key, token, ms)
		if err != nil {
			return h, err
		}
		if r.IsNull() {
			return h, errBusy
		}
		h.fence = r.Int
	case l.lib:
		call := libAcquires[l.n%len(libAcquires)]
		r, err := l.run(cctx, call, key, token, ms)
		if err != nil {
			return h, err
		}
		if !call.ok(r) {
			return h, errBusy
		}
		ext := libExtends[l.n%len(libExtends)]
		h.extend = func(ctx context.Context) (time.Time, bool) {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			t0 := time.Now()
			r, err := l.run(cctx, ext, key, token, ms)
			return t0.Add(validity), err == nil && ext.ok(r)
		}
	default:
		r, err := l.c.Exec(cctx, "SET", key, token, "NX", "PX", ms)
		if err != nil {
			return h, err
		}
		if r.IsNull() {
			return h, errBusy
		}
	}
	h.until = t0.Add(validity)
	h.unlock = func(ctx context.Context) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		l.c.Exec(cctx, "EVALSHA", scripts.Release.SHA(), "1", key, token)
	}
	return h, nil
}
