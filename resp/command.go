package resp

import (
	"bufio"
	"io"
	"strconv"
)

// Default limits of a [CommandReader] (Redis's own where Redis has one).
const (
	// DefaultMaxArgs is the most arguments one command may have.
	DefaultMaxArgs = 1 << 20
	// DefaultMaxInlineLen bounds an inline command line, in bytes (64 KiB,
	// Redis's PROTO_INLINE_MAX_SIZE).
	DefaultMaxInlineLen = 64 << 10
	// DefaultMaxCommandLen bounds one command's arguments in total, in bytes.
	DefaultMaxCommandLen = 512 << 20
)

// Reasons of the [ProtocolError]s a [CommandReader] returns, in Redis's
// words where Redis has them (Redis prefixes them with "Protocol error: ").
const (
	ReasonMultibulkLen = "invalid multibulk length"
	ReasonBulkLen      = "invalid bulk length"
	ReasonInlineLen    = "too big inline request"
	ReasonCommandLen   = "request too large"
	ReasonMemory       = "request buffer memory limit reached"
	ReasonQuotes       = "unbalanced quotes in request"
)

// argHeaderSize is what one argument's slice header costs, charged
// through Grow with the command (Command.Size includes it).
const argHeaderSize = 24

// maxCountLine bounds a "*n" or "$n" header line: an int64 needs 20 digits.
const maxCountLine = 32

// Command is one client command read by [CommandReader.ReadCommand].
type Command struct {
	// Args are the command name and its arguments. They live in a buffer
	// of their own that the caller owns: the reader never touches it again.
	Args [][]byte
	// Size is what the reader asked [CommandReader.Grow] for: the capacity
	// of that buffer plus 24 bytes per argument (the Args headers). The caller gives it back to its budget once
	// it no longer needs Args (also after an error: then Args is nil and
	// Size covers the partial command).
	Size int
}

// CommandReader reads client commands — RESP arrays of bulk strings, or
// inline commands (space-separated words on one line, with Redis's
// quoting) — from an untrusted byte stream. Every length is checked
// against a limit before it is used, and a command's buffer grows only as
// its bytes arrive, so a header that claims a huge length costs nothing
// until the bytes are sent. It is not safe for concurrent use. The limits
// may be changed between calls (a server tightens them before a client has
// authenticated); zero means the default.
type CommandReader struct {
	// MaxArgs bounds the arguments of one command (default [DefaultMaxArgs]).
	MaxArgs int
	// MaxBulkLen bounds one argument, in bytes (default [DefaultMaxBulkLen]).
	MaxBulkLen int
	// MaxInlineLen bounds an inline command line, in bytes (default
	// [DefaultMaxInlineLen]).
	MaxInlineLen int
	// MaxCommandLen bounds the sum of one command's argument lengths, in
	// bytes (default [DefaultMaxCommandLen]).
	MaxCommandLen int
	// Grow, if set, is asked before the buffer of the command being read
	// grows by n bytes. When it returns false the read fails with a
	// [ProtocolError] matching [ErrTooLarge] (reason [ReasonMemory]).
	Grow func(n int) bool
	// Empty makes ReadCommand return an empty command (Args nil) instead
	// of skipping it: a caller that parses again from a command's start
	// (Reset) sees where every command ends.
	Empty bool

	br   *bufio.Reader
	buf  []byte  // the command being read
	offs []int   // argument boundaries in buf: start, end, start, end, ...
	crlf [2]byte // an argument's CRLF (here, not on the heap: readBulk)
}

// NewCommandReader returns a CommandReader reading from rd through a
// buffer of size bytes (at least 16).
func NewCommandReader(rd io.Reader, size int) *CommandReader {
	return &CommandReader{br: bufio.NewReaderSize(rd, size)}
}

// Reset makes r read from rd, dropping whatever it buffered and any
// partly read command (an event loop parses each client's bytes with one
// reader: it resets it to the client's bytes, and after a read that ended
// inside a command — rd's error — parses that command again from its
// start once more bytes arrived). Limits and Grow stay.
func (r *CommandReader) Reset(rd io.Reader) {
	r.br.Reset(rd)
	r.buf, r.offs = nil, r.offs[:0]
}

// Buffered returns the number of bytes read from the source but not yet
// parsed: a pipelined client's next commands.
func (r *CommandReader) Buffered() int { return r.br.Buffered() }

// Wait blocks until at least one byte of the next command can be read
// (a server sets a deadline for the rest of the request after it), or the
// source fails.
func (r *CommandReader) Wait() error {
	_, err := r.br.Peek(1)
	return err
}

func limit(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// ReadCommand reads the next command. Empty commands ("*0", "*-1", blank
// inline lines) are skipped, as Redis does. The error is io.EOF when the
// stream ends between commands, io.ErrUnexpectedEOF inside one, another
// I/O error, or a [*ProtocolError] (matching [ErrProtocol], and
// [ErrTooLarge] when a limit was hit); after an error the stream position
// is undefined and the connection should be closed.
func (r *CommandReader) ReadCommand() (Command, error) {
	for {
		args, err := r.readOne()
		if err != nil {
			cmd := Command{Size: cap(r.buf)}
			r.buf, r.offs = nil, r.offs[:0]
			return cmd, err
		}
		if args > 0 {
			// The argument headers cost memory too: charge them, so that
			// a thousand empty arguments are not free.
			if r.Grow != nil && !r.Grow(argHeaderSize*args) {
				cmd := Command{Size: cap(r.buf)}
				r.buf, r.offs = nil, r.offs[:0]
				return cmd, limitErr(ReasonMemory)
			}
			cmd := Command{Args: make([][]byte, args), Size: cap(r.buf) + argHeaderSize*args}
			for i := range cmd.Args {
				cmd.Args[i] = r.buf[r.offs[2*i]:r.offs[2*i+1]:r.offs[2*i+1]]
			}
			r.buf, r.offs = nil, r.offs[:0]
			return cmd, nil
		}
		if r.Empty {
			return Command{}, nil
		}
	}
}

// readOne reads one command into buf/offs and returns its argument count
// (0 for an empty command).
func (r *CommandReader) readOne() (int, error) {
	r.buf, r.offs = r.buf[:0], r.offs[:0]
	b, err := r.br.Peek(1)
	if err != nil {
		return 0, err // io.EOF between commands stays io.EOF
	}
	if b[0] != '*' {
		return r.readInline()
	}
	line, err := r.countLine()
	if err != nil {
		return 0, err
	}
	n, ok := ParseInt(line[1:])
	if !ok {
		return 0, protoErr(ReasonMultibulkLen, line)
	}
	if n <= 0 {
		return 0, nil
	}
	if n > int64(limit(r.MaxArgs, DefaultMaxArgs)) {
		return 0, &ProtocolError{Reason: ReasonMultibulkLen, Data: string(line), Limit: true}
	}
	total := 0
	for i := 0; i < int(n); i++ {
		if err := r.readBulk(&total); err != nil {
			return 0, err
		}
	}
	return int(n), nil
}

// countLine reads a "*n" or "$n" header line, without its CRLF.
func (r *CommandReader) countLine() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull || len(line) > maxCountLine {
		return nil, protoErr("too big count string", line)
	}
	if err != nil {
		return nil, eofInside(err)
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, protoErr("line not terminated by CRLF", line)
	}
	return line[:len(line)-2], nil
}

func eofInside(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readBulk reads one "$len\r\n<bytes>\r\n" argument into buf.
func (r *CommandReader) readBulk(total *int) error {
	line, err := r.countLine()
	if err != nil {
		return err
	}
	if line[0] != '$' {
		return protoErr("expected '$', got '"+string(line[0])+"'", line)
	}
	n, ok := ParseInt(line[1:])
	if !ok || n < 0 {
		return protoErr(ReasonBulkLen, line)
	}
	if n > int64(limit(r.MaxBulkLen, DefaultMaxBulkLen)) {
		return &ProtocolError{Reason: ReasonBulkLen, Data: string(line), Limit: true}
	}
	if *total += int(n); *total > limit(r.MaxCommandLen, DefaultMaxCommandLen) {
		return limitErr(ReasonCommandLen)
	}
	start := len(r.buf)
	for left := int(n); left > 0; {
		if len(r.buf) == cap(r.buf) {
			// Grow towards what this argument still needs, never beyond:
			// the bytes have to arrive before they cost memory.
			if err := r.grow(min(left, 256), left+argSlack); err != nil {
				return err
			}
		}
		k, err := r.br.Read(r.buf[len(r.buf):min(cap(r.buf), len(r.buf)+left)])
		r.buf = r.buf[:len(r.buf)+k]
		left -= k
		if err != nil {
			return eofInside(err)
		}
	}
	if _, err := io.ReadFull(r.br, r.crlf[:]); err != nil {
		return eofInside(err)
	}
	if r.crlf != [2]byte{'\r', '\n'} {
		return protoErr("bulk string not terminated by CRLF", r.crlf[:])
	}
	r.offs = append(r.offs, start, len(r.buf))
	return nil
}

// argSlack is how far past the current argument's end buf may grow, so
// that many small arguments do not reallocate once each.
const argSlack = 256

// minCommandBuf is a command buffer's first size when its arguments may
// need it: a whole lock command (SET key token NX PX ms) in one allocation.
const minCommandBuf = 128

// grow makes room for at least need more bytes in buf, doubling but to at
// most upto more bytes, asking Grow first.
func (r *CommandReader) grow(need, upto int) error {
	c := max(min(2*cap(r.buf), len(r.buf)+upto), len(r.buf)+need, min(len(r.buf)+upto, minCommandBuf))
	if r.Grow != nil && !r.Grow(c-cap(r.buf)) {
		return limitErr(ReasonMemory)
	}
	nb := make([]byte, len(r.buf), c)
	copy(nb, r.buf)
	r.buf = nb
	return nil
}

// readInline reads an inline command: one line (LF or CRLF) of words.
// The line is collected in buf (bounded, charged) and split in place: a
// word is never longer than the text it was written as.
func (r *CommandReader) readInline() (int, error) {
	maxLen := limit(r.MaxInlineLen, DefaultMaxInlineLen)
	for {
		part, err := r.br.ReadSlice('\n')
		if len(r.buf)+len(part) > maxLen+2 { // +2: the line's own CRLF
			return 0, limitErr(ReasonInlineLen)
		}
		if cap(r.buf)-len(r.buf) < len(part) {
			if gerr := r.grow(len(part), len(part)); gerr != nil {
				return 0, gerr
			}
		}
		r.buf = append(r.buf, part...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return 0, eofInside(err)
		}
		break
	}
	line := r.buf[:len(r.buf)-1]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	words, offs, err := splitInline(line[:0], r.offs[:0], line, limit(r.MaxArgs, DefaultMaxArgs))
	r.buf, r.offs = words, offs
	if err != nil {
		return 0, err
	}
	return len(offs) / 2, nil
}

// splitInline splits line into words the way Redis's sdssplitargs does:
// separated by spaces; "double quotes" with \n \r \t \b \a \\ \" \xHH
// escapes; 'single quotes' with \' only. A closing quote must be followed
// by a space or the end of the line. It appends the words to dst and their
// boundaries to offs.
func splitInline(dst []byte, offs []int, line []byte, maxArgs int) ([]byte, []int, error) {
	i := 0
	for {
		if len(offs) >= 2*maxArgs && i < len(line) {
			// One more word would be over the limit (checked before it
			// is collected, however many a long line holds).
			for i < len(line) && isSpace(line[i]) {
				i++
			}
			if i < len(line) {
				return dst, offs, &ProtocolError{Reason: ReasonMultibulkLen, Limit: true}
			}
		}
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			return dst, offs, nil
		}
		start := len(dst)
		inDQ, inSQ := false, false
		for done := false; !done; {
			switch {
			case inDQ:
				if i == len(line) {
					return dst, offs, protoErr(ReasonQuotes, line)
				}
				c := line[i]
				switch {
				case c == '\\' && i+3 < len(line) && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
					dst = append(dst, unhex(line[i+2])<<4|unhex(line[i+3]))
					i += 3
				case c == '\\' && i+1 < len(line):
					i++
					switch line[i] {
					case 'n':
						dst = append(dst, '\n')
					case 'r':
						dst = append(dst, '\r')
					case 't':
						dst = append(dst, '\t')
					case 'b':
						dst = append(dst, '\b')
					case 'a':
						dst = append(dst, '\a')
					default:
						dst = append(dst, line[i])
					}
				case c == '"':
					if !closes(line, i) {
						return dst, offs, protoErr(ReasonQuotes, line)
					}
					done = true
				default:
					dst = append(dst, c)
				}
				i++
			case inSQ:
				if i == len(line) {
					return dst, offs, protoErr(ReasonQuotes, line)
				}
				c := line[i]
				switch {
				case c == '\\' && i+1 < len(line) && line[i+1] == '\'':
					dst = append(dst, '\'')
					i++
				case c == '\'':
					if !closes(line, i) {
						return dst, offs, protoErr(ReasonQuotes, line)
					}
					done = true
				default:
					dst = append(dst, c)
				}
				i++
			default:
				if i == len(line) {
					done = true
					break
				}
				switch c := line[i]; {
				case isSpace(c):
					done = true
				case c == '"':
					inDQ = true
				case c == '\'':
					inSQ = true
				default:
					dst = append(dst, c)
				}
				i++
			}
		}
		offs = append(offs, start, len(dst))
	}
}

// closes reports whether the quote at line[i] may close a word: it must be
// followed by a space or the end of the line.
func closes(line []byte, i int) bool { return i+1 == len(line) || isSpace(line[i+1]) }

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// ParseInt parses b as Redis parses an integer argument (string2ll): an
// optional '-', then digits with no leading zero (except "0" itself), no
// '+', no spaces, within int64. It does not allocate.
func ParseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || b[0] < '1' || b[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b), 10, 64) // no allocation: the conversion does not escape
	if err != nil {
		return 0, false
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v), true
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}
