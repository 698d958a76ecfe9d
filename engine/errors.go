package engine

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotAcquired is matched by the error of an acquisition that a quorum of
// masters answered without granting it within the lock's validity: the key
// is held (or the grants came too late). When too few masters answered to
// tell, the error matches [ErrUnavailable] instead.
var ErrNotAcquired = errors.New("engine: lock not acquired")

// ErrUnavailable is matched by the error of an operation for which fewer
// than a quorum of masters answered at all (down, unreachable, timed out):
// the engine cannot tell whether the lock is free or held. An acquisition
// that fails this way matches ErrUnavailable and not [ErrNotAcquired]; an
// Unlock or Extend matches both ErrUnavailable and [ErrLockLost] (the
// holder can no longer count on it).
var ErrUnavailable = errors.New("engine: no quorum of masters answered")

// ErrLockLost is matched by the error of Unlock or Extend when a quorum of
// masters no longer holds the lock's token (it expired or was taken over).
var ErrLockLost = errors.New("engine: lock lost")

// ErrUnlocked is what [Lock.Err] returns after [Lock.Unlock]: the holder
// gave the lock up ([Lock.Done] is closed).
var ErrUnlocked = errors.New("engine: unlocked")

// ErrMaxHold is matched, together with [ErrLockLost], by [Lock.Err] when
// the watchdog stopped at the bound given to [WithAutoExtend] and the
// validity ran out.
var ErrMaxHold = errors.New("engine: maximum hold time reached")

// ErrClosed is returned by operations on a closed [Engine].
var ErrClosed = errors.New("engine: closed")

// ErrHeld is the per-master cause recorded when a master refused an
// acquisition because the key exists (held by someone, maybe by a
// stale lock).
var ErrHeld = errors.New("engine: key held on master")

// ErrNotHeld is the per-master cause recorded when a master did not hold the
// token on release, extend or the fencing write-back (see [WithFencing]).
var ErrNotHeld = errors.New("engine: token not held on master")

// ErrQuarantined is the per-master cause recorded when a master granted
// an acquire or extend, or confirmed a fencing write-back, while in restart
// quarantine: the answer does not count (see Config.DisableQuarantine).
var ErrQuarantined = errors.New("engine: master in restart quarantine")

// ErrGrantedTooLate is the cause of an acquisition or extension that got a
// quorum too late: the elapsed time plus drift used up the TTL. (A held
// lock whose validity ran out ends with [ErrExpired].)
var ErrGrantedTooLate = errors.New("engine: quorum reached after the validity ran out")

// ErrExpired is matched, together with [ErrLockLost], by [Lock.Err] when
// the lock's validity ran out before an extension could renew it.
var ErrExpired = errors.New("engine: validity ran out")

// ErrTooManyExtensions is returned by Extend past [Config.MaxExtensions].
var ErrTooManyExtensions = errors.New("engine: extension limit reached")

// ErrBadArgument is matched by errors for invalid arguments (empty key,
// non-positive TTL, empty token).
var ErrBadArgument = errors.New("engine: invalid argument")

// ErrDuplicateMaster is matched by the error of [Engine.WaitReady] when
// two configured addresses reach the same Redis server (the same run_id):
// that server would vote twice, and a quorum would not be a majority of
// independent masters.
var ErrDuplicateMaster = errors.New("engine: one server listed under two addresses")

// MasterError is one master's failure inside an operation.
type MasterError struct {
	Master int    // member index: Config.Addrs, then Config.Clusters
	Addr   string // master address
	Err    error  // cause: ErrHeld, ErrNotHeld, conn.ErrTimeout, *resp.Error, ...
}

// Error implements the error interface.
func (e *MasterError) Error() string {
	return fmt.Sprintf("master %d (%s): %v", e.Master, e.Addr, e.Err)
}

// Unwrap returns the cause.
func (e *MasterError) Unwrap() error { return e.Err }

// QuorumError reports an operation that did not reach a quorum. It matches
// its sentinel (ErrNotAcquired for acquire, ErrLockLost for release and
// extend) — or, when fewer than a quorum answered at all, ErrUnavailable
// (for acquire instead of ErrNotAcquired, for release and extend as well
// as ErrLockLost) — and unwraps to the per-master errors.
type QuorumError struct {
	Op       string // "acquire", "release", "extend"
	Granted  int    // masters that said yes
	Answered int    // masters that answered yes or no (not down, not timed out)
	Total    int    // masters contacted
	Quorum   int    // yes answers needed
	Masters  []error
	sentinel error
	// unavailable: fewer than Quorum answered; the error also matches
	// ErrUnavailable.
	unavailable bool
}

// Error implements the error interface.
func (e *QuorumError) Error() string {
	var b strings.Builder
	if e.unavailable {
		fmt.Fprintf(&b, "%v: %s: %d/%d masters answered, %d granted (quorum %d)", ErrUnavailable, e.Op, e.Answered, e.Total, e.Granted, e.Quorum)
	} else {
		fmt.Fprintf(&b, "%v: %s: %d/%d masters (quorum %d)", e.sentinel, e.Op, e.Granted, e.Total, e.Quorum)
	}
	for i, m := range e.Masters {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(m.Error())
	}
	return b.String()
}

// Is matches the operation's sentinel, and ErrUnavailable when fewer than
// a quorum of masters answered.
func (e *QuorumError) Is(target error) bool {
	return target == e.sentinel || (e.unavailable && target == ErrUnavailable)
}

// Unwrap returns the per-master errors.
func (e *QuorumError) Unwrap() []error { return e.Masters }
