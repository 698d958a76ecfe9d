package proxy

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/internal/test/check"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/relay"
)

// Property (d) for the acquisitions with the client's value as the token
// that cannot overwrite (SET NX PX, node-redlock's acquire): a client
// gives up on an attempt A still under way in the proxy (its own timeout;
// one master has not answered), releases its value as redsync does after
// a failed try, and sends the same value again (attempt B), through the
// same proxy or another. B is granted on the masters where A had created
// the key (the release deleted A's writes there) and one more. Then A
// fails, and its cleanup must not delete B's keys: before, it deleted by
// value wherever A had created the key, B's grant stood on one master of
// five, and another client was granted the key while B's holder believed
// it held it (found by the review of the obtain marks, which covered
// bsm/redislock's obtain only: TestRetriedObtainKeepsItsGrant).

// retryScene is five masters, a proxy whose connections to master 4 pass
// a relay that holds them while the first attempt is under way, and
// another holder X of the key on masters 2, 3 and 4.
type retryScene struct {
	*env
	t        *testing.T
	relay    *relay.Relay
	key, val string
	calls    [5]int // lockCalls of each master before the first attempt
}

// xHolder is the other holder's value.
const xHolder = "other-holder-X-0123456789"

func startRetryScene(t *testing.T, key, val string) *retryScene {
	t.Helper()
	set := mastertest.Start(t, 5)
	mastertest.RequireReal(t, set)
	r, err := relay.Start(set.Addrs()[4])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	addrs := slices.Clone(set.Addrs())
	addrs[4] = r.Addr()
	e := startEnvOn(t, set, func(c *Config) {
		c.EngineConfig.Addrs = addrs
		// The first attempt waits for master 4 until the test lets its
		// request through, well within the attempt's validity (20 s).
		c.EngineConfig.MasterTimeout = 8 * time.Second
	})
	s := &retryScene{env: e, t: t, relay: r, key: key, val: val}
	ctx := context.Background()
	for _, i := range []int{2, 3, 4} {
		if err := e.masters[i].Set(ctx, key, xHolder, 30*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i, m := range e.masters {
		s.calls[i] = lockCalls(t, m)
	}
	r.Hold()
	t.Cleanup(r.Release)
	return s
}

// lockCalls is how many SET, EVAL and EVALSHA master m has run: an
// acquisition's command on it, whichever form it takes.
func lockCalls(t *testing.T, m *redis.Client) int {
	info, err := m.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Error(err)
		return 0
	}
	return check.CommandCalls(info, "set", "eval", "evalsha")
}

// firstAttemptUnderWay reports whether the first attempt created the key
// on masters 0 and 1, was refused on 2 and 3 (X), and waits at the relay
// for master 4.
func (s *retryScene) firstAttemptUnderWay() bool {
	ctx := context.Background()
	for _, i := range []int{0, 1} {
		if v, _ := s.masters[i].Get(ctx, s.key).Result(); v != s.val {
			return false
		}
	}
	for _, i := range []int{2, 3} {
		if lockCalls(s.t, s.masters[i]) <= s.calls[i] {
			return false
		}
	}
	return s.relay.Holding([]byte(s.key))
}

// xLeftMaster2 ends X's hold on master 2 (its lock there expired).
func (s *retryScene) xLeftMaster2() error {
	return s.masters[2].Del(context.Background(), s.key).Err()
}

// released reports whether the client's release deleted its value on
// masters 0 and 1.
func (s *retryScene) released() bool {
	for _, i := range []int{0, 1} {
		if n, _ := s.masters[i].Exists(context.Background(), s.key).Result(); n != 0 {
			return false
		}
	}
	return true
}

// checkRetryKept lets the first attempt's request reach master 4, waits
// until decided() says it failed (after its cleanup), and checks that the
// retry's grant still stands on a quorum and that no other client is
// granted the key once X is gone: one holder.
func (s *retryScene) checkRetryKept(decided func() bool) {
	t := s.t
	t.Helper()
	if n := s.holding(t, s.key, s.val); n < s.quorum() {
		t.Fatalf("the retry was granted with its value on %d masters; want at least %d", n, s.quorum())
	}
	s.relay.Release()
	check.Eventually(t, 15*time.Second, "the first attempt failed, cleaned up", decided)
	if n := s.holding(t, s.key, s.val); n < s.quorum() {
		t.Errorf("after the first attempt's cleanup %d of 5 masters hold the retry's grant (quorum %d): the cleanup deleted what the retry created", n, s.quorum())
	}
	ctx := context.Background()
	for _, i := range []int{3, 4} { // X unlocks
		if err := s.masters[i].Del(ctx, s.key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.client(t).SetNX(ctx, s.key, "another-client-0123456789", 5*time.Second).Result()
	if err != nil {
		t.Fatalf("another client's SET NX: %v", err)
	}
	if got {
		t.Errorf("two holders: another client was granted %s while the retry's grant is valid", s.key)
	}
}

// TestRetryCleanupKeepsGrantRedsync: redsync v4 over go-redis, one pool
// (the proxy). Its first try times out on its own (expiry × 0.05) while
// the proxy still waits for master 4; redsync then runs its delete script
// for the value and tries again with the same value, which is granted.
func TestRetryCleanupKeepsGrantRedsync(t *testing.T) {
	s := startRetryScene(t, "retry:{redsync}", "")
	failed := s.srv.Engine().Stats().Failed
	rc := redis.NewClient(&redis.Options{Addr: s.addr, Protocol: 2, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rc.Close() })
	sets := 0
	rc.AddHook(retryHook{func(cmd redis.Cmder) {
		switch strings.ToLower(cmd.Name()) {
		case "set":
			sets++
			if sets > 1 {
				return
			}
			// The first try timed out at the client: the attempt is still
			// under way in the proxy. (A redsync goroutine: no Fatal.)
			s.val = cmd.Args()[2].(string)
			if !pollUntil(10*time.Second, s.firstAttemptUnderWay) {
				t.Error("the first try did not create the key on masters 0 and 1, refused on 2 and 3, waiting for 4")
			}
			if err := s.xLeftMaster2(); err != nil {
				t.Error(err)
			}
		case "evalsha", "eval":
			if !pollUntil(10*time.Second, s.released) { // redsync's own release of the first try
				t.Error("redsync's release did not delete its value on masters 0 and 1")
			}
		}
	}})
	m := redsync.New(goredis.NewPool(rc)).NewMutex(s.key, redsync.WithExpiry(20*time.Second), redsync.WithTries(2),
		redsync.WithRetryDelay(10*time.Millisecond))
	if err := m.LockContext(context.Background()); err != nil {
		t.Fatalf("redsync's retry was not granted: %v", err)
	}
	if t.Failed() {
		t.FailNow()
	}
	if m.Value() != s.val {
		t.Fatalf("redsync holds %q, its first try sent %q: not a retry with the same value", m.Value(), s.val)
	}
	s.checkRetryKept(func() bool { return s.srv.Engine().Stats().Failed > failed })
	if time.Now().After(m.Until()) {
		t.Fatal("redsync's mutex expired during the test: the check above proves nothing")
	}
}

// retryHook calls after with each command once it has completed.
type retryHook struct{ after func(redis.Cmder) }

func (h retryHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h retryHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.after(cmd)
		return err
	}
}
func (h retryHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// pollUntil polls cond every millisecond for up to d.
func pollUntil(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// TestRetryCleanupKeepsGrantSetNX: a client's SET NX PX, its
// compare-and-delete and its retry through a second proxy over the same
// masters (proxies keep no state: the fix cannot be one process's).
func TestRetryCleanupKeepsGrantSetNX(t *testing.T) {
	s := startRetryScene(t, "retry:{setnx}", "value-of-one-mutex-0123456789")
	a := dialRaw(t, s.addr)
	a.sendCmd("SET", s.key, s.val, "NX", "PX", "20000")
	check.Eventually(t, 10*time.Second, "the first attempt under way (masters 0 and 1 created, 2 and 3 refused, 4 held)", s.firstAttemptUnderWay)
	if err := s.xLeftMaster2(); err != nil {
		t.Fatal(err)
	}
	dialRaw(t, s.addr).sendCmd("EVAL", scripts.Release.Source(), "1", s.key, s.val) // the client's release; its reply waits for master 4
	check.Eventually(t, 10*time.Second, "the client's release deleted its value on masters 0 and 1", s.released)
	other := startEnvOn(t, s.set, nil) // another proxy, straight to the masters
	if got := dialRaw(t, other.addr).cmd("SET", s.key, s.val, "NX", "PX", "20000"); got != "+OK\r\n" {
		t.Fatalf("the retry through another proxy: %q; want +OK", got)
	}
	var ra string
	s.checkRetryKept(func() bool { ra = a.read(); return true })
	if ra != "$-1\r\n" {
		t.Errorf("the first attempt answered %q; want nil", ra)
	}
}

// TestRetryCleanupKeepsGrantNodeRedlock: node-redlock's acquire script (v5
// and v4), its release script, and its retry through another proxy.
func TestRetryCleanupKeepsGrantNodeRedlock(t *testing.T) {
	for _, c := range []struct{ acquire, release string }{
		{"node-redlock5-acquire", "node-redlock5-release"},
		{"node-redlock4-lock", "node-redlock4-unlock"},
	} {
		t.Run(c.acquire, func(t *testing.T) {
			s := startRetryScene(t, "retry:{"+c.acquire+"}", "value-of-one-mutex-0123456789")
			acquire := []string{"EVAL", scripts.Lib(c.acquire), "1", s.key, s.val, "20000"}
			a := dialRaw(t, s.addr)
			a.sendCmd(acquire...)
			check.Eventually(t, 10*time.Second, "the first attempt under way (masters 0 and 1 created, 2 and 3 refused, 4 held)", s.firstAttemptUnderWay)
			if err := s.xLeftMaster2(); err != nil {
				t.Fatal(err)
			}
			dialRaw(t, s.addr).sendCmd("EVAL", scripts.Lib(c.release), "1", s.key, s.val)
			check.Eventually(t, 10*time.Second, "the client's release deleted its value on masters 0 and 1", s.released)
			// Through another proxy: a library acquire awaits every master's
			// answer (its cleanup needs them), and this proxy's master 4 is
			// held.
			other := startEnvOn(t, s.set, nil)
			if got := dialRaw(t, other.addr).cmd(acquire...); got != ":1\r\n" {
				t.Fatalf("the retry through another proxy: %q; want :1", got)
			}
			var ra string
			s.checkRetryKept(func() bool { ra = a.read(); return true })
			if ra != ":0\r\n" {
				t.Errorf("the first attempt answered %q; want :0", ra)
			}
		})
	}
}

// TestRetryCleanupKeepsGrantTouchWithSetNX: redsync's touch-with-setnx is
// an extension that sets the key where it is missing, with the client's
// value: a writer of that value, as an acquisition is. With A under way
// (masters 0 and 1 created, 2 and 3 refused by X, 4 held), the client
// releases its value, X leaves master 2, and the client extends with
// touch-with-setnx through another proxy, which sets the key on 0, 1 and
// 2 (":1", an extension valid 20 s). It wrote no mark, so A's mark was
// still A's nonce on 0 and 1 and A's cleanup deleted the touch's keys
// there: the client's lock stood on one master and another client was
// granted (found by the review of the marks). Raw, and through redsync v4
// itself (WithValue, WithSetNXOnExtend, Extend).
func TestRetryCleanupKeepsGrantTouchWithSetNX(t *testing.T) {
	for _, via := range []string{"raw", "redsync"} {
		t.Run(via, func(t *testing.T) {
			s := startRetryScene(t, "touch:{"+via+"}", "value-of-one-mutex-0123456789")
			a := dialRaw(t, s.addr)
			a.sendCmd("SET", s.key, s.val, "NX", "PX", "20000")
			check.Eventually(t, 10*time.Second, "A under way", s.firstAttemptUnderWay)
			if err := s.xLeftMaster2(); err != nil {
				t.Fatal(err)
			}
			dialRaw(t, s.addr).sendCmd("EVAL", scripts.Release.Source(), "1", s.key, s.val)
			check.Eventually(t, 10*time.Second, "the client's release on masters 0 and 1", s.released)
			other := startEnvOn(t, s.set, nil)
			var until time.Time
			if via == "raw" {
				if got := dialRaw(t, other.addr).cmd("EVAL", scripts.Lib("redsync-v4-touchWithSetNXScript"), "1", s.key, s.val, "20000"); got != ":1\r\n" {
					t.Fatalf("touch-with-setnx through another proxy: %q; want :1", got)
				}
			} else {
				rc := redis.NewClient(&redis.Options{Addr: other.addr, Protocol: 2})
				t.Cleanup(func() { rc.Close() })
				m := redsync.New(goredis.NewPool(rc)).NewMutex(s.key, redsync.WithValue(s.val), redsync.WithSetNXOnExtend(), redsync.WithExpiry(20*time.Second))
				if ok, err := m.Extend(); !ok || err != nil {
					t.Fatalf("redsync Extend: %v %v", ok, err)
				}
				until = m.Until()
			}
			s.checkRetryKept(func() bool { a.read(); return true })
			if !until.IsZero() && time.Now().After(until) {
				t.Fatal("the mutex expired during the test: the check proves nothing")
			}
		})
	}
}
