// Command goredis903 takes, finds held and releases a lock through a
// redlock proxy with go-redis v9.0.3 and its default options (RESP3: v9.0.0
// to v9.0.3 fall back to RESP2 only on "unknown command", so a proxy that
// refused HELLO 3 failed every command). It is a module of its own, since
// the main module needs a later go-redis; proxy's TestGoRedis903 runs it.
// It prints "ok" and exits 0, or says what failed and exits 1.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
)

// release is the compare-and-delete every Redlock client sends.
const release = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`

func main() {
	addr := flag.String("addr", "127.0.0.1:7380", "the proxy's address")
	flag.Parse()
	if err := run(*addr); err != nil {
		fmt.Println("goredis903:", err)
		os.Exit(1)
	}
	fmt.Println("ok")
}

func run(addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const key, tok = "goredis903:lock", "goredis903-token-0123456"
	if ok, err := c.SetNX(ctx, key, tok, 5*time.Second).Result(); !ok || err != nil {
		return fmt.Errorf("SetNX: %v, %v", ok, err)
	}
	if ok, err := c.SetNX(ctx, key, "other-token-0123456789", 5*time.Second).Result(); ok || err != nil {
		return fmt.Errorf("SetNX of the held key: %v, %v; want false", ok, err)
	}
	if n, err := c.Eval(ctx, release, []string{key}, tok).Int64(); n != 1 || err != nil {
		return fmt.Errorf("release: %d, %v; want 1", n, err)
	}
	hello, err := c.Do(ctx, "HELLO").Result()
	if err != nil {
		return fmt.Errorf("HELLO: %v", err)
	}
	if m, ok := hello.(map[interface{}]interface{}); !ok || m["proto"] != int64(3) {
		return fmt.Errorf("HELLO on its connection: %v; want a RESP3 map with proto 3", hello)
	}
	return nil
}
