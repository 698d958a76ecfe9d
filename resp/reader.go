package resp

import (
	"bufio"
	"errors"
	"io"
	"strconv"
)

// Default limits of a [Reader].
const (
	// DefaultMaxBulkLen is the largest accepted bulk string, in bytes (512 MiB, as Redis).
	DefaultMaxBulkLen = 512 << 20
	// DefaultMaxArrayLen is the largest accepted aggregate, in elements.
	DefaultMaxArrayLen = 1 << 20
	// DefaultMaxDepth is the deepest accepted nesting of aggregates.
	DefaultMaxDepth = 32
	// DefaultBufferSize is the size of the buffer NewReader allocates, in bytes.
	DefaultBufferSize = 16 << 10
)

var errNoSource = errors.New("resp: Reader has no source (use NewReader)")

// Reader decodes replies from a byte stream. It is not safe for concurrent use.
// Set the limits before the first read; zero means the default.
type Reader struct {
	// MaxBulkLen bounds bulk strings and long lines, in bytes (default [DefaultMaxBulkLen]).
	MaxBulkLen int
	// MaxArrayLen bounds aggregates, in elements (default [DefaultMaxArrayLen]).
	MaxArrayLen int
	// MaxDepth bounds aggregate nesting (default [DefaultMaxDepth]).
	MaxDepth int

	br    *bufio.Reader
	own   *bufio.Reader // buffer r allocated itself (never a caller's), reused by Reset
	bytes []byte        // arena for payloads, reset on each ReadReply
	elems []Reply       // arena for aggregate elements, reset on each ReadReply
}

// NewReader returns a Reader reading from rd. If rd is already a
// *bufio.Reader it is used directly, else one of [DefaultBufferSize] wraps it.
func NewReader(rd io.Reader) *Reader {
	r := &Reader{}
	r.Reset(rd)
	return r
}

// NewReaderSize returns a Reader with a buffer of at least size bytes.
func NewReaderSize(rd io.Reader, size int) *Reader {
	r := &Reader{br: bufio.NewReaderSize(rd, size)}
	if r.br != rd {
		r.own = r.br
	}
	return r
}

// Reset discards any buffered data and makes r read from rd, keeping limits
// and arenas (and the buffer when rd is not a *bufio.Reader).
func (r *Reader) Reset(rd io.Reader) {
	if br, ok := rd.(*bufio.Reader); ok {
		r.br = br
		return
	}
	// Reuse only a buffer r allocated: resetting a caller's *bufio.Reader
	// would redirect it to rd behind the caller's back.
	if r.own == nil {
		r.own = bufio.NewReaderSize(rd, DefaultBufferSize)
	} else {
		r.own.Reset(rd)
	}
	r.br = r.own
}

// Buffered returns the number of bytes that can be read without touching
// the underlying reader.
func (r *Reader) Buffered() int { return r.br.Buffered() }

// ReadReply reads one complete reply. The result aliases r's buffers and is
// valid until the next call. Server error replies are returned as a Reply of
// type [TypeError] with a nil error; the error result is reserved for I/O
// errors (io.EOF before a reply starts, io.ErrUnexpectedEOF inside one) and
// protocol errors (matching [ErrProtocol]). A reply over a limit
// (MaxBulkLen, MaxArrayLen, MaxDepth) is read to its end and dropped: the
// error matches [ErrTooLarge] and the next call reads the next reply, so
// one oversized reply fails one request, not the connection. After any
// other error the stream position is undefined: close the connection.
func (r *Reader) ReadReply() (Reply, error) {
	if r.br == nil {
		return Reply{}, errNoSource
	}
	r.bytes = r.bytes[:0]
	r.elems = r.elems[:0]
	rep, err := r.read(0)
	if err != nil {
		return Reply{}, err
	}
	return rep, nil
}

func (r *Reader) maxBulk() int {
	if r.MaxBulkLen > 0 {
		return r.MaxBulkLen
	}
	return DefaultMaxBulkLen
}

func (r *Reader) maxArray() int {
	if r.MaxArrayLen > 0 {
		return r.MaxArrayLen
	}
	return DefaultMaxArrayLen
}

func (r *Reader) maxDepth() int {
	if r.MaxDepth > 0 {
		return r.MaxDepth
	}
	return DefaultMaxDepth
}

func (r *Reader) read(depth int) (Reply, error) {
	// first: nothing of this reply consumed yet, so EOF is a clean io.EOF.
	first := depth == 0
	for {
		line, err := r.readLine(first)
		if err != nil {
			return Reply{}, err
		}
		if len(line) == 0 {
			return Reply{}, protoErr("empty line", nil)
		}
		t, body := Type(line[0]), line[1:]
		if depth > 0 && (t == TypeSimpleString || t == TypeError || t == TypeBigNumber || t == TypeDouble) {
			// Inside an aggregate the next read may reuse the bufio buffer:
			// copy line payloads into the arena so earlier elements survive.
			body = append(r.grabBytes(len(body))[:0], body...)
		}
		switch t {
		case TypeSimpleString, TypeError, TypeBigNumber:
			return Reply{Type: t, Str: body}, nil
		case TypeInteger:
			n, ok := parseInt(body)
			if !ok {
				return Reply{}, protoErr("invalid integer", body)
			}
			return Reply{Type: t, Int: n}, nil
		case TypeNull:
			if len(body) != 0 {
				return Reply{}, protoErr("invalid null", body)
			}
			return Reply{Type: TypeNull, Int: 1}, nil
		case TypeBoolean:
			return readBool(body)
		case TypeDouble:
			return readDouble(body)
		case TypeBulkString, TypeBlobError, TypeVerbatim:
			return r.readBulk(t, body)
		case TypeArray, TypeSet, TypePush, TypeMap:
			return r.readAggregate(t, body, depth)
		case '|': // attribute: parse and drop it, then read the reply it annotates
			if _, err := r.readAggregate(TypeMap, body, depth); err != nil {
				if errors.Is(err, ErrTooLarge) {
					// The attribute was dropped: drop the reply it annotates.
					if serr := r.skip(1); serr != nil {
						return Reply{}, serr
					}
				}
				return Reply{}, err
			}
			first = false // EOF after an attribute truncates the reply
			continue
		default:
			return Reply{}, protoErr("unknown reply type", line)
		}
	}
}

// readLine returns the next line without its CRLF. The slice aliases the
// bufio buffer (or the byte arena for lines longer than the buffer).
func (r *Reader) readLine(first bool) ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return r.readLongLine(line)
	}
	if err != nil {
		if err == io.EOF && (!first || len(line) > 0) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, protoErr("line not terminated by CRLF", line)
	}
	return line[:len(line)-2], nil
}

func (r *Reader) readLongLine(part []byte) ([]byte, error) {
	start := len(r.bytes)
	r.bytes = append(r.bytes, part...)
	// A header (a length, a count) is never dropped under MaxBulkLen: its
	// payload or elements would then be read as the next replies. One this
	// long is no valid length; only its first bytes (what its error
	// quotes) and its last two (its CRLF) are kept, so that it is refused
	// as a reader with a larger buffer refuses it, in bounded memory.
	header := isHeader(Type(part[0]))
	trim := func() {
		if n := len(r.bytes); header && n-start > headerKeep+2 {
			r.bytes[start+headerKeep], r.bytes[start+headerKeep+1] = r.bytes[n-2], r.bytes[n-1]
			r.bytes = r.bytes[:start+headerKeep+2]
		}
	}
	trim()
	for {
		if !header && len(r.bytes)-start > r.maxBulk() {
			r.bytes = r.bytes[:start]
			if err := r.discardLine(); err != nil {
				return nil, err
			}
			return nil, limitErr("line exceeds MaxBulkLen")
		}
		more, err := r.br.ReadSlice('\n')
		r.bytes = append(r.bytes, more...)
		trim()
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		line := r.bytes[start:]
		if line[len(line)-2] != '\r' {
			return nil, protoErr("line not terminated by CRLF", line)
		}
		return line[:len(line)-2], nil
	}
}

// headerKeep is how much of a header line longer than the reader's
// buffer is kept: more than any valid length (the type, 20 digits) and
// than the 32 bytes an error quotes.
const headerKeep = 40

func readBool(body []byte) (Reply, error) {
	if len(body) == 1 {
		switch body[0] {
		case 't':
			return Reply{Type: TypeBoolean, Int: 1}, nil
		case 'f':
			return Reply{Type: TypeBoolean}, nil
		}
	}
	return Reply{}, protoErr("invalid boolean", body)
}

func readDouble(body []byte) (Reply, error) {
	f, err := strconv.ParseFloat(string(body), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return Reply{}, protoErr("invalid double", body)
	}
	return Reply{Type: TypeDouble, Float: f, Str: body}, nil
}

func (r *Reader) readBulk(t Type, body []byte) (Reply, error) {
	n, ok := parseInt(body)
	if !ok || n < -1 {
		if len(body) == 1 && body[0] == '?' {
			return Reply{}, protoErr("streamed strings are not supported", body)
		}
		return Reply{}, protoErr("invalid bulk length", body)
	}
	if n == -1 {
		if t != TypeBulkString {
			return Reply{}, protoErr("invalid bulk length", body)
		}
		return Reply{Type: TypeNull}, nil
	}
	if n > int64(r.maxBulk()) {
		if err := r.discard(n + 2); err != nil {
			return Reply{}, err
		}
		return Reply{}, limitErr("bulk length " + strconv.FormatInt(n, 10) + " exceeds MaxBulkLen")
	}
	size := int(n) + 2
	buf := r.grabBytes(size)
	if _, err := io.ReadFull(r.br, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Reply{}, err
	}
	if buf[size-2] != '\r' || buf[size-1] != '\n' {
		return Reply{}, protoErr("bulk string not terminated by CRLF", buf[size-2:])
	}
	return Reply{Type: t, Str: buf[: size-2 : size-2]}, nil
}

// grabBytes returns n bytes of the arena; earlier grabs stay valid.
func (r *Reader) grabBytes(n int) []byte {
	if cap(r.bytes)-len(r.bytes) < n {
		c := 2 * cap(r.bytes)
		if c < n+512 {
			c = n + 512
		}
		r.bytes = make([]byte, 0, c)
	}
	l := len(r.bytes)
	r.bytes = r.bytes[:l+n]
	return r.bytes[l : l+n : l+n]
}

func (r *Reader) grabElems(n int) []Reply {
	if cap(r.elems)-len(r.elems) < n {
		c := 2 * cap(r.elems)
		if c < n+16 {
			c = n + 16
		}
		r.elems = make([]Reply, 0, c)
	}
	l := len(r.elems)
	r.elems = r.elems[:l+n]
	s := r.elems[l : l+n : l+n]
	clear(s)
	return s
}

func (r *Reader) readAggregate(t Type, body []byte, depth int) (Reply, error) {
	n, ok := parseInt(body)
	if !ok || n < -1 {
		if len(body) == 1 && body[0] == '?' {
			return Reply{}, protoErr("streamed aggregates are not supported", body)
		}
		return Reply{}, protoErr("invalid aggregate length", body)
	}
	if n == -1 {
		if t != TypeArray {
			return Reply{}, protoErr("invalid aggregate length", body)
		}
		return Reply{Type: TypeNull}, nil
	}
	count := n
	if t == TypeMap {
		count *= 2
	}
	if n > int64(r.maxArray()) {
		if err := r.skip(count); err != nil {
			return Reply{}, err
		}
		return Reply{}, limitErr("aggregate length " + strconv.FormatInt(n, 10) + " exceeds MaxArrayLen")
	}
	if depth+1 > r.maxDepth() {
		if err := r.skip(count); err != nil {
			return Reply{}, err
		}
		return Reply{}, limitErr("nesting exceeds MaxDepth")
	}
	// Do not trust a large header: allocating it up front at every nesting
	// level would let a few bytes of input claim gigabytes. Beyond
	// maxPreallocElems the slice grows as elements actually arrive.
	var elems []Reply
	if count <= maxPreallocElems {
		elems = r.grabElems(int(count))[:0]
	} else {
		elems = make([]Reply, 0, maxPreallocElems)
	}
	for int64(len(elems)) < count {
		e, err := r.read(depth + 1)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			if errors.Is(err, ErrTooLarge) {
				// The element was dropped whole: drop its siblings too,
				// so the stream stays at the next reply.
				if serr := r.skip(count - int64(len(elems)) - 1); serr != nil {
					return Reply{}, serr
				}
			}
			return Reply{}, err
		}
		elems = append(elems, e)
	}
	return Reply{Type: t, Int: n, Elems: elems}, nil
}

// skip reads and drops n replies without storing them, iteratively (no
// recursion, however deep the nesting). A line longer than the buffer is
// gathered as read gathers it, so that what skip accepts or refuses does
// not depend on the buffer's size.
func (r *Reader) skip(n int64) error {
	for n > 0 {
		n--
		line, err := r.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			mark := len(r.bytes)
			long, err := r.readLongLine(line)
			switch {
			case err == nil:
				n, err = r.skipHeader(long, n)
			case errors.Is(err, ErrTooLarge):
				err = nil // a simple reply over MaxBulkLen: dropped whole, as skipping it would
			}
			r.bytes = r.bytes[:mark]
			if err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return eofIn(err)
		}
		if len(line) < 3 || line[len(line)-2] != '\r' {
			return protoErr("line not terminated by CRLF", line)
		}
		if n, err = r.skipHeader(line[:len(line)-2], n); err != nil {
			return err
		}
	}
	return nil
}

// isHeader reports whether a reply of type t starts with a length or a
// count line.
func isHeader(t Type) bool {
	switch t {
	case TypeBulkString, TypeBlobError, TypeVerbatim, TypeArray, TypeSet, TypePush, TypeMap, '|':
		return true
	}
	return false
}

// skipHeader is skip's step for one reply's first line (without its
// CRLF), n replies still to drop after it: it drops a bulk reply's
// payload, and returns n grown by an aggregate's elements.
func (r *Reader) skipHeader(line []byte, n int64) (int64, error) {
	t, body := Type(line[0]), line[1:]
	switch t {
	case TypeSimpleString, TypeError, TypeBigNumber, TypeInteger, TypeNull, TypeBoolean, TypeDouble:
	case TypeBulkString, TypeBlobError, TypeVerbatim:
		m, ok := parseInt(body)
		if !ok || m < -1 {
			return n, protoErr("invalid bulk length", body)
		}
		if m >= 0 {
			if err := r.discard(m + 2); err != nil {
				return n, err
			}
		}
	case TypeArray, TypeSet, TypePush, TypeMap, '|':
		m, ok := parseInt(body)
		if !ok || m < -1 || m > 1<<40 {
			return n, protoErr("invalid aggregate length", body)
		}
		if t == TypeMap || t == '|' {
			m *= 2
		}
		if t == '|' {
			m++ // the reply the attribute annotates
		}
		if m > 0 {
			if n > 1<<60 {
				return n, protoErr("aggregate too large to skip", body)
			}
			n += m
		}
	default:
		return n, protoErr("unknown reply type", line)
	}
	return n, nil
}

// discard drops n bytes of the stream.
func (r *Reader) discard(n int64) error {
	for n > 0 {
		k, err := r.br.Discard(int(min(n, 1<<30)))
		n -= int64(k)
		if err != nil {
			return eofIn(err)
		}
	}
	return nil
}

// discardLine drops the stream up to and including the next '\n'.
func (r *Reader) discardLine() error {
	for {
		_, err := r.br.ReadSlice('\n')
		if err == nil {
			return nil
		}
		if err != bufio.ErrBufferFull {
			return eofIn(err)
		}
	}
}

func eofIn(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// maxPreallocElems is the largest aggregate whose elements are reserved in
// the arena before they are read.
const maxPreallocElems = 1024

// parseInt parses a decimal int64 without allocating.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	neg := false
	if b[0] == '-' || b[0] == '+' {
		neg = b[0] == '-'
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<63-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	if !neg {
		if n > 1<<63-1 {
			return 0, false
		}
		return int64(n), true
	}
	return -int64(n), true
}
