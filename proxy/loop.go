package proxy

import (
	"bytes"
	"errors"
	"sync/atomic"
	"time"

	"github.com/valyala/bytebufferpool"

	"github.com/redlock-dev/redlock/resp"
)

// The event loop's parsing, apart from its system calls (loop_linux.go),
// so that it is the same on every platform and can be fuzzed against the
// goroutine path's reader (FuzzLoopFraming).
//
// A loop reads each ready client's bytes into one scratch buffer of
// loopScratch bytes, behind what the client had left over (the start of a
// command whose end had not arrived), and parses them with one
// resp.CommandReader reset to those bytes: the reader and its limits are
// the goroutine path's, so every bound and protocol error is the same. A
// command that ends beyond the bytes read is parsed again from its start
// once more arrived (at most loopScratch bytes each time); one larger than
// the scratch buffer moves its connection to the goroutine path, whose
// reader streams large arguments.

// loopScratch is the most bytes of one client a loop parses at once.
const loopScratch = 16 << 10

// errWouldBlock is what a loop's source returns at the end of the bytes
// read: the command being parsed has not arrived whole.
var errWouldBlock = errors.New("redlock proxy: more bytes needed")

// loopSrc is the bytes a loop's reader parses.
type loopSrc struct {
	b   []byte
	pos int
}

func (s *loopSrc) Read(p []byte) (int, error) {
	if s.pos >= len(s.b) {
		return 0, errWouldBlock
	}
	n := copy(p, s.b[s.pos:])
	s.pos += n
	return n, nil
}

// framer parses commands out of byte chunks.
type framer struct {
	rd  *resp.CommandReader
	src loopSrc
}

func newFramer() *framer {
	f := &framer{}
	// A small buffer: each parse from a command's start fills it anew.
	f.rd = resp.NewCommandReader(&f.src, 1<<10)
	f.rd.Empty = true // every command's end is a place to parse again from
	return f
}

// reset makes f parse data from its start.
func (f *framer) reset(data []byte) {
	f.src = loopSrc{b: data}
	f.rd.Reset(&f.src)
}

// consumed is the offset in data of the next command to parse.
func (f *framer) consumed() int { return f.src.pos - f.rd.Buffered() }

// each parses the commands of data in order and calls on with each and
// its offset in data; on returns false to stop after it. rest is the
// offset of the first byte not consumed. more reports that data ended
// inside a command (or between two): size is what the reader charged
// for its part (to give back). err is the stream's end for the
// connection (size likewise).
func (f *framer) each(data []byte, on func(cmd resp.Command, start int) bool) (rest, size int, more bool, err error) {
	f.reset(data)
	for {
		start := f.consumed()
		cmd, more, err := f.next()
		if more || err != nil {
			return start, cmd.Size, more, err
		}
		if cmd.Args == nil {
			continue // an empty command: skipped, as Redis does
		}
		if !on(cmd, start) {
			return f.consumed(), 0, false, nil
		}
	}
}

// parse is each for data that starts with a command whose end had not
// arrived before (partial): it first asks st whether the end may be in
// data now, so that a command trickling in is not parsed again for every
// few bytes (st resumes where it stopped: the command's headers are
// checked once each).
func (f *framer) parse(data []byte, partial bool, st *frameScan, on func(cmd resp.Command, start int) bool) (rest, size int, more bool, err error) {
	if partial && !st.mayEnd(data, f.rd) {
		return 0, 0, true, nil
	}
	*st = frameScan{}
	return f.each(data, on)
}

// frameScan is how far the framing of a command whose end has not
// arrived was checked.
type frameScan struct {
	pos     int  // offset of the next header to check
	left    int  // bulk strings still to come
	total   int  // the lengths of those passed
	started bool // the multibulk header was passed
}

// maxHeaderLine is the longest "*n" or "$n" line the reader accepts.
const maxHeaderLine = 32

// mayEnd reports whether data, which starts with a command, may hold its
// end — or something the reader must refuse: false only when the
// command surely goes on past data. It reads only the headers it did not
// read before.
func (st *frameScan) mayEnd(data []byte, rd *resp.CommandReader) bool {
	if len(data) == 0 {
		return false
	}
	if st.started && st.left == 0 {
		return true // seen whole before
	}
	if data[0] != '*' { // inline: one line
		if bytes.IndexByte(data[st.pos:], '\n') >= 0 {
			return true
		}
		st.pos = len(data)
		return len(data) > limitOr(rd.MaxInlineLen, resp.DefaultMaxInlineLen)+2 // the reader's bound: the line and its CRLF
	}
	for {
		rest := data[st.pos:]
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			return len(rest) > maxHeaderLine
		}
		line := rest[:i+1]
		if len(line) > maxHeaderLine || len(line) < 3 || line[len(line)-2] != '\r' {
			return true
		}
		n, ok := resp.ParseInt(line[1 : len(line)-2])
		if !st.started {
			if !ok || n <= 0 || n > int64(limitOr(rd.MaxArgs, resp.DefaultMaxArgs)) {
				return true // empty, or refused
			}
			st.started, st.left, st.pos = true, int(n), st.pos+len(line)
			continue
		}
		if line[0] != '$' || !ok || n < 0 || n > int64(limitOr(rd.MaxBulkLen, resp.DefaultMaxBulkLen)) ||
			st.total+int(n) > limitOr(rd.MaxCommandLen, resp.DefaultMaxCommandLen) {
			return true
		}
		end := st.pos + len(line) + int(n) + 2
		if end > len(data) {
			return false
		}
		if data[end-2] != '\r' || data[end-1] != '\n' {
			return true // the reader's error
		}
		st.pos, st.total, st.left = end, st.total+int(n), st.left-1
		if st.left == 0 {
			return true
		}
	}
}

func limitOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// next parses the next command. more reports that data ends inside it
// (or at its start): nothing was consumed from offset consumed() on, and
// cmd.Size is what the reader charged for the part it parsed (to give
// back). Any other error is the stream's end for this connection.
func (f *framer) next() (cmd resp.Command, more bool, err error) {
	cmd, err = f.rd.ReadCommand()
	if errors.Is(err, errWouldBlock) {
		return cmd, true, nil
	}
	return cmd, false, err
}

// loopState is a client's state in a loop (owned by the loop goroutine,
// but queued and inReady, guarded by loop.mu).
type loopState struct {
	fd         int32
	in         []byte  // bytes received, not parsed yet: the start of a command, or the commands after a stopped batch
	q          []*call // unwritten replies, in request order
	qHead      int
	out        *bytebufferpool.ByteBuffer // replies not yet written (nil: none)
	outSince   time.Time
	blocked    bool // the socket did not take all of out: not read until it does
	readable   bool // epoll said readable and no read saw the end of the data since
	hup        bool // the peer closed or the socket failed: read until EOF or an error
	eof        bool // the socket is not read again: the commands received run, their replies are written, then it closes
	dead       bool // the socket failed: no more writes
	closeAfter bool // a reply that closes the connection was queued
	touched    bool
	stallCl    *call // an asynchronous call waiting for an in-flight slot
	slotWait   bool  // a goroutine waits for stallCl's slot
	slotGot    atomic.Bool
	stallCmd   [][]byte  // a command waiting for room in the ordering map
	stallSize  int       // its request bytes
	moveData   []byte    // non-nil: move to the goroutine path with these bytes first
	lastRead   time.Time // the last bytes received, or the last scan that found it busy: IdleTimeout's clock
	partSince  time.Time // since when the rest of in's command is awaited: RequestTimeout's clock (zero: none)
	scan       frameScan // how far in's command was checked
	killed     atomic.Bool
	moved      atomic.Bool // handed to the goroutine path
	queued     bool        // on the loop's ready list (guarded by loop.mu)
}

// prefixReader reads pre, then the connection (deadlineReader).
type prefixReader struct {
	pre []byte
	c   *client
}

func (r *prefixReader) Read(p []byte) (int, error) {
	if len(r.pre) > 0 {
		n := copy(p, r.pre)
		r.pre = r.pre[n:]
		return n, nil
	}
	return deadlineReader{r.c}.Read(p)
}

// dropOut gives the output buffer back.
func (ls *loopState) dropOut() {
	if ls.out != nil {
		putBatch(ls.out)
		ls.out = nil
	}
}
