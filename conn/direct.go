package conn

// The caller's own write: a request made while the connection is idle —
// no write in progress, nothing queued, no member held, not corked — is
// written by the goroutine that called Do, in one non-blocking write(2),
// instead of waking the writer goroutine to write it. A lone operation
// then waits for no goroutine hand-off before its bytes leave; under load
// the connection is rarely idle, and batches keep going through the
// writer. conn.go's Do decides; session.go's writeLoop defers to a write
// in progress.

import (
	"errors"
	"net"
	"syscall"
)

// rawConn returns nc's raw connection for direct writes, or nil when nc
// has none (TLS, a test's pipe): those sessions write through the writer
// only.
func rawConn(nc net.Conn) syscall.RawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// idleLocked reports whether the caller may write what it queues now
// itself: the session can take a direct write and nothing is being or
// waiting to be written.
func (c *Conn) idleLocked() bool {
	return c.rc != nil && !c.writing && c.corks == 0 && len(c.wbuf) == 0 && c.nmerge == 0
}

// writeDirectLocked writes the write buffer (just filled by the calling
// Do on an idle connection) from the calling goroutine. It is called with
// mu held and returns with mu released. The write does not block: what
// the socket does not take at once (a full send buffer) is put back at the
// front of the write buffer for the writer, so byte order stays the
// queue's order. A write error breaks the session, as the writer's does.
func (c *Conn) writeDirectLocked() {
	buf, n, rc := c.wbuf, c.wcmds, c.rc
	c.wbuf, c.spare, c.wcmds = c.spare[:0], nil, 0
	c.writing = true // the writer and other callers now append behind buf
	c.dbuf, c.dn, c.derr, c.dcalled = buf, 0, nil, false
	c.mu.Unlock()

	err := rc.Write(c.directFn)
	c.mu.Lock()
	wrote, werr := c.dn, c.derr
	called := c.dcalled
	c.dbuf = nil
	c.writing = false
	if c.rc != rc {
		// The session ended meanwhile: its requests were failed with it,
		// and what was not written must not reach the next session (whose
		// writer waited for this write to end).
		wake := len(c.wbuf) > 0 || c.nmerge > 0
		c.mu.Unlock()
		if wake {
			c.wakeWriter()
		}
		return
	}
	if !called || werr != nil && (errors.Is(werr, syscall.EAGAIN) || errors.Is(werr, syscall.EINTR)) {
		// Not written (the writer's write deadline, long past, makes the
		// poller refuse before write(2): the writer renews it), or the
		// socket took nothing: all of it is the writer's.
		err, werr, wrote = nil, nil, 0
	}
	if err == nil && werr == nil {
		if wrote > 0 {
			c.writes.Add(1)
			c.direct.Add(1)
		}
		if wrote < len(buf) { // the rest goes first in the writer's next write
			rest := append(buf[:0], buf[wrote:]...)
			c.wbuf, c.spare = append(rest, c.wbuf...), c.wbuf[:0]
			c.wcmds += n
			n = 0
		} else if cap(buf) <= maxRetainedWriteBuf && c.spare == nil {
			c.spare = buf[:0]
		}
	}
	wake := len(c.wbuf) > 0 || c.nmerge > 0
	c.mu.Unlock()
	if err == nil {
		err = werr
	}
	if err != nil {
		c.breakSession(err)
		return
	}
	if n > 0 && c.cfg.OnWrite != nil {
		c.cfg.OnWrite(n)
	}
	if wake {
		c.wakeWriter()
	}
}

// directWrite is the function rc.Write runs for writeDirectLocked (made
// once per Conn: a closure per call would allocate). It writes c.dbuf
// once and never waits for the socket to become writable.
func (c *Conn) directWrite(fd uintptr) bool {
	c.dn, c.derr = syscall.Write(int(fd), c.dbuf)
	if c.dn < 0 {
		c.dn = 0
	}
	c.dcalled = true
	return true
}
