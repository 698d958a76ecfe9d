// Package clockfront is a RESP-aware TCP front for one redis-server that
// lets a test move the master's clock, which redis-server itself cannot
// do here (libfaketime hangs it at start).
//
// A forward jump of a master's clock by d shows in two ways, and
// [Front.Jump] simulates both: TIME replies that pass through the front
// are shifted by the total offset of all jumps so far, and, for d > 0,
// every key with a TTL on the master expires d early (its expiry time is
// moved back by d in one Lua script, in every database; keys whose
// remaining TTL is at most d are deleted at once). A backward jump only
// shifts TIME: a master whose clock goes back keeps its keys longer, which
// the front does not simulate.
//
// What the front guarantees, per client connection:
//   - Bytes in both directions are forwarded unchanged, in order, with the
//     client's own write batching, except the reply to a TIME command,
//     which is re-encoded with the offset added (microseconds carried).
//     Pipelines of any depth work: the front parses each command (RESP
//     arrays and inline commands) to queue a flag per expected reply, and
//     finds reply boundaries with [resp.Reader].
//   - Replies a client would get directly it gets through the front, byte
//     for byte, whatever their type (null bulks and arrays, nested arrays,
//     errors, RESP3 after HELLO 3).
//
// What it does not do:
//   - TIME inside MULTI is not shifted: its reply is an element of EXEC's
//     array, which is forwarded as it is. Neither is TIME called by a Lua
//     script or function on the master (redis.call('TIME')).
//   - A connection that sends SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE, MONITOR,
//     HELLO with a protocol version other than 2, or CLIENT REPLY (or a
//     command the front cannot parse) becomes a plain relay for the rest
//     of its life: its replies no longer answer its commands one for one,
//     so from then on TIME is not shifted on it.
//   - Keys' TTLs move at millisecond resolution (d is truncated to whole
//     milliseconds there); TIME moves at microsecond resolution.
//   - A backward jump does not lengthen TTLs, and a jump does not affect a
//     replica or the master's own expiry clock: a key's TTL, once cut,
//     counts down at the real rate.
//
// [Front.Close] closes every connection and waits for every goroutine the
// front started; [Start] registers it with the test.
package clockfront
