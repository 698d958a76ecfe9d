package engine_test

// A fencing write-back that fails while acquire answers are still out: the
// attempt is not granted (a lock whose token was never written back, whose
// keys the cleanup deleted), and a blocking TryLock still returns by its
// context's end.

import (
	"context"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// delObserver deletes key on master 0 (through a direct connection) the
// first time master 0's answer arrives after it is armed: the fenced
// acquire's grant on master 0 is then gone when the write-back reaches it.
type delObserver struct {
	engine.NopObserver
	armed atomic.Bool
	key   atomic.Value // string
	v     atomic.Pointer[env]
}

func (o *delObserver) MasterReply(master int, _ time.Duration, err error) {
	if master == 0 && err == nil && o.armed.CompareAndSwap(true, false) {
		o.v.Load().exec(0, "DEL", o.key.Load().(string))
	}
}

// TestFenceOpNotReusedAsCleanup: acquisition.step dispatches on pointer
// identity (a.o, a.fop, a.rel) and a.fop is never cleared after fenced
// drops its reference. When the fencing write-back fails while acquire
// answers are still out, the write-back op can be fully answered and
// recycled before the cleanup starts; the cleanup's getOp then returns
// that same *op, a.rel == a.fop, and the release's decision runs
// a.fenced() instead of a.cleaned(): with a quorum of releases the
// attempt is judged again on the acquire op and handed out — a lock whose
// keys the cleanup just deleted, whose fencing token was never written
// back; with fewer, fenceFailed stages a third failure and done is never
// called (TryLock: finish blocks forever, even past ctx).
//
// Set-up: masters 3 and 4 stopped, MaxPending 1 (so the write-back is
// refused at once on them while the acquire waits there), master 0's key
// deleted before its write-back: the write-back fails (1 of 5) and is
// fully answered at once. Resuming 3 and 4 lets the acquire's last answers
// arrive, which starts the cleanup (releases on 1..4: a quorum).
//
// Found by the adversarial review of TryLockAsync (the acquisition as a
// callback chain): it failed before its fix.
func TestFenceOpNotReusedAsCleanup(t *testing.T) {
	if os.Getenv("REVIEW_KEEP_PROCS") == "" {
		prev := runtime.GOMAXPROCS(1) // one P: the pool's next Get is its last Put (not needed, it only makes it likelier)
		defer runtime.GOMAXPROCS(prev)
	}
	obs := &delObserver{}
	cfg := functional
	cfg.DisableClockCheck = true
	cfg.Conn.MaxPending = 1
	cfg.Observer = obs
	v := newEnv(t, 5, cfg)
	obs.v.Store(v)
	ctx := context.Background()

	const tries = 40
	var granted, hung, refused int
	for i := range tries {
		key := keyName(t, i)
		obs.key.Store(key)
		obs.armed.Store(true)
		v.pause(3, 4)
		ch := make(chan asyncResult, 2)
		v.e.TryLockAsync(ctx, key, 20*time.Second, func(l *engine.Lock, err error) { ch <- asyncResult{l, err} }, engine.WithFencing())
		time.Sleep(100 * time.Millisecond) // the write-back fails and is fully answered
		v.resume(3, 4)
		select {
		case r := <-ch:
			if r.err == nil && (r.l.FencingToken() == 0 || countOf(v.values(key), r.l.Token()) < 3) {
				granted++
				vals := v.values(key)
				t.Errorf("try %d: TryLockAsync(WithFencing) granted a lock (valid %v, fencing token %d) after its write-back failed; masters hold %q (token %q)",
					i, r.l.Valid(), r.l.FencingToken(), vals, r.l.Token())
				// A second client takes the same key while the first lock is "valid".
				if l2, err := v.e.TryLock(ctx, key, 5*time.Second); err == nil {
					t.Errorf("try %d: a second TryLock got the key too (token %q) while the first lock is valid %v: two holders", i, l2.Token(), r.l.Valid())
					l2.Unlock(ctx)
				}
				go r.l.Unlock(context.Background())
			} else {
				if r.l != nil {
					go r.l.Unlock(context.Background())
				}
				refused++
			}
		case <-time.After(5 * time.Second):
			hung++
			t.Errorf("try %d: done not called within 5s (the attempt is stuck)", i)
		}
		if granted+hung >= 3 {
			break
		}
	}
	t.Logf("%d tries: %d refused as expected, %d granted without write-back, %d never answered", granted+hung+refused, refused, granted, hung)
}

// TestFenceOpReuseNoHang: the same collision with the stopped
// masters never answering: the acquire's answers on masters 3 and 4 time
// out (the cleanup starts then), the cleanup's releases there are refused
// (the timed-out requests still occupy the connections), so the release op
// — taken for the write-back by step — has 2 grants: fenceFailed stages a
// third failure, nothing delivers. The blocking TryLock never returns,
// although its ctx ends after 2 s (finish waits on a.ch after cancel
// lost the race to the decision).
//
// Found by the adversarial review of TryLockAsync (the acquisition as a
// callback chain): it failed before its fix.
func TestFenceOpReuseNoHang(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	obs := &delObserver{}
	cfg := functional
	cfg.MasterTimeout = 200 * time.Millisecond
	cfg.DisableClockCheck = true
	cfg.Conn.MaxPending = 1
	cfg.Observer = obs
	v := newEnv(t, 5, cfg)
	obs.v.Store(v)

	var hung, returned int
	for i := range 20 {
		key := keyName(t, i)
		obs.key.Store(key)
		obs.armed.Store(true)
		v.pause(3, 4)
		ch := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			l, err := v.e.TryLock(ctx, key, 20*time.Second, engine.WithFencing())
			ch <- err
			if l != nil {
				l.Unlock(context.Background())
			}
		}()
		select {
		case err := <-ch:
			returned++
			t.Logf("try %d: TryLock: %v", i, err)
		case <-time.After(5 * time.Second):
			hung++
			t.Errorf("try %d: TryLock(ctx with a 2 s timeout, WithFencing) has not returned after 5 s", i)
		}
		v.resume(3, 4)
		v.waitConnected()
		if hung > 0 {
			// Resuming does not help: the attempt's ops are past their decisions.
			select {
			case err := <-ch:
				t.Logf("try %d: returned after the resume: %v", i, err)
			case <-time.After(3 * time.Second):
				t.Logf("try %d: still not returned 3 s after the masters resumed", i)
				buf := make([]byte, 1<<20)
				n := runtime.Stack(buf, true)
				for _, g := range strings.Split(string(buf[:n]), "\n\n") {
					if strings.Contains(g, "TestFenceOpReuseNoHang.func") {
						t.Logf("stuck goroutine:\n%s", g)
					}
				}
			}
			break
		}
	}
	t.Logf("%d returned, %d hung", returned, hung)
}
