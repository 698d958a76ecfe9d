package clockfront

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/resp"
)

// DefaultJumpTimeout bounds [Front.Jump]'s work on the master (dial,
// authentication, script) when its ctx has no deadline: 5 s.
const DefaultJumpTimeout = 5 * time.Second

//go:embed jump.lua
var jumpScript string

// Options configures a [Front] started by [StartWith].
type Options struct {
	// Username and Password authenticate Jump's own connection to the
	// master (AUTH) when Password is set; clients through the front
	// authenticate themselves. Default: no AUTH.
	Username, Password string
}

// Front relays every connection accepted on its loopback address to one
// redis-server, shifting TIME replies by the offset [Front.Jump] set.
type Front struct {
	ln     net.Listener
	target string
	opts   Options

	offset atomic.Int64 // total of all jumps, ns
	jumpMu sync.Mutex   // serializes Jump (offset and TTL cut move together)

	ctx    context.Context // cancelled by Close: aborts dials to the target
	cancel context.CancelFunc
	wg     sync.WaitGroup // accept loop and every connection's goroutines

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // both ends of every live link; guarded by mu
	closed bool                  // guarded by mu
}

// Start starts a front on a free 127.0.0.1 port for the redis-server at
// target, and closes it when t finishes. It fails t if it cannot listen.
func Start(t testing.TB, target string) *Front {
	t.Helper()
	return StartWith(t, target, Options{})
}

// StartWith is [Start] with options (a password for [Front.Jump]).
func StartWith(t testing.TB, target string, o Options) *Front {
	t.Helper()
	f, err := New(target, o)
	if err != nil {
		t.Fatalf("clockfront: %v", err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("clockfront: %v", err)
		}
	})
	return f
}

// New starts a front on a free 127.0.0.1 port for the redis-server at
// target. The caller closes it; tests use [Start].
func New(target string, o Options) (*Front, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Front{ln: ln, target: target, opts: o, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

// Addr returns the front's address, for clients.
func (f *Front) Addr() string { return f.ln.Addr().String() }

// Target returns the address of the redis-server behind the front.
func (f *Front) Target() string { return f.target }

// Offset returns how far the simulated clock is ahead of the master's
// (negative: behind): the sum of every [Front.Jump] so far.
func (f *Front) Offset() time.Duration { return time.Duration(f.offset.Load()) }

// Jump moves the master's clock by d: forward for d > 0, backward for
// d < 0. TIME replies through the front are shifted by the new
// [Front.Offset] from before the keys are touched. For d > 0 it then moves
// every key's expiry on the master back by d (whole milliseconds),
// deleting the keys with at most d left, in one Lua script over a
// connection of its own; if that fails the offset is restored (a TIME
// reply in between was shifted: a jump forward and one back). A backward
// jump does not touch keys. Concurrent jumps are applied one after the
// other.
//
// The offset moves first so that no client can see a key cut by the jump
// in a batch whose TIME was not shifted: on a real master the clock and
// the expiries move together, and a TIME the master runs after the jump
// shows it. Cutting first left a window (the script's reply on its way to
// Jump) in which a batch's TIME and grant both followed the cut but the
// TIME passed the front unshifted — a jump the clock check cannot see.
// Shifted first, a reading may show the jump a moment before the keys are
// cut: a check then sees it early, which costs nothing but availability.
func (f *Front) Jump(ctx context.Context, d time.Duration) error {
	f.jumpMu.Lock()
	defer f.jumpMu.Unlock()
	f.offset.Add(int64(d))
	if d > 0 {
		if err := f.cutTTLs(ctx, d); err != nil {
			f.offset.Add(-int64(d))
			return fmt.Errorf("clockfront: jump %v: %w", d, err)
		}
	}
	return nil
}

// cutTTLs runs jump.lua on the master.
func (f *Front) cutTTLs(ctx context.Context, d time.Duration) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultJumpTimeout)
		defer cancel()
	}
	var dialer net.Dialer
	nc, err := dialer.DialContext(ctx, "tcp", f.target)
	if err != nil {
		return err
	}
	defer nc.Close()
	deadline, _ := ctx.Deadline()
	if err := nc.SetDeadline(deadline); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	var cmd []byte
	n := 1
	if f.opts.Password != "" {
		if f.opts.Username != "" {
			cmd = resp.AppendCommandStrings(cmd, "AUTH", f.opts.Username, f.opts.Password)
		} else {
			cmd = resp.AppendCommandStrings(cmd, "AUTH", f.opts.Password)
		}
		n++
	}
	cmd = resp.AppendCommandStrings(cmd, "EVAL", jumpScript, "0", strconv.FormatInt(d.Milliseconds(), 10))
	if _, err := nc.Write(cmd); err != nil {
		return err
	}
	rd := resp.NewReader(nc)
	for i := range n {
		rep, err := rd.ReadReply()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if rep.IsError() {
			what := "script"
			if i < n-1 {
				what = "AUTH"
			}
			return fmt.Errorf("%s: %w", what, rep.Err())
		}
	}
	return nil
}

func (f *Front) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		if !f.track(c) {
			return
		}
		f.wg.Add(1)
		go f.serve(c)
	}
}

// track records live sockets so that Close can close them; false (and
// the sockets closed) once the front is closed.
func (f *Front) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *Front) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(f.conns, c)
	}
}

// serve links client to a new connection to the target, until either end
// closes.
func (f *Front) serve(client net.Conn) {
	defer f.wg.Done()
	var dialer net.Dialer
	server, err := dialer.DialContext(f.ctx, "tcp", f.target)
	if err != nil {
		f.untrack(client)
		return
	}
	if !f.track(server) {
		f.untrack(client)
		return
	}
	l := newLink(client, server, f.Offset)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.replies()
	}()
	l.requests()
	<-done
	f.untrack(client, server)
}

// Close stops accepting, closes every connection through the front and
// waits for the front's goroutines. Closing a closed Front does nothing.
func (f *Front) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.cancel()
	err := f.ln.Close()
	f.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
