package proxy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/redlock-dev/redlock/proxy/internal/lockcmds"
	"github.com/redlock-dev/redlock/resp"
)

// TestResubscribeOrder (found while reviewing b4f29c4; not caused
// by it: fails at fe9b73d too): replies are written in request order,
// also for a connection that subscribed, unsubscribed and subscribes
// again. cmdSubscribe waits for the replies already queued to be written
// only when the connection first subscribes (c.sub == nil); on a second
// SUBSCRIBE its reply frame goes into the message queue at once, and the
// writer, which selects between the calls channel and the message queue,
// can write it before the reply of an earlier pipelined SET still in
// flight. A client then reads the subscribe frame as the SET's reply.
// Run alone:
//
//	go test -run TestResubscribeOrder -count=1 ./proxy
func TestResubscribeOrder(t *testing.T) {
	e := startEnv(t, 3, func(c *Config) { c.EventLoops = -1 })
	c := dialRaw(t, e.addr)
	ch := "redisson_lock__channel:{rs}"
	rel := lockcmds.LibTable[0].Source
	for i := range 2000 {
		k, tok := fmt.Sprintf("rs:%d", i%2), fmt.Sprintf("t%d", i)
		var b []byte
		for range 20 { // a batch the writer is busy writing meanwhile
			b = resp.AppendCommandStrings(b, "PING")
		}
		b = resp.AppendCommandStrings(b, "SET", k, tok, "NX", "PX", "10000")
		b = resp.AppendCommandStrings(b, "SUBSCRIBE", ch)
		b = resp.AppendCommandStrings(b, "UNSUBSCRIBE", ch)
		b = resp.AppendCommandStrings(b, "EVAL", rel, "1", k, tok)
		c.send(string(b))
		want := append(strings.Split(strings.Repeat("+PONG\r\n,", 20), ",")[:20],
			"+OK\r\n", pushed("subscribe", ch, 1), pushed("unsubscribe", ch, 0), ":1\r\n")
		for j, w := range want {
			if got := c.read(); got != w {
				t.Fatalf("round %d, reply %d: %q, want %q (request order)", i, j, got, w)
			}
		}
	}
}
