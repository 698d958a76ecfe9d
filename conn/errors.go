package conn

import (
	"errors"
	"fmt"
)

// ErrClosed is returned (or passed to callbacks) once the Conn is closed.
var ErrClosed = errors.New("conn: closed")

// ErrDown is returned by Do while the master is not connected; the Conn is
// reconnecting in the background.
var ErrDown = errors.New("conn: master not connected")

// ErrTimeout is passed to a callback whose request deadline passed before
// its reply arrived.
var ErrTimeout = errors.New("conn: request timed out")

// ErrBroken is matched by the error passed to callbacks of requests that were
// in flight when the socket failed. See [BrokenError].
var ErrBroken = errors.New("conn: connection broken")

// ErrOverloaded is returned by Do when too many requests are pending on the
// connection (see [Config.MaxPending]), typically because the master stalls.
var ErrOverloaded = errors.New("conn: too many pending requests")

// ErrStalled is matched by the error that ends a session whose master
// stopped answering (see [Config.StallTimeout]): requests still in flight
// fail with a [BrokenError] wrapping it.
var ErrStalled = errors.New("conn: master stalled")

// ErrAuth is matched by the error of a connect attempt the master refused
// to authenticate: AUTH was answered with an error (WRONGPASS, or a
// password sent to a master that has none), or, without
// [Config.Password], a handshake command was answered with NOAUTH. The
// error also wraps the server's reply ([*resp.Error]), and matches
// [ErrDown] wherever the Conn reports being down.
var ErrAuth = errors.New("conn: authentication refused")

// ErrConnectTimeout is matched by the error of a connect attempt (dial,
// TLS and handshake) that did not finish within [Config.DialTimeout] —
// the master's address drops packets (a network partition, a firewall)
// or the master is too slow to answer — and so by the [ErrDown] error of
// a Conn whose last attempt ended that way.
//
// That deadline is the Conn's own, not its caller's: the error keeps the
// cause's text ("dial tcp …: i/o timeout") but not the cause, so it
// matches neither context.DeadlineExceeded nor os.ErrDeadlineExceeded
// (Go's dial timeout matches both). An operation's error matches
// context.DeadlineExceeded only when the caller's ctx ended; a master cut
// off by a partition reads as down, as one that refuses connections does.
var ErrConnectTimeout = errors.New("conn: connect timed out")

// ErrBadCommand is returned by Do for an empty command (no bytes, or an
// array of no words, which a server does not answer) or a nil callback,
// and by Exec without arguments.
var ErrBadCommand = errors.New("conn: empty command")

// BrokenError reports the failure of a connection's socket. It matches
// [ErrBroken] and unwraps to the underlying cause.
type BrokenError struct {
	Addr string
	Err  error
}

// Error implements the error interface.
func (e *BrokenError) Error() string {
	return fmt.Sprintf("conn: connection to %s broken: %v", e.Addr, e.Err)
}

// Unwrap returns the cause.
func (e *BrokenError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrBroken].
func (e *BrokenError) Is(target error) bool { return target == ErrBroken }

// connectTimeoutError is the error of a connect attempt that ran out of
// [Config.DialTimeout]: it matches [ErrConnectTimeout] and keeps only the
// text of its cause (see ErrConnectTimeout for why).
type connectTimeoutError struct{ msg string }

func (e *connectTimeoutError) Error() string { return e.msg }

func (e *connectTimeoutError) Is(target error) bool { return target == ErrConnectTimeout }
