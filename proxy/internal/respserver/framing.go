package respserver

import (
	"bytes"
	"errors"

	"github.com/redlock-dev/redlock/resp"
)

// The event loop's parsing, apart from its system calls (proxy's loop_linux.go),
// so that it is the same on every platform and can be fuzzed against the
// goroutine path's reader (FuzzLoopFraming).
//
// A loop reads each ready client's bytes into one scratch buffer of
// LoopScratch bytes, behind what the client had left over (the start of a
// command whose end had not arrived), and parses them with one
// resp.CommandReader reset to those bytes: the reader and its limits are
// the goroutine path's, so every bound and protocol error is the same. A
// command that ends beyond the bytes read is parsed again from its start
// once more arrived (at most LoopScratch bytes each time); one larger than
// the scratch buffer moves its connection to the goroutine path, whose
// reader streams large arguments.

// ReadBufferSize is each goroutine-path connection's socket read buffer:
// a pipeline of small lock commands fits; larger requests grow a buffer of
// their own (counted against the client memory budget).
const ReadBufferSize = 4 << 10

// LoopScratch is the most bytes of one client a loop parses at once.
const LoopScratch = 16 << 10

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

// Framer parses commands out of byte chunks, as the event loop reads
// them: the goroutine path's reader and limits over bytes that may end
// inside a command.
type Framer struct {
	rd  *resp.CommandReader
	src loopSrc
}

// NewFramer returns a Framer with the reader's default limits.
func NewFramer() *Framer {
	f := &Framer{}
	// A small buffer: each parse from a command's start fills it anew.
	f.rd = resp.NewCommandReader(&f.src, 1<<10)
	f.rd.Empty = true // every command's end is a place to parse again from
	return f
}

// reset makes f parse data from its start.
func (f *Framer) reset(data []byte) {
	f.src = loopSrc{b: data}
	f.rd.Reset(&f.src)
}

// Reader is the reader f parses with: callers set its limits and Grow.
func (f *Framer) Reader() *resp.CommandReader { return f.rd }

// consumed is the offset in data of the next command to parse.
func (f *Framer) consumed() int { return f.src.pos - f.rd.Buffered() }

// each parses the commands of data in order and calls on with each and
// its offset in data; on returns false to stop after it. rest is the
// offset of the first byte not consumed. more reports that data ended
// inside a command (or between two): size is what the reader charged
// for its part (to give back). err is the stream's end for the
// connection (size likewise).
func (f *Framer) each(data []byte, on func(cmd resp.Command, start int) bool) (rest, size int, more bool, err error) {
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

// Parse is each for data that starts with a command whose end had not
// arrived before (partial): it first asks st whether the end may be in
// data now, so that a command trickling in is not parsed again for every
// few bytes (st resumes where it stopped: the command's headers are
// checked once each).
func (f *Framer) Parse(data []byte, partial bool, st *FrameScan, on func(cmd resp.Command, start int) bool) (rest, size int, more bool, err error) {
	if partial && !st.MayEnd(data, f.rd) {
		return 0, 0, true, nil
	}
	*st = FrameScan{}
	return f.each(data, on)
}

// FrameScan is how far the framing of a command whose end has not
// arrived was checked.
type FrameScan struct {
	pos     int  // offset of the next header to check
	left    int  // bulk strings still to come
	total   int  // the lengths of those passed
	started bool // the multibulk header was passed
}

// maxHeaderLine is the longest "*n" or "$n" line the reader accepts.
const maxHeaderLine = 32

// MayEnd reports whether data, which starts with a command, may hold its
// end — or something the reader must refuse: false only when the
// command surely goes on past data. It reads only the headers it did not
// read before.
func (st *FrameScan) MayEnd(data []byte, rd *resp.CommandReader) bool {
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
func (f *Framer) next() (cmd resp.Command, more bool, err error) {
	cmd, err = f.rd.ReadCommand()
	if errors.Is(err, errWouldBlock) {
		return cmd, true, nil
	}
	return cmd, false, err
}
