package clockfront

import (
	"time"

	"github.com/redlock-dev/redlock/resp"
)

// appendShifted appends TIME's reply rep moved by off to dst, as Redis
// writes it (seconds and microseconds as bulk strings, no padding). It
// returns dst unchanged and false if rep is not a TIME reply (an error,
// say), which is then forwarded as it came. off counts in whole
// microseconds (truncated toward zero); a total before the epoch is
// clamped to 0.
func appendShifted(dst []byte, rep resp.Reply, off time.Duration) ([]byte, bool) {
	if rep.Type != resp.TypeArray || len(rep.Elems) != 2 ||
		rep.Elems[0].Type != resp.TypeBulkString || rep.Elems[1].Type != resp.TypeBulkString {
		return dst, false
	}
	sec, ok1 := resp.ParseInt(rep.Elems[0].Str)
	usec, ok2 := resp.ParseInt(rep.Elems[1].Str)
	if !ok1 || !ok2 || sec < 0 || usec < 0 || usec >= 1e6 {
		return dst, false
	}
	total := max(sec*1e6+usec+off.Microseconds(), 0)
	dst = resp.AppendArrayHeader(dst, 2)
	dst = resp.AppendBulkInt(dst, total/1e6)
	return resp.AppendBulkInt(dst, total%1e6), true
}
