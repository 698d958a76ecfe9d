package conn

import "time"

// pending is one request waiting for its reply.
type pending struct {
	cb       Callback
	tag      uint64
	deadline time.Time
	script   *Script // set for EVALSHA requests that may need the EVAL fallback
	cmd      []byte  // the command, kept only when script != nil: own or the caller's (Request.Stable)
	own      []byte  // this slot's buffer for copies of commands
	done     bool    // callback already called (timed out); drop the reply
	extra    int     // a merged call's members beyond the first (Conn.grouped)
	asking   bool    // sent right after ASKING (Conn.doAsking): so is its EVAL fallback
	native   Native  // sent as this native command: its reply is the script's (nativeReply)
	keyHash  uint64  // Request.KeyHash (0: any key; a batch's TIME and INFO: none)
}

// queue is a FIFO ring of pending requests addressed by sequence number.
// It is not safe for concurrent use; Conn.mu guards it.
type queue struct {
	items []pending
	head  int    // index of the oldest item
	n     int    // number of items
	seq   uint64 // sequence number of items[head]
}

func (q *queue) len() int { return q.n }

// push appends an item slot and returns it for the caller to fill (every
// field but own, a buffer kept for reuse).
func (q *queue) push() *pending {
	if q.n == len(q.items) {
		q.grow()
	}
	p := &q.items[(q.head+q.n)%len(q.items)]
	q.n++
	return p
}

func (q *queue) grow() {
	size := 2 * len(q.items)
	if size == 0 {
		size = 64
	}
	items := make([]pending, size)
	for i := 0; i < q.n; i++ {
		items[i] = q.items[(q.head+i)%len(q.items)]
	}
	q.items, q.head = items, 0
}

// front returns the oldest item; the queue must not be empty.
func (q *queue) front() *pending { return &q.items[q.head] }

// pop removes the oldest item. It writes nothing into the item: the slot
// is overwritten by the push that reuses it, and leaving it untouched here
// keeps its cache line clean for that push, which runs on another CPU
// (the references it keeps until then are to callbacks and commands of
// requests already completed).
func (q *queue) pop() {
	q.head = (q.head + 1) % len(q.items)
	q.n--
	q.seq++
}

// at returns the item with sequence number s, or nil if it is not queued.
func (q *queue) at(s uint64) *pending {
	if s < q.seq || s >= q.seq+uint64(q.n) {
		return nil
	}
	return &q.items[(q.head+int(s-q.seq))%len(q.items)]
}

// end returns the sequence number the next pushed item gets.
func (q *queue) end() uint64 { return q.seq + uint64(q.n) }
