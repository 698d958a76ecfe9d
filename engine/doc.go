// Package engine implements the Redlock algorithm over N independent Redis
// masters with auto-pipelined connections ([conn.Conn]).
//
// Acquire sends "SET key token NX PX ttl" to every master at once (one
// enqueue per master connection, no goroutine per master), counts replies as
// they arrive and decides as soon as the outcome is known: a quorum
// (N/2+1) of grants is a candidate success, N-Q+1 refusals or failures a
// failure. The lock is valid for ttl - elapsed - drift, where drift is
// ttl*DriftFactor + DriftMin; a candidate whose validity is not positive
// fails. On any failure the token is released on every master (including
// those that refused or timed out) before the call returns.
//
// Release and extend are compare-and-delete / compare-and-pexpire scripts
// sent with EVALSHA (scripts are loaded once per connection; NOSCRIPT falls
// back to EVAL transparently).
//
// Guarantees: within the safety model of Redlock (see docs/algorithm.md),
// at most one holder has a valid lock on a key at any instant, provided
// clocks advance at roughly the same rate and no master loses data on
// restart. Each master is contacted once per operation and each operation
// waits at most the per-master timeout for a stalled master.
//
// Not guaranteed: a holder paused (GC, SIGSTOP) past its validity may act
// after losing the lock — check [Lock.Valid] before acting, keep critical
// sections well inside the validity. Cancelling a call's context stops the
// wait, not commands already on the wire; the engine therefore always
// releases after a cancelled acquire.
package engine
