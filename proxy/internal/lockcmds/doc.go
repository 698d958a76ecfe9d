// Package lockcmds is the proxy's lock commands room: what a Redis
// client's lock command means, over the engine. It is the RESP server's
// handler ([Commands.Table]): SET key value NX PX|EX (an acquisition,
// with the client's value as the token), SET ... IFEQ, DELEX and DELIFEQ
// (native compare-and-set and compare-and-delete), REDLOCK.LOCK (fenced),
// the quorum reads (GET, PTTL, TTL, EXISTS, HEXISTS, HGET), DEL and
// PEXPIRE (refused unless tokenless writes are allowed), the lock scripts
// of client libraries recognised by SHA1 (the table in scripts.go) run as
// quorum operations, opted-in scripts and functions run on every master
// (passthrough.go), the refusals of what it does not serve, and the
// cleanup rule (a release of a value this proxy refused is a cleanup,
// not a lost lock: refusals.go). Redisson's scripts it hands to the
// Redisson room (proxy/internal/redisson), which it gives its reply
// primitives.
//
// It must not know the server's insides: a command gets a connection
// (respserver.Conn) to run on and returns its reply's slot
// (respserver.Call); what it needs of the server beyond that (publish,
// the log budgets, whether it is closing) is the [Server] interface it
// declares. It owns no engine: the wiring (package proxy) creates and
// closes them.
package lockcmds
