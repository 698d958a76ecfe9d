package proxy

// The keys the proxy keeps beside locks (fair lock queues and counters,
// leader records, unlock latches) are refused to clients.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/redissonwire"
	"github.com/redlock-dev/redlock/proxy/internal/redisson"
)

// TestRedissonFairQueueKeyReserved: the proxy let any client take a plain
// lock on the keys it keeps a fair lock's queue in (redlock:fair:{name}:
// name:queue): a free fair lock then answered every Redisson tryLock with
// an error (WRONGTYPE from the masters) for as long as the squatter
// renewed. Those keys are refused now; the fair lock works.
//
// Found by the adversarial review of the proxy's RFairLock: it failed
// before its fix.
func TestRedissonFairQueueKeyReserved(t *testing.T) {
	e := startEnv(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := "fairreview-squat"
	r := dialRaw(t, e.addr)
	queue, counter := redisson.FairQueueKeys(name)
	for _, k := range []string{queue, counter, "redlock:leader:{x}:x", "redlock:rlatch:{x}:1", "redlock:obtain:{x}:x"} {
		if got := r.cmd("SET", k, "squatter", "NX", "PX", "30000"); !strings.Contains(got, "kept beside locks") {
			t.Fatalf("a plain lock on %s: %q; want it refused", k, got)
		}
	}
	a := dialAs(t, e.addr, "", redissonwire.RWProfiles[0])
	ok, err := a.FairTryLock(ctx, name, 1, 30*time.Second)
	if !ok || err != nil {
		t.Fatalf("tryLock() of a free fair lock whose queue key another client holds as a plain lock: %v, %v; want acquired (or the plain lock refused)", ok, err)
	}
}
