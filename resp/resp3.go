package resp

import "strconv"

// RESP3 encodings for a server that speaks RESP3 to clients that ask for
// it (HELLO 3) and RESP2 to the others: the headers RESP2 has no form of,
// and [ToRESP3], which turns replies built in RESP2 into RESP3.

// AppendMapHeader appends a RESP3 map header "%n\r\n" (n key-value pairs
// follow) to dst.
func AppendMapHeader(dst []byte, n int) []byte {
	dst = append(dst, '%')
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\r', '\n')
}

// AppendPushHeader appends a RESP3 push header ">n\r\n" (out-of-band data
// such as a pub/sub message: n elements follow) to dst.
func AppendPushHeader(dst []byte, n int) []byte {
	dst = append(dst, '>')
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\r', '\n')
}

// AppendNull3 appends the RESP3 null "_\r\n" to dst.
func AppendNull3(dst []byte) []byte { return append(dst, '_', '\r', '\n') }

// maxRESP3Depth bounds the nesting ToRESP3 follows.
const maxRESP3Depth = 64

// AppendRESP3 appends src, a sequence of whole replies in RESP2 (RESP3
// types pass unchanged), to dst in RESP3: each nil bulk string "$-1\r\n"
// and nil array "*-1\r\n", at any depth, becomes the RESP3 null
// "_\r\n"; every other byte is kept, so what it appends is never longer
// than src. When src is not a sequence of whole replies (or nests deeper
// than 64), it appends src unchanged and reports false.
func AppendRESP3(dst, src []byte) ([]byte, bool) {
	if !wellFormed(src) {
		return append(dst, src...), false
	}
	for r := 0; r < len(src); {
		end := lineEnd(src, r)
		switch t := src[r]; t {
		case '$', '*', '%', '~', '>', '!', '=':
			n, _ := parseInt(src[r+1 : end]) // wellFormed read it: "-1", "-01", "+0" ...
			if n == -1 && (t == '$' || t == '*') {
				dst = append(dst, '_', '\r', '\n')
				r = end + 2
				continue
			}
			if t == '$' || t == '!' || t == '=' {
				end += 2 + int(n) // the payload, before its CRLF
			}
		}
		dst = append(dst, src[r:end+2]...)
		r = end + 2
	}
	return dst, true
}

// lineEnd returns the index of the CR that ends the line starting at i
// (wellFormed checked there is one).
func lineEnd(b []byte, i int) int {
	for b[i] != '\r' {
		i++
	}
	return i
}

// wellFormed reports whether b is a sequence of whole replies, nested at
// most maxRESP3Depth deep, whose header lines ToRESP3 can read.
func wellFormed(b []byte) bool {
	var stack [maxRESP3Depth]int64 // elements left in each open aggregate
	depth := 0
	for i := 0; i < len(b); {
		j := i
		for j < len(b) && b[j] != '\r' && b[j] != '\n' {
			j++
		}
		if j+1 >= len(b) || b[j] != '\r' || b[j+1] != '\n' || j == i {
			return false
		}
		t, body := b[i], b[i+1:j]
		i = j + 2
		var agg int64
		switch t {
		case '+', '-', ':', ',', '#', '(':
		case '_':
			if len(body) != 0 {
				return false
			}
		case '$', '!', '=':
			n, ok := parseInt(body)
			if !ok || n < -1 || (n == -1 && t != '$') {
				return false
			}
			if n >= 0 {
				if n > int64(len(b)-i)-2 || b[i+int(n)] != '\r' || b[i+int(n)+1] != '\n' {
					return false
				}
				i += int(n) + 2
			}
		case '*', '%', '~', '>':
			n, ok := parseInt(body)
			if !ok || n < -1 || (n == -1 && t != '*') || n > int64(len(b)) {
				return false // every element takes at least 3 bytes
			}
			if t == '%' {
				n *= 2
			}
			agg = n
		default:
			return false
		}
		// This element fills a place in the aggregate that holds it.
		if depth > 0 {
			stack[depth-1]--
		}
		if agg > 0 {
			if depth == maxRESP3Depth {
				return false
			}
			stack[depth] = agg
			depth++
		}
		for depth > 0 && stack[depth-1] == 0 {
			depth--
		}
	}
	return depth == 0
}
