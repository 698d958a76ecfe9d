package clockfront

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/redlock-dev/redlock/resp"
)

// kind says what the front does with the reply to one command.
type kind uint8

const (
	kindPlain kind = iota // forward as it is
	kindTime              // TIME: shift by the offset
	kindRelay             // from this reply on, forward everything unparsed
)

// flushAt is how many reply bytes the front gathers before writing them
// even though more replies are already buffered.
const flushAt = 64 << 10

// link is one client connection and its connection to the target.
//
// Requests are forwarded as soon as they are read from the client (so a
// pipeline reaches the server in the client's own writes), then parsed to
// push one kind per command on q. Replies are parsed, matched with the
// next kind (waiting for the request side to parse the command if it has
// not yet: the server only answers a command whose bytes all arrived, so
// its kind follows without more input) and forwarded.
type link struct {
	client, server net.Conn
	offset         func() time.Duration
	q              queue
}

func newLink(client, server net.Conn, offset func() time.Duration) *link {
	l := &link{client: client, server: server, offset: offset}
	l.q.cond.L = &l.q.mu
	return l
}

// requests forwards the client's bytes to the server and classifies its
// commands, until either end fails. It closes both sockets when done.
func (l *link) requests() {
	defer l.server.Close()
	defer l.client.Close()
	defer l.q.end()
	cr := resp.NewCommandReader(&writeThrough{r: l.client, w: l.server}, 16<<10)
	var multi bool
	for {
		cmd, err := cr.ReadCommand()
		if err != nil {
			if !errors.Is(err, resp.ErrProtocol) {
				return // EOF, closed, or the server write failed
			}
			// Redis answers a request it cannot parse with an error and
			// closes; relay whatever comes until then.
			l.q.push(kindRelay)
			break
		}
		k := classify(cmd.Args, &multi)
		l.q.push(k)
		if k == kindRelay {
			break
		}
	}
	// What cr buffered was already forwarded: relay the rest unparsed.
	io.Copy(l.server, l.client)
}

// classify returns the kind of the reply to the command args. multi
// tracks whether the connection is inside MULTI (where TIME answers
// +QUEUED and its time comes in EXEC's array, which is not shifted).
func classify(args [][]byte, multi *bool) kind {
	name := args[0]
	switch {
	case bytes.EqualFold(name, []byte("TIME")):
		if *multi {
			return kindPlain
		}
		return kindTime
	case bytes.EqualFold(name, []byte("MULTI")):
		*multi = true
	case bytes.EqualFold(name, []byte("EXEC")), bytes.EqualFold(name, []byte("DISCARD")):
		*multi = false
	case bytes.EqualFold(name, []byte("SUBSCRIBE")), bytes.EqualFold(name, []byte("PSUBSCRIBE")),
		bytes.EqualFold(name, []byte("SSUBSCRIBE")), bytes.EqualFold(name, []byte("MONITOR")):
		return kindRelay // replies no longer answer commands one for one
	case bytes.EqualFold(name, []byte("HELLO")):
		if len(args) > 1 && string(args[1]) != "2" {
			return kindRelay // RESP3: push messages may come unasked
		}
	case bytes.EqualFold(name, []byte("CLIENT")):
		if len(args) > 1 && bytes.EqualFold(args[1], []byte("REPLY")) {
			return kindRelay // OFF and SKIP drop replies
		}
	}
	return kindPlain
}

// replies forwards the server's replies to the client, shifting TIME's,
// until either end fails. It closes both sockets when done.
func (l *link) replies() {
	defer l.server.Close()
	defer l.client.Close()
	tp := &tap{r: l.server}
	rd := resp.NewReader(tp)
	var out []byte
	for {
		rep, err := rd.ReadReply()
		if err != nil && !errors.Is(err, resp.ErrTooLarge) {
			break // an I/O error, or something the front cannot parse
		}
		// An oversized reply was read to its end and dropped: forward it
		// as it came, like any other.
		n := len(tp.pending()) - rd.Buffered()
		k, ok := l.q.pop()
		if !ok || k == kindRelay {
			break // the requests side ended, or asked for a plain relay
		}
		shifted := false
		if k == kindTime && err == nil {
			if off := l.offset(); off != 0 {
				out, shifted = appendShifted(out, rep, off)
			}
		}
		if !shifted {
			out = append(out, tp.pending()[:n]...)
		}
		tp.consume(n)
		if rd.Buffered() == 0 || len(out) >= flushAt {
			if _, err := l.client.Write(out); err != nil {
				return
			}
			out = out[:0]
		}
	}
	// Forward what arrived and was not forwarded (the reply read last, and
	// any buffered after it), then relay the rest unparsed.
	out = append(out, tp.pending()...)
	if _, err := l.client.Write(out); err != nil {
		return
	}
	io.Copy(l.client, l.server)
}

// writeThrough is the client side's source: what it reads, it first
// writes to w (the server).
type writeThrough struct {
	r io.Reader
	w io.Writer
}

func (wt *writeThrough) Read(p []byte) (int, error) {
	n, err := wt.r.Read(p)
	if n > 0 {
		if _, werr := wt.w.Write(p[:n]); werr != nil {
			return n, werr
		}
	}
	return n, err
}

// tap is the server side's source: it keeps what was read from r and not
// yet consumed, so that a reply parsed by a resp.Reader (which does not
// give its raw bytes) can be forwarded as it came: the reply's bytes are
// the first len(pending()) - Reader.Buffered().
type tap struct {
	r   io.Reader
	buf []byte // buf[off:] is pending
	off int
}

func (t *tap) Read(p []byte) (int, error) {
	if t.off > 0 { // once per read from r, not per reply
		t.buf = t.buf[:copy(t.buf, t.buf[t.off:])]
		t.off = 0
	}
	n, err := t.r.Read(p)
	t.buf = append(t.buf, p[:n]...)
	return n, err
}

// pending returns the bytes read and not consumed.
func (t *tap) pending() []byte { return t.buf[t.off:] }

// consume drops the first n pending bytes.
func (t *tap) consume(n int) { t.off += n }

// queue is a link's FIFO of reply kinds, one per command sent.
type queue struct {
	mu    sync.Mutex
	cond  sync.Cond // L is &mu; signalled by push and end
	kinds []kind    // kinds[head:] are queued; guarded by mu
	head  int       // guarded by mu
	ended bool      // no more pushes; guarded by mu
}

func (q *queue) push(k kind) {
	q.mu.Lock()
	q.kinds = append(q.kinds, k)
	q.mu.Unlock()
	q.cond.Signal()
}

// end wakes pop for good: the requests side has stopped.
func (q *queue) end() {
	q.mu.Lock()
	q.ended = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// pop returns the oldest kind, waiting for one; false once the queue is
// empty and ended.
func (q *queue) pop() (kind, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.head == len(q.kinds) && !q.ended {
		q.cond.Wait()
	}
	if q.head == len(q.kinds) {
		return 0, false
	}
	k := q.kinds[q.head]
	q.head++
	if q.head == len(q.kinds) {
		q.kinds, q.head = q.kinds[:0], 0
	}
	return k, true
}
