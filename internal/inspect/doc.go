// Package inspect looks for lock keys in an unhealthy state across the N
// masters of a Redlock group: the library behind `redlock inspect`.
//
// [Run] walks every master's keyspace with SCAN (never KEYS, which blocks a
// master for the whole keyspace) and looks every key it finds up on every
// master, because SCAN only says where a key exists, not where it is
// missing. The look-ups (GETRANGE of the first 1 KiB and PTTL per key) are pipelined a SCAN page
// at a time, so a key's state on the N masters is read within one round
// trip. Only string keys are locks; a key of another type on any master is
// listed in [Report.NotLocks] and otherwise skipped.
//
// A key is reported as a [Finding] when it shows one or more of these
// [Kind]s:
//   - [NoTTL]: it exists on some master without a TTL (PTTL -1): it will
//     never expire, so nobody can lock that key on that master again.
//   - [Minority]: it is held on at least one master but fewer than a quorum
//     (N/2+1): the leftovers of a failed acquisition not yet released, or
//     a lock that lost its quorum. A lock expiring naturally looks like
//     this for a moment (its masters' TTLs run out a few ms apart): read
//     the PTTLs in the finding before acting.
//   - [Mismatch]: the masters holding it hold different values (tokens).
//
// Guarantees and limits:
//   - Read-only: Run sends only SCAN, GETRANGE and PTTL (and the connection
//     handshake of [conn.Dial]). It changes nothing on the masters.
//   - Not a snapshot: each key is read on all masters at once, but keys are
//     read at different times, and locks taken, released or expiring while
//     Run works may or may not be seen. A key read with a value whose PTTL
//     then says it is gone is counted as absent.
//   - A master that cannot be dialled, or fails a request (error or
//     timeout), is marked failed in [Report.Masters] and not asked again.
//     Run still completes with the others; its answer for each key is
//     unknown. A key is then reported as a Minority only if it would be
//     one even if every failed master held it, so a master down does not
//     turn every live lock into a finding. Run returns an error only when
//     no master at all could be inspected, or when ctx ends.
//   - The fencing counter ([engine.DefaultFenceKey]) legitimately has no
//     TTL and is skipped unless [Options.InspectFenceKey] is set.
//   - [Options.MaxKeys] bounds the keys looked up (and the memory used to
//     remember which ones were); past it Run stops and sets
//     [Report.Truncated].
package inspect
