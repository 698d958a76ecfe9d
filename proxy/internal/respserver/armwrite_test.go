package respserver

import (
	"net"
	"testing"
	"time"
)

// deadlineCounter counts SetWriteDeadline calls and keeps the last one.
type deadlineCounter struct {
	net.Conn
	n    int
	last time.Time
}

func (d *deadlineCounter) SetWriteDeadline(t time.Time) error {
	d.n++
	d.last = t
	return d.Conn.SetWriteDeadline(t)
}

// TestArmWrite: replies reuse the write deadline until it is WriteSlack
// old, and it is always at least writeTimeout ahead of a write.
func TestArmWrite(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	d := &deadlineCounter{Conn: a}
	c := &Conn{s: &Server{cfg: Config{WriteTimeout: writeTimeout}}, nc: d, created: time.Now()}
	for range 1000 {
		c.armWrite()
		if left := time.Until(d.last); left < writeTimeout {
			t.Fatalf("write deadline %v away, want >= %v", left, writeTimeout)
		}
	}
	if d.n != 1 {
		t.Fatalf("1000 writes set the deadline %d times, want 1", d.n)
	}
	c.wdlSet.Add(-int64(WriteSlack)) // as if set WriteSlack ago
	c.armWrite()
	if d.n != 2 {
		t.Fatalf("a deadline set WriteSlack ago was not pushed back (%d sets)", d.n)
	}
	if left := time.Until(d.last); left < writeTimeout+WriteSlack-time.Second/10 {
		t.Fatalf("write deadline %v away, want about %v", left, writeTimeout+WriteSlack)
	}
}
