// Package redisson is the proxy's Redisson room: it serves Redisson's lock
// scripts, unmodified, over the quorum — RLock and RFencedLock (holds,
// redisson_hold.go), RReadWriteLock (redisson_rw.go), RFairLock
// (redisson_fair.go) — and the wake-ups their waiters subscribe to: the
// channel names a client may subscribe to ([Channel]), the publication
// when a hold ends, and the relay of wake-ups across proxies over the
// masters (wakeups.go).
//
// It recognises Redisson's scripts by SHA1 ([BySHA], [Refused]) and, for
// each call, answers how the proxy runs it ([Locks.Serve]): the locks the
// command is ordered on and a [Run] that computes the reply over the
// engine's transport (internal/enginex: broadcasts and agreed-value reads).
// Its replies share the lock commands' wording through [LockReplies], and
// it publishes to this proxy's subscribers through the [Publisher] it
// declares.
//
// It must not know the RESP server: no connections, no reply slots, no
// event loop, no pub/sub hub (it imports nothing of proxy or
// proxy/internal/respserver; proxy's TestRoomImports fails if it does).
// Nothing that decides a grant, renewal, re-entry or unlock is kept in its
// memory: every hold is a value a quorum of masters keeps.
package redisson
