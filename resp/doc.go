// Package resp is redlock's own RESP (REdis Serialization Protocol) codec.
//
// Encoding is append-style: [AppendCommand], [AppendBulk] and friends append
// to a caller-owned byte slice and never allocate beyond growing it.
//
// Decoding is streaming: a [Reader] parses one reply at a time from a
// buffered reader. It handles every RESP2 type and the RESP3 reply types
// (null, double, boolean, blob error, verbatim string, big number, map, set,
// push and attributes; attributes are parsed and discarded). Streamed RESP3
// aggregates ("$?", "*?") are rejected with a protocol error.
//
// Guarantees:
//   - Simple strings, errors, integers, nulls and bulk strings decode without
//     allocating: the returned [Reply] aliases the Reader's internal buffers
//     and stays valid only until the next call to [Reader.ReadReply]. Use
//     [Reply.Clone] to keep one.
//   - Untrusted input is bounded by [Reader.MaxBulkLen], [Reader.MaxArrayLen]
//     and [Reader.MaxDepth]; violations are reported as errors matching
//     [ErrProtocol] and [ErrTooLarge] with [errors.Is].
//   - A reply the server sent as an error ("-ERR ...") is data, not a
//     failure of the stream: it comes back as a Reply of type [TypeError]
//     and [Reply.Err] turns it into an [*Error]. I/O errors and protocol
//     errors are returned as the error result of ReadReply instead.
//
// Not guaranteed: the package does not know Redis commands; it encodes and
// decodes frames only. Package resp imports only the standard library.
package resp
