package respserver

import (
	"sync/atomic"
	"time"

	"github.com/valyala/bytebufferpool"
)

// loopState is a client's state in a loop (owned by the loop goroutine,
// but queued and inReady, guarded by loop.mu).
type loopState struct {
	fd         int32
	in         []byte  // bytes received, not parsed yet: the start of a command, or the commands after a stopped batch
	q          []*Call // unwritten replies, in request order
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
	stallCl    *Call // an asynchronous call waiting for an in-flight slot
	slotWait   bool  // a goroutine waits for stallCl's slot
	slotGot    atomic.Bool
	stallCmd   [][]byte  // a command waiting for room in the ordering map
	stallSize  int       // its request bytes
	moveData   []byte    // non-nil: move to the goroutine path with these bytes first
	lastRead   time.Time // the last bytes received, or the last scan that found it busy: IdleTimeout's clock
	partSince  time.Time // since when the rest of in's command is awaited: RequestTimeout's clock (zero: none)
	scan       FrameScan // how far in's command was checked
	killed     atomic.Bool
	moved      atomic.Bool // handed to the goroutine path
	queued     bool        // on the loop's ready list (guarded by loop.mu)
}

// prefixReader reads pre, then the connection (deadlineReader).
type prefixReader struct {
	pre []byte
	c   *Conn
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
		PutBatch(ls.out)
		ls.out = nil
	}
}
