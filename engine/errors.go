package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"
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
var ErrUnavailable = errors.New("engine: unavailable: too few masters could vote")

// ErrMisconfigured is matched by the error of an operation that so many
// masters refused for a reason retrying cannot cure — the masters' ACL
// user lacks a command, a key or a channel the operation needs (NOPERM;
// docs/operations.md#security has the line that runs every kind), the
// masters refused the credentials (WRONGPASS, NOAUTH: [conn.ErrAuth]),
// or they do not have a command (an older server) — that a quorum cannot
// form without them. Such an error also matches [ErrUnavailable] (too few
// masters voted) and the operation's other sentinel, and names each
// refusing master, the command and the fix. The waits ([Engine.Lock],
// [FairLock.Lock], [Election.Campaign], [RWLock.Lock], [RWLock.RLock],
// [Semaphore.Acquire], [Reentrant.Lock], [Engine.LockAll], [Engine.Do],
// [Election.Lead]) return it at once instead of trying again: the masters
// or the configuration must change first.
var ErrMisconfigured = errors.New("engine: misconfigured: refused by the masters (retrying cannot help)")

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

// ErrQuarantined is matched by the per-master cause recorded when a master
// granted an acquire or extend, or confirmed a fencing write-back, while in
// restart quarantine: the answer does not count (see
// Config.DisableQuarantine). The cause is a [*QuarantineError], which says
// when the quarantine ends.
var ErrQuarantined = errors.New("engine: master in restart quarantine")

// QuarantineError is the per-master cause of a master in restart
// quarantine: it answered, but its grants do not count until Until. It
// matches [ErrQuarantined].
type QuarantineError struct {
	Until time.Time // when the master votes again
}

// Error implements the error interface: the end, and how long from now.
func (e *QuarantineError) Error() string {
	return fmt.Sprintf("%v until %s (in %s)", ErrQuarantined, e.Until.UTC().Format(time.RFC3339), untilNow(e.Until))
}

// Is matches ErrQuarantined.
func (e *QuarantineError) Is(target error) bool { return target == ErrQuarantined }

// untilNow is how long from now to t, rounded to what a reader needs.
func untilNow(t time.Time) time.Duration {
	d := time.Until(t)
	if d < 10*time.Second {
		return max(d.Round(100*time.Millisecond), 0)
	}
	return d.Round(time.Second)
}

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
// extend) — or, when fewer than a quorum of masters voted (answered yes or
// no, out of restart quarantine), ErrUnavailable (for acquire instead of
// ErrNotAcquired, for release and extend as well as ErrLockLost) — and
// unwraps to the per-master errors.
type QuorumError struct {
	Op      string // "acquire", "release", "extend"
	Granted int    // masters that said yes
	Held    int    // masters that said no: the key is held (acquire), or the token is not (release, extend)
	// Answered counts the masters that answered: Granted + Held +
	// Quarantined (not down, not timed out, not refusing the command: see
	// [ErrMisconfigured]; the error's text counts those as answered too).
	Answered int
	// Quarantined masters answered, but are in restart quarantine: their
	// grants do not count (each one's [*QuarantineError] says until when).
	Quarantined int
	Total       int // masters contacted
	Quorum      int // yes answers needed
	// VotesAt, when not zero, is when enough of the masters that answered
	// leave restart quarantine for a quorum of them to vote: the
	// quarantine alone kept the quorum away.
	VotesAt time.Time
	Masters []error
	// hint says what the caller can do (declaring fresh masters), named
	// as Config.Names says; "" when nothing.
	hint     string
	sentinel error
	// unavailable: fewer than Quorum voted; the error also matches
	// ErrUnavailable.
	unavailable bool
}

// Error implements the error interface: the counts, when a quorum votes
// if the quarantine is what stands in the way, and the masters that did
// not say yes, grouped by what they said.
func (e *QuorumError) Error() string {
	var b strings.Builder
	s := e.sentinel
	if e.unavailable {
		s = ErrUnavailable
	}
	refused := e.refused()
	if e.misconfigured(refused) {
		s = ErrMisconfigured
	}
	fmt.Fprintf(&b, "%v: %s: %d/%d masters answered: %d granted, %d %s", s, e.Op, e.Answered+refused, e.Total, e.Granted, e.Held, heldWord(e.Op))
	if e.Quarantined > 0 {
		fmt.Fprintf(&b, ", %d in restart quarantine", e.Quarantined)
	}
	if refused > 0 {
		fmt.Fprintf(&b, ", %d refused", refused)
	}
	fmt.Fprintf(&b, " (quorum %d)", e.Quorum)
	if !e.VotesAt.IsZero() {
		fmt.Fprintf(&b, "; a quorum votes from %s (in %s)", e.VotesAt.UTC().Format(time.RFC3339), untilNow(e.VotesAt))
	}
	if e.hint != "" {
		b.WriteString("; " + e.hint)
	}
	writeMasters(&b, e.Masters)
	return b.String()
}

// heldWord names a "no" answer of op.
func heldWord(op string) string {
	switch op {
	case "acquire", "holder", "leader":
		return "held"
	}
	return "not held"
}

// writeMasters appends ": " and the per-master errors, those with the
// same cause together ("master 1 (a), master 3 (b): timed out"), so that
// five masters failing alike read as one cause.
func writeMasters(b *strings.Builder, errs []error) {
	type group struct {
		key, cause string // cause without the master's address, and with it
		who        []string
		until      time.Time // quarantined masters: the latest end, which the group's cause names
	}
	var groups []group
	for _, err := range errs {
		who, cause, key := "", err.Error(), ""
		var until time.Time
		if me := (*MasterError)(nil); errors.As(err, &me) && me.Err != nil {
			who, cause = fmt.Sprintf("master %d (%s)", me.Master, me.Addr), me.Err.Error()
			if r, ok := refusalOf(me.Err); ok && r.code != "" {
				cause = r.String() // what was refused and the fix, for the server's words
			}
			key = cause
			if qe := (*QuarantineError)(nil); errors.As(me.Err, &qe) {
				// Masters started within a second of each other end their
				// quarantine in different seconds: one cause, the latest end.
				key, until = "\x00quarantine", qe.Until
			} else if me.Addr != "" {
				// A dial error names the master's address again.
				key = strings.ReplaceAll(cause, me.Addr, "…")
			}
		}
		j := 0
		for j < len(groups) && (groups[j].key != key || who == "") {
			j++
		}
		if j == len(groups) {
			groups = append(groups, group{key: key, cause: cause, until: until})
		} else if until.After(groups[j].until) {
			groups[j].cause, groups[j].until = cause, until
		}
		if who != "" {
			groups[j].who = append(groups[j].who, who)
		}
	}
	for i := range groups {
		if len(groups[i].who) > 1 && groups[i].until.IsZero() {
			groups[i].cause = groups[i].key
		}
	}
	for i, g := range groups {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		if len(g.who) > 0 {
			b.WriteString(strings.Join(g.who, ", ") + ": ")
		}
		b.WriteString(g.cause)
	}
}

// Is matches the operation's sentinel, ErrUnavailable when fewer than a
// quorum of masters answered, and ErrMisconfigured when so many masters
// refused the command for good that no quorum can form without them.
func (e *QuorumError) Is(target error) bool {
	switch target {
	case e.sentinel:
		return true
	case ErrUnavailable:
		return e.unavailable
	case ErrMisconfigured:
		return e.misconfigured(e.refused())
	}
	return false
}

// refused counts the masters whose failure is a refusal retrying cannot
// cure (refusalOf).
func (e *QuorumError) refused() int {
	n := 0
	for _, err := range e.Masters {
		if me := (*MasterError)(nil); errors.As(err, &me) {
			if _, ok := refusalOf(me.Err); ok {
				n++
			}
		}
	}
	return n
}

// misconfigured reports whether refused masters leave too few for a
// quorum.
func (e *QuorumError) misconfigured(refused int) bool {
	return refused > 0 && refused > e.Total-e.Quorum
}

// Unwrap returns the per-master errors.
func (e *QuorumError) Unwrap() []error { return e.Masters }

// lateQuorumError is the error of a watchdog extension that too few
// masters answered: decided when the failures ruled out a quorum, it
// reads the op's answers again whenever it is printed or unwrapped, so
// that the masters that answered after the decision — the healthy ones —
// count as answered, not "no answer yet". It matches what the error at
// the decision matched. It holds a reference to the op for as long as it
// lives (the op is then left to the garbage collector, not the pool).
type lateQuorumError struct {
	early error // the QuorumError at the decision
	o     *op
}

// current is the error with the answers so far, while it tells the same
// story as at the decision (too few masters answered).
func (e *lateQuorumError) current() error {
	if late := e.o.quorumError(ErrLockLost, nil); errors.Is(late, ErrUnavailable) {
		return late
	}
	return e.early
}

func (e *lateQuorumError) Error() string        { return e.current().Error() }
func (e *lateQuorumError) Is(target error) bool { return errors.Is(e.early, target) }
func (e *lateQuorumError) Unwrap() []error      { return []error{e.current()} }

// errFenceRange: a fenced acquisition met a fencing counter at 2^53 − 1
// (scripts.MaxFence), where the masters' Lua numbers stop being exact and
// tokens would repeat: that master's fenced grants fail with its script's
// error until its counter is reset (a clock read past the year 2255 gets
// there). It matches ErrUnavailable: fencing is not available there.
var errFenceRange = fmt.Errorf("%w: fencing counter at 2^53 − 1 (a master's clock read past the year 2255?): tokens past it would not be ordered", ErrUnavailable)

// errNilFn: Do or Lead without a function to run (refused before
// anything is sent).
var errNilFn = fmt.Errorf("%w: a nil function to run under the lock", ErrBadArgument)
