package conn_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/resp"
)

// TestClusterOrderAcrossMoves: RPUSHes of one key, pipelined from one
// goroutine while its slot moves to another node and back, land in the
// order they were made (every callback runs once; Drain returns). Without
// the per-slot order, a request routed directly to the new owner by the
// reloaded map overtook earlier ones still being redirected from the old
// one.
func TestClusterOrderAcrossMoves(t *testing.T) {
	lc := mastertest.StartCluster(t, localmaster.ClusterOptions{Shards: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := conn.NewCluster(lc.Addrs()[:1], conn.Config{})
	defer cl.Close()
	if err := cl.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	const key = "order:list"
	var calls, fails atomic.Int64
	cb := callbackOf(func(r resp.Reply, err error) {
		calls.Add(1)
		if err != nil || r.IsError() {
			fails.Add(1)
		}
	})
	stop := make(chan struct{})
	sent := make(chan int, 1)
	go func() {
		n := 0
		defer func() { sent <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := cl.Do(conn.Request{Cmd: resp.AppendCommandStrings(nil, "RPUSH", key, strconv.Itoa(n)), Key: key,
				Deadline: time.Now().Add(5 * time.Second), Callback: cb}); err != nil {
				continue
			}
			n++
			if n%64 == 0 {
				time.Sleep(100 * time.Microsecond) // let the moves interleave
			}
		}
	}()
	moved0 := cl.Stats().Moved
	for range 4 {
		time.Sleep(50 * time.Millisecond)
		if _, _, err := lc.MoveSlot(ctx, conn.Slot(key), 0); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	close(stop)
	n := <-sent
	if err := cl.Drain(ctx); err != nil {
		t.Fatalf("Drain: %v (%d of %d callbacks)", err, calls.Load(), n)
	}
	if got := calls.Load(); got != int64(n) {
		t.Fatalf("%d callbacks for %d requests", got, n)
	}
	if cl.Stats().Moved == moved0 {
		t.Fatal("no -MOVED followed: the slot's moves did not meet the traffic")
	}
	list, err := clusterDo(t, cl, key, "LRANGE", key, "0", "-1")
	if err != nil {
		t.Fatal(err)
	}
	prev := -1
	for i, e := range list.Elems {
		v, _ := strconv.Atoi(string(e.Str))
		if v <= prev {
			t.Fatalf("element %d is %d after %d: a later RPUSH landed first (%d requests, %d failed, %d MOVED followed)",
				i, v, prev, n, fails.Load(), cl.Stats().Moved-moved0)
		}
		prev = v
	}
	t.Logf("%d RPUSHes, %d failed, %d landed in order; %d MOVED followed", n, fails.Load(), len(list.Elems), cl.Stats().Moved-moved0)
}

type callbackOf func(resp.Reply, error)

func (f callbackOf) Complete(_ uint64, r resp.Reply, err error) { f(r, err) }
