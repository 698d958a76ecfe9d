// Package conn is one auto-pipelined connection to one Redis master.
//
// Callers hand a [Conn] an encoded command and a [Callback] with [Conn.Do].
// The command is appended to a shared write buffer; a writer goroutine
// writes everything queued in one write call whenever the socket is free, so
// concurrent callers share syscalls (auto-pipelining). A reader goroutine
// decodes replies in FIFO order and completes each request's callback.
//
// Guarantees:
//   - Every request accepted by Do (nil error) has its callback called exactly
//     once: with the reply, with [ErrTimeout] when its deadline passes first,
//     with an error matching [ErrBroken] when the socket fails while it is in
//     flight, or with [ErrClosed] when the Conn is closed.
//   - A timed-out request is failed to its caller at its deadline even when the
//     master is stalled (SIGSTOP, network black hole); its reply, if it ever
//     comes, is still consumed in order and dropped.
//   - While the master is unreachable Do fails fast with [ErrDown]; the Conn
//     reconnects in the background with capped exponential backoff and jitter.
//     A connect attempt that times out (an address that drops packets) is
//     down as a refused one is: its error matches [ErrConnectTimeout], never
//     context.DeadlineExceeded, which stays the caller's own deadline.
//   - Scripts ([Script]) listed in [Config.Scripts] are loaded once per
//     connection; an EVALSHA that meets NOSCRIPT is re-sent as EVAL
//     transparently, once. A script made with [NewNativeScript] is sent
//     as the server's own command instead (DELEX / DELIFEQ, SET IFEQ) when
//     the server said at connect that it has it ([ServerInfo]), with the
//     script's reply; see [Native].
//   - [Conn.Close] is idempotent and returns only after every goroutine of
//     the Conn has exited.
//
// Not guaranteed: cancelling a caller stops its wait, not the command
// already on the wire — the master may still execute it. Callbacks run on
// the Conn's goroutines and must not block.
package conn
