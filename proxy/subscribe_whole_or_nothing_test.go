package proxy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/redlock-dev/redlock/resp"
)

func channels(prefix string, from, n int) []string {
	var s []string
	for i := from; i < from+n; i++ {
		s = append(s, fmt.Sprintf("redisson_lock__channel:{%s%d}", prefix, i))
	}
	return s
}

// TestSubscribeWholeOrNothing: a SUBSCRIBE of n channels is answered with
// n confirmations or one error with nothing subscribed, as Redis answers
// it — never a few confirmations and then an error in the place of the
// rest, which a client that counts replies (rueidis in RESP3 panicked)
// takes for its next command's reply. Past the 1,024-subscription bound
// and past the memory budget part-way, in both protocols; a later
// SUBSCRIBE's count shows that the refused one added nothing.
func TestSubscribeWholeOrNothing(t *testing.T) {
	long := func(c byte) string { return "redisson_lock__channel:{" + strings.Repeat(string(c), 900) + "}" }
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		pre  []string // subscribed first
		sub  []string // then SUBSCRIBE these, in one command: refused
	}{
		{"past 1024 subscriptions", nil, channels("a", 0, 1000), channels("b", 0, 30)},
		{"past the memory budget", func(c *Config) { c.MaxClientMemory = 3500 }, nil, []string{long('a'), long('b'), long('a'), long('c')}},
	} {
		for _, proto := range []string{"2", "3"} {
			t.Run(tc.name+"/RESP"+proto, func(t *testing.T) {
				e := startEnv(t, 3, tc.mod)
				c := dialRaw(t, e.addr)
				confirm := "*3\r\n$9\r\nsubscribe\r\n"
				if proto == "3" {
					checkReply(t, c.cmd("HELLO", "3"), "%7\r\n*")
					confirm = ">3\r\n$9\r\nsubscribe\r\n"
				}
				subscribe := func(chans []string) {
					c.send(string(resp.AppendCommandStrings(nil, append([]string{"SUBSCRIBE"}, chans...)...)))
				}
				if len(tc.pre) > 0 {
					subscribe(tc.pre)
					for range tc.pre {
						if got := c.read(); !strings.HasPrefix(got, confirm) {
							t.Fatalf("SUBSCRIBE: %.60q", got)
						}
					}
				}
				subscribe(tc.sub)
				subscribe([]string{"redisson_lock__channel:{after}"}) // the refused channels would count here
				if got := c.read(); !strings.HasPrefix(got, "-ERR redlock proxy:") {
					t.Fatalf("SUBSCRIBE of %d channels past a bound: first reply %.60q; want one error for the whole command", len(tc.sub), got)
				}
				after := "redisson_lock__channel:{after}"
				want := fmt.Sprintf("%s$%d\r\n%s\r\n:%d\r\n", confirm, len(after), after, len(tc.pre)+1)
				if got := c.read(); got != want {
					t.Fatalf("the next SUBSCRIBE's reply: %.80q; want %q (its own confirmation, the refused channels not counted)", got, want)
				}
			})
		}
	}
}
