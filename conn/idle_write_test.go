package conn_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
)

// TestIdleWriteAfterWriteTimeout: a request on a connection idle for
// longer than its WriteTimeout is written and answered — the last write's
// deadline, long past, must not fail it (a write path that did not renew
// it broke the session with "i/o timeout").
func TestIdleWriteAfterWriteTimeout(t *testing.T) {
	c, _, _ := realConn(t, conn.Config{WriteTimeout: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := range 3 {
		// A batch of several (the writer writes it, setting its deadline)...
		done := make(chan error, 8)
		for range 8 {
			go func() { _, err := c.Exec(ctx, "PING"); done <- err }()
		}
		for range 8 {
			if err := <-done; err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		}
		time.Sleep(120 * time.Millisecond)             // ...then idle past that deadline,
		if _, err := c.Exec(ctx, "PING"); err != nil { // then one alone
			t.Fatalf("PING %d alone after idling: %v", i, err)
		}
	}
	if st := c.Stats(); st.Connects != 1 {
		t.Fatalf("the session broke: %+v", st)
	}
}
