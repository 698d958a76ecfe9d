package proxy

import (
	"strconv"
	"strings"
	"testing"

	"github.com/redlock-dev/redlock/proxy/internal/redisson"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
	"github.com/redlock-dev/redlock/resp"
)

// sendCmd writes one command without reading its reply.
func (c *rawConn) sendCmd(args ...string) { c.send(string(resp.AppendCommandStrings(nil, args...))) }

// pushed is the RESP2 frame [kind, channel, last] (last: a bulk string,
// or an integer when it is one).
func pushed(kind, ch string, last any) string {
	out := "*3\r\n$" + itoa(len(kind)) + "\r\n" + kind + "\r\n$" + itoa(len(ch)) + "\r\n" + ch + "\r\n"
	switch v := last.(type) {
	case int:
		return out + ":" + itoa(v) + "\r\n"
	case string:
		return out + "$" + itoa(len(v)) + "\r\n" + v + "\r\n"
	}
	return out + "$-1\r\n"
}

func itoa(n int) string { return strconv.Itoa(n) }

func (c *rawConn) expect(want string) {
	c.t.Helper()
	if got := c.read(); got != want {
		c.t.Fatalf("reply %q; want %q", got, want)
	}
}

// TestSubscribeWakeups: SUBSCRIBE and SSUBSCRIBE on lock wake-up channels,
// messages the proxy publishes, subscribed-mode rules, leaving it.
func TestSubscribeWakeups(t *testing.T) {
	e := startEnv(t, 3, nil)
	ch := "redisson_lock__channel:{orders}"
	c := dialRaw(t, e.addr)
	c.sendCmd("SUBSCRIBE", ch, "redisson_lock__channel:{other}")
	c.expect(pushed("subscribe", ch, 1))
	c.expect(pushed("subscribe", "redisson_lock__channel:{other}", 2))
	if n := e.srv.rs.Publish(ch, "0"); n != 1 {
		t.Fatalf("published to %d subscribers; want 1", n)
	}
	c.expect(pushed("message", ch, "0"))
	c.sendCmd("PING")
	c.expect("*2\r\n$4\r\npong\r\n$0\r\n\r\n")
	c.sendCmd("GET", "k")
	if got := c.read(); !strings.Contains(got, "only (P|S)SUBSCRIBE") {
		t.Fatalf("GET in subscribed mode: %q", got)
	}
	c.sendCmd("UNSUBSCRIBE")
	a, b := c.read(), c.read()
	if !strings.HasPrefix(a, "*3\r\n$11\r\nunsubscribe\r\n") || !strings.HasSuffix(b, ":0\r\n") {
		t.Fatalf("UNSUBSCRIBE all: %q, %q", a, b)
	}
	c.sendCmd("PING")
	c.expect("+PONG\r\n") // out of subscribed mode
	if n := e.srv.rs.Publish(ch, "0"); n != 0 {
		t.Fatalf("published to %d after UNSUBSCRIBE", n)
	}

	s := dialRaw(t, e.addr)
	s.sendCmd("SSUBSCRIBE", ch)
	s.expect(pushed("ssubscribe", ch, 1))
	e.srv.rs.Publish(ch, "0")
	s.expect(pushed("smessage", ch, "0"))

	bad := dialRaw(t, e.addr)
	bad.sendCmd("SUBSCRIBE", "news")
	if got := bad.read(); !strings.Contains(got, "wake-up channels") {
		t.Fatalf("SUBSCRIBE news: %q", got)
	}
	bad.sendCmd("SUBSCRIBE", ch+strings.Repeat("x", respserver.MaxChannelLen))
	if got := bad.read(); !strings.HasPrefix(got, "-ERR") {
		t.Fatalf("a channel over %d bytes: %q", respserver.MaxChannelLen, got)
	}
}

// TestSubscribeLimits: a connection holds at most respserver.MaxSubscriptions
// channels, and a subscriber that does not read loses messages (counted)
// instead of growing the proxy's memory.
func TestSubscribeLimits(t *testing.T) {
	e := startEnv(t, 3, nil)
	c := dialRaw(t, e.addr)
	args := []string{"SUBSCRIBE"}
	for i := range respserver.MaxSubscriptions + 1 {
		args = append(args, redisson.ChannelPrefix+":{"+strings.Repeat("k", 3)+string(rune('a'+i%26))+"}"+strings.Repeat("x", i/26))
	}
	c.sendCmd(args[:500]...) // within the proxy's arguments limit
	c.sendCmd(append([]string{"SUBSCRIBE"}, args[500:len(args)-1]...)...)
	c.sendCmd("SUBSCRIBE", args[len(args)-1]) // the 1,025th: refused (TestSubscribeWholeOrNothing)
	for i := range respserver.MaxSubscriptions {
		if got := c.read(); !strings.HasSuffix(got, ":"+itoa(i+1)+"\r\n") {
			t.Fatalf("confirmation %d: %q", i, got)
		}
	}
	if got := c.read(); !strings.Contains(got, "more than 1024") {
		t.Fatalf("subscription %d: %q", respserver.MaxSubscriptions+1, got)
	}
	// Nobody reads c now: its queue fills, then messages are dropped.
	ch := args[1]
	for range respserver.MsgQueueLen * 4 {
		e.srv.rs.Publish(ch, strings.Repeat("m", 64<<10))
	}
	if _, dropped := e.srv.rs.Wakeups(); dropped == 0 {
		t.Fatal("no message dropped for a subscriber that does not read")
	}
}
