package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/internal/test/check"
)

func TestGoRedis(t *testing.T) {
	e := startEnv(t, 5, func(c *Config) { c.AllowTokenlessWrites = true })
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

// TestTokenlessWritesRefused: by default DEL and PEXPIRE, which would
// delete or shorten a lock without its token (another client's, once the
// caller's own expired), are refused and reach no master; the token-checked
// release and extend scripts work.
func TestTokenlessWritesRefused(t *testing.T) {
	e := startEnv(t, 3, nil)
	c := e.client(t)
	ctx := context.Background()
	if err := c.SetNX(ctx, "tw:1", "other", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Del(ctx, "tw:1").Err(); err == nil || !strings.Contains(err.Error(), "--allow-tokenless-writes") {
		t.Fatalf("DEL: %v; want the refusal", err)
	}
	if err := c.PExpire(ctx, "tw:1", time.Millisecond).Err(); err == nil || !strings.Contains(err.Error(), "--allow-tokenless-writes") {
		t.Fatalf("PEXPIRE: %v; want the refusal", err)
	}
	if info := c.Info(ctx, "proxy").Val(); !strings.Contains(info, "allow_tokenless_writes:0\r\n") {
		t.Fatalf("INFO proxy does not say DEL and PEXPIRE are off:\n%s", info)
	}
	// SET NX answers at a quorum: the last master's grant may follow.
	check.Eventually(t, 5*time.Second, "all 3 masters holding the lock after the refused DEL and PEXPIRE", func() bool { return e.holding(t, "tw:1", "other") == 3 })
	for i, m := range e.masters {
		if d := m.PTTL(ctx, "tw:1").Val(); d < 5*time.Second {
			t.Fatalf("master %d: PTTL %v after the refused PEXPIRE", i, d)
		}
	}
	rel := `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
	if n, err := c.Eval(ctx, rel, []string{"tw:1"}, "mine").Int(); err != nil || n != 0 {
		t.Fatalf("release with another token: %d %v", n, err)
	}
	if n, err := c.Eval(ctx, rel, []string{"tw:1"}, "other").Int(); err != nil || n != 1 {
		t.Fatalf("release with the token: %d %v", n, err)
	}
}
