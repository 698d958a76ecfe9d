// Package proxy is a RESP server that makes the locks of unmodified Redis
// clients Redlock quorum locks over N masters.
//
// A client points its Redis address at the proxy. SET key value NX PX ms
// (or NX EX s, options in any order and case) becomes an engine
// acquisition with the client's value as token: +OK when a quorum of
// masters granted it within its validity, nil otherwise (partial grants are
// released before the reply). The release / extend / obtain / pttl scripts
// of redis-py, bsm/redislock, redsync and node-redlock are recognised by
// the SHA1 of their exact text (EVAL, EVALSHA, SCRIPT LOAD/EXISTS/FLUSH)
// and mapped to quorum operations that answer in each library's reply
// contract; multi-key scripts are all-or-nothing per master and succeed
// only with a quorum of masters granting every key. Any other script is
// refused and reaches no master, unless [Config.AllowScripts] is set: then
// it runs on every master, on master connections of its own, and gets the
// reply a quorum agrees on. GET, EXISTS, PTTL, PEXPIRE and DEL have quorum
// semantics (see docs/proxy.md).
//
// Client bytes are untrusted: requests are parsed by [resp.CommandReader]
// with every length checked before use, and memory, arguments, pipelined
// commands and in-flight commands are bounded per client and in total
// ([Config]). A panic while serving a connection is recovered, logged and
// counted, and closes that connection only.
//
// Pipelined commands of one connection run concurrently, on a bounded
// worker pool (github.com/panjf2000/ants/v2); replies go back in request
// order, each written as soon as it and every earlier one are ready,
// flushed when nothing more is ready (one write per batch that completes
// together). A command of a connection with nothing else in flight and
// nothing more sent runs on the connection's reader, which writes its
// reply. Reply buffers come from github.com/valyala/bytebufferpool.
//
// Guarantees: a reply of success means a quorum of masters performed the
// operation (and, for acquire/extend, within the validity ttl − elapsed −
// drift); no error path leaves a key without TTL; malformed input gets an
// error reply and a clean close. [Server.Shutdown] finishes in-flight
// commands and releases nothing clients hold.
//
// Not guaranteed: the client library computes its own validity from its own
// clock and knows nothing of the quorum — a lock is as safe as Redlock over
// the proxy's masters, not more. Reads are quorum-agreed snapshots, not
// linearizable. Commands other than the lock, read and plumbing set get
// "-ERR unknown or unsupported command".
//
// The package is the wiring of three rooms with one job each, imports
// pointing one way (docs/architecture.md, The proxy's rooms):
// proxy/internal/respserver serves RESP connections and knows no locks;
// proxy/internal/lockcmds runs the lock commands over the engine as the
// server's handler; proxy/internal/redisson serves Redisson's locks and
// knows no server. Package proxy keeps [New], [Config], [Server] and the
// wiring between them; no room imports proxy.
package proxy
