package proxy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestGoRedis(t *testing.T) {
	e := startEnv(t, 5, nil)
	c := e.client(t)
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	ok, err := c.SetNX(ctx, "k1", "tok1", 10*time.Second).Result()
	if err != nil || !ok {
		t.Fatalf("SetNX: %v %v", ok, err)
	}
	if n := e.holding(t, "k1", "tok1"); n < e.quorum() {
		t.Fatalf("after acquire %d masters hold the token", n)
	}
	ok, err = c.SetNX(ctx, "k1", "tok2", 10*time.Second).Result()
	if err != nil || ok {
		t.Fatalf("second SetNX: %v %v", ok, err)
	}
	if v, err := c.Get(ctx, "k1").Result(); err != nil || v != "tok1" {
		t.Fatalf("GET: %q %v", v, err)
	}
	if d, err := c.PTTL(ctx, "k1").Result(); err != nil || d <= 0 || d > 10*time.Second {
		t.Fatalf("PTTL: %v %v", d, err)
	}
	if n, err := c.Exists(ctx, "k1", "nope").Result(); err != nil || n != 1 {
		t.Fatalf("EXISTS: %v %v", n, err)
	}
	if ok, err := c.PExpire(ctx, "k1", 20*time.Second).Result(); err != nil || !ok {
		t.Fatalf("PEXPIRE: %v %v", ok, err)
	}
	if n, err := c.Del(ctx, "k1").Result(); err != nil || n != 1 {
		t.Fatalf("DEL: %v %v", n, err)
	}
	if _, err := c.Get(ctx, "k1").Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after DEL: %v", err)
	}
	e.waitHolding(t, "k1", "tok1", 0) // released at a quorum; the others follow
}
