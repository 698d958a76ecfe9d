package resp

import (
	"bytes"
	"strconv"
)

// Type is a RESP reply type, named by its leading byte.
type Type byte

// The reply types. RESP2 nil bulk strings and nil arrays decode as [TypeNull].
const (
	TypeSimpleString Type = '+'
	TypeError        Type = '-'
	TypeInteger      Type = ':'
	TypeBulkString   Type = '$'
	TypeArray        Type = '*'
	TypeNull         Type = '_'
	TypeDouble       Type = ','
	TypeBoolean      Type = '#'
	TypeBlobError    Type = '!'
	TypeVerbatim     Type = '='
	TypeBigNumber    Type = '('
	TypeMap          Type = '%'
	TypeSet          Type = '~'
	TypePush         Type = '>'
)

// String returns the type's name.
func (t Type) String() string {
	switch t {
	case TypeSimpleString:
		return "simple-string"
	case TypeError:
		return "error"
	case TypeInteger:
		return "integer"
	case TypeBulkString:
		return "bulk-string"
	case TypeArray:
		return "array"
	case TypeNull:
		return "null"
	case TypeDouble:
		return "double"
	case TypeBoolean:
		return "boolean"
	case TypeBlobError:
		return "blob-error"
	case TypeVerbatim:
		return "verbatim-string"
	case TypeBigNumber:
		return "big-number"
	case TypeMap:
		return "map"
	case TypeSet:
		return "set"
	case TypePush:
		return "push"
	}
	return "type(" + strconv.Quote(string(rune(t))) + ")"
}

// Reply is one decoded reply. Which fields are set depends on Type:
//
//   - simple string, error, bulk string, blob error, verbatim string, big
//     number, double: Str holds the payload (for verbatim strings including
//     the "txt:" format prefix);
//   - integer: Int; boolean: Int is 1 or 0; double: also Float;
//   - null: nothing (Int is 1 when it came as RESP3 "_", 0 for RESP2 nils);
//   - array, set, push: Elems; map: Elems holds keys and values alternately.
//
// A Reply returned by [Reader.ReadReply] aliases the reader's buffers and is
// valid until the next ReadReply; [Reply.Clone] makes an independent copy.
type Reply struct {
	Type  Type
	Int   int64
	Float float64
	Str   []byte
	Elems []Reply
}

// IsOK reports whether r is the simple string "OK".
func (r Reply) IsOK() bool {
	return r.Type == TypeSimpleString && len(r.Str) == 2 && r.Str[0] == 'O' && r.Str[1] == 'K'
}

// IsNull reports whether r is a nil (RESP2 nil bulk/array or RESP3 null).
func (r Reply) IsNull() bool { return r.Type == TypeNull }

// IsError reports whether the server replied with an error (simple or blob).
func (r Reply) IsError() bool { return r.Type == TypeError || r.Type == TypeBlobError }

// HasErrorPrefix reports whether r is an error reply whose code is prefix
// (e.g. "NOSCRIPT"), without allocating.
func (r Reply) HasErrorPrefix(prefix string) bool {
	return r.IsError() && HasErrorPrefix(r.Str, prefix)
}

// Err returns r as an [*Error] if it is an error reply, else nil.
func (r Reply) Err() error {
	if !r.IsError() {
		return nil
	}
	return &Error{Msg: string(r.Str)}
}

// Text returns the payload of a string-like reply as a string ("" otherwise).
// Integers are formatted in decimal.
func (r Reply) Text() string {
	if r.Type == TypeInteger {
		return strconv.FormatInt(r.Int, 10)
	}
	return string(r.Str)
}

// Clone returns a deep copy of r that does not alias any reader buffer.
func (r Reply) Clone() Reply {
	c := r
	if r.Str != nil {
		c.Str = bytes.Clone(r.Str)
	}
	if r.Elems != nil {
		c.Elems = make([]Reply, len(r.Elems))
		for i, e := range r.Elems {
			c.Elems[i] = e.Clone()
		}
	}
	return c
}

// Equal reports whether r and o encode the same reply.
func (r Reply) Equal(o Reply) bool {
	if r.Type != o.Type || len(r.Elems) != len(o.Elems) {
		return false
	}
	switch r.Type {
	case TypeInteger, TypeBoolean:
		if r.Int != o.Int {
			return false
		}
	case TypeNull:
	default:
		if !bytes.Equal(r.Str, o.Str) {
			return false
		}
	}
	for i := range r.Elems {
		if !r.Elems[i].Equal(o.Elems[i]) {
			return false
		}
	}
	return true
}

// String renders r for debugging and error messages.
func (r Reply) String() string {
	switch r.Type {
	case TypeInteger:
		return "(integer) " + strconv.FormatInt(r.Int, 10)
	case TypeNull:
		return "(nil)"
	case TypeError, TypeBlobError:
		return "(error) " + string(r.Str)
	case TypeBoolean:
		if r.Int != 0 {
			return "(true)"
		}
		return "(false)"
	case TypeArray, TypeSet, TypePush, TypeMap:
		s := "["
		for i, e := range r.Elems {
			if i > 0 {
				s += " "
			}
			s += e.String()
		}
		return s + "]"
	}
	return strconv.Quote(string(r.Str))
}
