package engine_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

// TestRWLockFirstTryDropsIntent: a writer granted on its first try by a
// quorum while readers held two of five masters had set its intent on
// those two (the write script sets it where readers are) and left it to
// its TTL: new readers then had three masters of five to reach a quorum
// of three — one slow master refused every reader — long after the
// writer unlocked. A grant that was not unanimous drops the intent, as a
// waited one does.
func TestRWLockFirstTryDropsIntent(t *testing.T) {
	v := newEnv(t, 5, engine.Config{FreshMasters: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := keyName(t)
	rw, err := v.e.NewRWLock(key)
	if err != nil {
		t.Fatal(err)
	}
	// A reader's entry on masters 3 and 4 only (one that reached a
	// minority), 20 s ahead as the masters' clocks score it.
	for _, i := range []int{3, 4} {
		now := v.mustExec(i, "TIME")
		sec, _ := strconv.ParseInt(string(now.Elems[0].Str), 10, 64)
		v.mustExec(i, "ZADD", key+":readers", strconv.FormatInt(sec*1000+20000, 10), "minority-reader")
	}
	w, err := rw.Lock(ctx, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Unlock(ctx)
	for _, i := range []int{3, 4} {
		deadline := time.Now().Add(3 * time.Second)
		for {
			r := v.mustExec(i, "EXISTS", key+":wwait")
			if r.Int == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("master %d: the writer's intent is still there 3 s after its grant (its TTL is 20 s)", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
