package resp

import (
	"math"
	"strconv"
)

// AppendArrayHeader appends an aggregate header "*n\r\n" to dst.
func AppendArrayHeader(dst []byte, n int) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\r', '\n')
}

// AppendBulk appends b as a bulk string "$len\r\nb\r\n" to dst.
func AppendBulk(dst, b []byte) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(b)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, b...)
	return append(dst, '\r', '\n')
}

// AppendBulkString appends s as a bulk string to dst, like [AppendBulk].
func AppendBulkString(dst []byte, s string) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

// AppendBulkInt appends the decimal text of n as a bulk string to dst
// (how Redis expects numeric arguments such as a PX value).
func AppendBulkInt(dst []byte, n int64) []byte {
	var tmp [20]byte
	num := strconv.AppendInt(tmp[:0], n, 10)
	return AppendBulk(dst, num)
}

// AppendCommand appends a command (an array of bulk strings) to dst.
func AppendCommand(dst []byte, args ...[]byte) []byte {
	dst = AppendArrayHeader(dst, len(args))
	for _, a := range args {
		dst = AppendBulk(dst, a)
	}
	return dst
}

// AppendCommandStrings appends a command given as strings to dst.
func AppendCommandStrings(dst []byte, args ...string) []byte {
	dst = AppendArrayHeader(dst, len(args))
	for _, a := range args {
		dst = AppendBulkString(dst, a)
	}
	return dst
}

// AppendReply appends the RESP encoding of r to dst. RESP3 types are written
// as RESP3; use it to relay a reply verbatim or to build test input.
// A [TypeNull] reply is written as the RESP2 nil bulk string "$-1\r\n"
// unless r.Int is 1, which selects the RESP3 null "_\r\n".
func AppendReply(dst []byte, r Reply) []byte {
	switch r.Type {
	case TypeSimpleString, TypeError, TypeBigNumber:
		dst = append(dst, byte(r.Type))
		dst = append(dst, r.Str...)
		return append(dst, '\r', '\n')
	case TypeInteger:
		dst = append(dst, ':')
		dst = strconv.AppendInt(dst, r.Int, 10)
		return append(dst, '\r', '\n')
	case TypeDouble:
		dst = append(dst, ',')
		if r.Str != nil {
			dst = append(dst, r.Str...)
		} else {
			dst = appendFloat(dst, r.Float)
		}
		return append(dst, '\r', '\n')
	case TypeBoolean:
		if r.Int != 0 {
			return append(dst, "#t\r\n"...)
		}
		return append(dst, "#f\r\n"...)
	case TypeNull:
		if r.Int == 1 {
			return append(dst, "_\r\n"...)
		}
		return append(dst, "$-1\r\n"...)
	case TypeBulkString, TypeBlobError, TypeVerbatim:
		dst = append(dst, byte(r.Type))
		dst = strconv.AppendInt(dst, int64(len(r.Str)), 10)
		dst = append(dst, '\r', '\n')
		dst = append(dst, r.Str...)
		return append(dst, '\r', '\n')
	case TypeArray, TypeSet, TypePush:
		dst = append(dst, byte(r.Type))
		dst = strconv.AppendInt(dst, int64(len(r.Elems)), 10)
		dst = append(dst, '\r', '\n')
		for _, e := range r.Elems {
			dst = AppendReply(dst, e)
		}
		return dst
	case TypeMap:
		dst = append(dst, '%')
		dst = strconv.AppendInt(dst, int64(len(r.Elems)/2), 10)
		dst = append(dst, '\r', '\n')
		for _, e := range r.Elems {
			dst = AppendReply(dst, e)
		}
		return dst
	}
	return dst
}

func appendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(dst, "inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-inf"...)
	case math.IsNaN(f):
		return append(dst, "nan"...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64)
}
