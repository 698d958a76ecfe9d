package respserver

import (
	"fmt"
	"strings"
	"testing"
)

// TestOrderStateBounded: the per-key ordering state does not keep the
// keys of finished commands (it kept up to 4096 keys of any size per
// connection, uncounted).
func TestOrderStateBounded(t *testing.T) {
	c := &Conn{} // a loop's connection (nc nil): ls.q is its unwritten replies
	for i := range 10000 {
		key := []byte(fmt.Sprintf("%d:%s", i, strings.Repeat("k", 100)))
		cl := &Call{done: closedChan} // finished at once, its reply not written
		if after := c.order([][]byte{key}, cl); len(after) != 0 {
			t.Fatalf("a finished command was waited for")
		}
		c.ls.q = append(c.ls.q, cl)
	}
	if n := c.tracked(); n > 128 {
		t.Fatalf("%d finished keys kept after 10,000 commands", n)
	}
	// In-flight commands on one key are still ordered.
	first := &Call{done: make(chan struct{})}
	c.order([][]byte{[]byte("k")}, first)
	c.ls.q = append(c.ls.q, first)
	if after := c.order([][]byte{[]byte("k")}, &Call{done: make(chan struct{})}); len(after) != 1 || after[0] != first {
		t.Fatalf("a command on a key in flight waits for %v", after)
	}
}

// TestOrderSettled: a connection whose earlier replies were all written
// tracks its command outside the map (order), and still orders the
// commands that follow it before it finished, on its key only.
func TestOrderSettled(t *testing.T) {
	c := &Conn{}
	k, other := [][]byte{[]byte("k")}, [][]byte{[]byte("other")}
	for range 3 { // each time settled: written, nothing kept
		c.ls.q, c.ls.qHead = c.ls.q[:0], 0
		first := &Call{done: make(chan struct{})}
		if after := c.order(k, first); len(after) != 0 {
			t.Fatalf("a settled connection's command waits for %v", after)
		}
		if c.solo != first || len(c.lastByKey) != 0 {
			t.Fatalf("settled: solo %p, %d keys in the map; want the command, none", c.solo, len(c.lastByKey))
		}
		c.ls.q = append(c.ls.q, first)
		second := &Call{done: make(chan struct{})}
		if after := c.order(other, second); len(after) != 0 {
			t.Fatalf("a command on another key waits for %v", after)
		}
		c.ls.q = append(c.ls.q, second)
		if after := c.order(k, &Call{done: make(chan struct{})}); len(after) != 1 || after[0] != first {
			t.Fatalf("a command on the key of one in flight waits for %v", after)
		}
		if n := c.tracked(); n != 2 {
			t.Fatalf("%d keys tracked, want 2", n)
		}
	}
}
