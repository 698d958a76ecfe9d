// Package engine implements the Redlock algorithm over N independent Redis
// masters with auto-pipelined connections ([conn.Conn]).
//
// Acquire sends "SET key token NX PX ttl" to every master at once (one
// enqueue per master connection, no goroutine per master), counts replies as
// they arrive and decides as soon as the outcome is known: a quorum
// (N/2+1) of grants is a candidate success, N-Q+1 refusals or failures a
// failure. The lock is valid for ttl - elapsed - drift, where drift is
// ttl*DriftFactor + DriftMin; a candidate whose validity is not positive
// fails. On any failure the token is released, before the call returns, on
// every master whose SET may have written it: all of them except those
// that answered nil (SET NX wrote nothing there; a release could only
// delete a lock holding the same token). Masters that timed out are
// included. Too few answers to tell held from free is reported as
// [ErrUnavailable], not [ErrNotAcquired]; a refusal retrying cannot cure
// (an ACL user short of a command, refused credentials) from so many
// masters that no quorum can form is [ErrMisconfigured] as well, and ends
// every wait at once.
//
// Release and extend are compare-and-delete / compare-and-pexpire scripts
// sent with EVALSHA (scripts are loaded once per connection; NOSCRIPT falls
// back to EVAL transparently).
//
// Waiting and holding: [Engine.Lock] queues the waiters of one engine per
// key (FIFO) and hands the key to the next one at Unlock; for holders in
// other processes it schedules the next try from the masters' PTTL, and
// with [Config.ReleaseChannel] a release anywhere wakes it. [WithAutoExtend]
// hands a lock to the engine's one scheduler (the watchdog), and
// [Lock.Done], [Lock.Err] and [Lock.Context] tell the holder when a lock
// ended (docs/algorithm.md).
//
// Guarantees: within the safety model of Redlock (docs/safety.md), at most
// one holder has a valid lock on a key at any instant, provided clocks
// advance at roughly the same rate and every process that locks on the same
// masters keeps its TTLs within the same [Config.MaxTTL]. A master may lose
// its data on restart: restart quarantine (on unless
// [Config.DisableQuarantine]) keeps a master that restarted (a new run_id,
// or younger than the quarantine period when first met) from voting until
// the quarantine period, the larger of MaxTTL and [Config.QuarantineFor],
// has passed since it started, by when every lock it may have lost has
// expired. [Config.FreshMasters] waives that only for masters just started
// empty that no one else uses. Each master is contacted once per operation and each operation
// waits at most the per-master timeout for a stalled master.
//
// Not guaranteed: a holder paused (GC, SIGSTOP) past its validity may act
// after losing the lock — check [Lock.Valid] before acting, keep critical
// sections well inside the validity. Cancelling a call's context stops the
// wait, not commands already on the wire; the engine therefore always
// releases after a cancelled acquire.
package engine
