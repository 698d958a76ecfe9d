// Package respserver is the proxy's RESP server room: it serves client
// connections whatever their commands mean. It accepts them (on event
// loops, or two goroutines per connection), parses their bytes as
// untrusted input (every length checked before use: [Framer] over
// [resp.CommandReader]), bounds them (deadlines, per-request and
// per-connection limits, the memory budget, MaxClients), authenticates
// them (AUTH, HELLO), serves the connection plumbing (PING, CLIENT,
// COMMAND, INFO, ...) and pub/sub delivery, admits their commands to the
// backends ([Admission]), runs them on its worker pool ([Workers]) or on
// the reader, and writes their replies in request order.
//
// A handler gives the server its commands ([Config].Commands: a [Command]
// table of names, arities, key positions and a Run per command) and a few
// hooks (the keys it refuses, the channels that may be subscribed to, the
// corks of its backend connections, its INFO lines). A command's Run gets
// the connection ([Conn]) and the parsed arguments and returns the reply's
// slot ([Call]): a reply already built ([Reply], [ErrCall]), or an
// asynchronous one ([Conn.Async], [Conn.AsyncCmd]) that runs off the reader
// in the connection's order on the keys it names.
//
// It must not know locks: it imports neither the engine, nor the master
// connections, nor the lock commands or Redisson (proxy's TestRoomImports
// fails if it does). Within this module it imports only resp. What it
// offers the lock rooms is a connection to reply on and the services of
// [Server] (Publish, the log budgets, Closing), not its fields.
package respserver
