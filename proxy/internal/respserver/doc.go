// Package respserver is the proxy's RESP server room: what serves client
// connections whatever the commands mean. It parses client bytes (every
// length checked before use: [Framer] over [resp.CommandReader]), and is
// where the event loop, client connections, deadlines, memory budgets,
// admission, the worker pool, AUTH/HELLO/TLS plumbing and pub/sub
// delivery live, dispatching parsed commands to a handler.
//
// It must not know locks: it imports neither the engine, nor the master
// connections, nor the lock commands or Redisson (proxy's TestRoomImports
// fails if it does). Within this module it imports only resp. What it
// offers the lock rooms is a connection to reply on, not its fields.
//
// Today it holds the event loop's framing ([Framer], [FrameScan], fuzzed
// against the goroutine path's reader by FuzzLoopFraming), the admission
// of commands to the masters ([Admission]), the worker pool ([Workers])
// and the reply and batch buffer pools, the log budget ([LogBudget]), and
// the pub/sub hub ([Hub]: channels to [Subscriber] connections, Publish
// under its lock). The loop's system calls, the client connections, the
// command table's dispatch, plumbing and SUBSCRIBE are still in package
// proxy, from which they are being moved (issue 45; docs/architecture.md,
// The proxy's rooms).
package respserver
