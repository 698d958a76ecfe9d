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
	c := &Conn{}
	for i := range 10000 {
		key := []byte(fmt.Sprintf("%d:%s", i, strings.Repeat("k", 100)))
		cl := &Call{done: closedChan} // finished at once
		if after := c.order([][]byte{key}, cl); len(after) != 0 {
			t.Fatalf("a finished command was waited for")
		}
	}
	if n := len(c.lastByKey); n > 128 {
		t.Fatalf("%d finished keys kept after 10,000 commands", n)
	}
	// In-flight commands on one key are still ordered.
	first := &Call{done: make(chan struct{})}
	c.order([][]byte{[]byte("k")}, first)
	if after := c.order([][]byte{[]byte("k")}, &Call{done: make(chan struct{})}); len(after) != 1 || after[0] != first {
		t.Fatalf("a command on a key in flight waits for %v", after)
	}
}
