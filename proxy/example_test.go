package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/proxy"
)

// An unmodified go-redis client takes a Redlock quorum lock through the
// proxy: SET NX PX becomes an acquisition on 3 masters, the
// compare-and-delete script a quorum release.
func Example() {
	ctx := context.Background()
	masters, err := localmaster.Start(ctx, localmaster.Options{N: 3, Notice: io.Discard})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer masters.Close()

	srv, err := proxy.New(proxy.Config{EngineConfig: engine.Config{FreshMasters: true, Addrs: masters.Addrs()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(ln)
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	srv.Engine().WaitReady(wctx)

	c := redis.NewClient(&redis.Options{Addr: ln.Addr().String()})
	defer c.Close()
	ok, _ := c.SetNX(ctx, "orders:42", "my-token", 10*time.Second).Result()
	fmt.Println("acquired:", ok)
	ok, _ = c.SetNX(ctx, "orders:42", "other-token", 10*time.Second).Result()
	fmt.Println("second acquired:", ok)
	release := redis.NewScript(`if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`)
	n, _ := release.Run(ctx, c, []string{"orders:42"}, "my-token").Int()
	fmt.Println("released:", n)
	// Output:
	// acquired: true
	// second acquired: false
	// released: 1
}
