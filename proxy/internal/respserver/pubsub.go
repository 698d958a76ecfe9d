package respserver

import (
	"strings"

	"github.com/tidwall/redcon"

	"github.com/redlock-dev/redlock/resp"
)

// Pub/sub for lock wake-ups. A client library that waits for a lock
// subscribes to the lock's channel and tries again when the holder's
// unlock publishes on it (Redisson: redisson_lock__channel:{name}). The
// proxy serves SUBSCRIBE and SSUBSCRIBE (and their UNSUBSCRIBE) on those
// channels only, and publishes itself when a lock it serves is released:
// messages never come from clients or masters. A wake-up is an
// optimisation — the waiter also retries at the lock's TTL —, so a
// subscriber whose queue is full loses it (counted).

// Which channels a client may subscribe to is not the server's to know:
// the handler gives it (subscriptions: the Redisson room's wake-up
// channels, redisson.go).

// subscriptions are the channels a client may subscribe to: those allowed
// names, and what says which in a refusal.
type subscriptions struct {
	allowed func(ch string) bool
	what    string
}

// Bounds of a connection's subscriptions and of its undelivered messages.
const (
	MaxSubscriptions = 1024
	MaxChannelLen    = 1024
	MsgQueueLen      = 128
)

// msgQueue carries a subscribed connection's pushed frames (messages and
// its subscription replies) to its writer, in order.
type msgQueue struct {
	ch chan []byte
}

// subState is a connection's subscriptions (reader-owned).
type subState struct {
	q     *msgQueue
	chans map[string]bool // channel → subscribed with SSUBSCRIBE
}

// Deliver queues a message frame of msg on ch for the connection, unless
// it takes no messages (not subscribed), or its queue or the memory
// budget is full (dropped). The hub calls it under its lock: it never
// blocks.
func (c *Conn) Deliver(ch, msg string, shard bool) (queued, dropped bool) {
	q := c.msgs.Load()
	if q == nil {
		return false, false
	}
	kind := "message"
	if shard {
		kind = "smessage"
	}
	var frame []byte
	if c.resp3.Load() {
		frame = resp.AppendPushHeader(nil, 3) // out-of-band in RESP3
	} else {
		frame = redcon.AppendArray(nil, 3)
	}
	frame = redcon.AppendBulkString(frame, kind)
	frame = redcon.AppendBulkString(frame, ch)
	frame = redcon.AppendBulkString(frame, msg)
	if !c.hold(int64(len(frame)), true) {
		return false, true
	}
	select {
	case q.ch <- frame:
		return true, false
	default:
		c.hold(-int64(len(frame)), false)
		return false, true
	}
}

// subscribed reports whether the connection is in subscribed mode.
func (c *Conn) subscribed() bool { return c.sub != nil && len(c.sub.chans) > 0 }

// cmdSubscribe answers SUBSCRIBE / SSUBSCRIBE channel [channel ...].
func (c *Conn) cmdSubscribe(args [][]byte) *Call {
	shard := Lower(args[0]) == "ssubscribe"
	for _, a := range args[1:] {
		if len(a) > MaxChannelLen || !c.s.subs.allowed(string(a)) {
			return ErrCall("ERR redlock proxy: " + strings.ToUpper(Lower(args[0])) + " serves " + c.s.subs.what + " only")
		}
	}
	if !c.subscribed() {
		// Replies from now on go through the message queue, after every
		// reply already queued: wait until those are written. Also on a
		// SUBSCRIBE after the last UNSUBSCRIBE (the state is kept): its
		// frame overtook the replies still queued (TestResubscribeOrder).
		if !c.waitWritten() {
			return ErrReply(MsgShuttingDown, true)
		}
	}
	if c.sub == nil {
		c.sub = &subState{q: &msgQueue{ch: make(chan []byte, MsgQueueLen)}, chans: map[string]bool{}}
		c.msgs.Store(c.sub.q)
		// The writer may be waiting for a call with no queue to watch: an
		// empty call makes it look again.
		c.queue(&Call{done: closedChan})
	}
	kind := "subscribe"
	if shard {
		kind = "ssubscribe"
	}
	// The whole command or nothing: a client reads one confirmation per
	// channel or one error (as Redis's ACL refusal), never a few
	// confirmations and then an error it would take for the next
	// command's reply. The bound and the charge are checked first.
	fresh := make(map[string]struct{}, len(args)-1) // SUBSCRIBE is rare: a map, not a quadratic scan
	cost := int64(0)
	for _, a := range args[1:] {
		if _, ok := c.sub.chans[string(a)]; ok {
			continue
		}
		if _, ok := fresh[string(a)]; !ok {
			fresh[string(a)] = struct{}{}
			cost += subCost(string(a))
		}
	}
	added := len(fresh)
	if len(c.sub.chans)+added > MaxSubscriptions {
		return c.pushFrame(redcon.AppendError(nil, "ERR redlock proxy: more than 1024 subscriptions on one connection"))
	}
	// A subscription is kept as long as the connection: charged to
	// MaxClientMemory (not to the connection's backpressure).
	if added > 0 && !c.s.charge(cost) {
		return c.pushFrame(redcon.AppendError(nil, MsgMemory))
	}
	for _, a := range args[1:] {
		ch := string(a)
		if _, ok := c.sub.chans[ch]; !ok {
			c.sub.chans[ch] = shard
			c.s.hub.Add(ch, c, shard)
		}
		if cl := c.pushFrame(c.subFrame(nil, kind, ch, len(c.sub.chans))); cl.closeAfter {
			return cl
		}
	}
	return &Call{done: closedChan}
}

// subFrame is subFrame in the connection's protocol: a push in RESP3.
func (c *Conn) subFrame(dst []byte, kind, ch string, n int) []byte {
	if !c.resp3.Load() {
		return subFrame(dst, kind, ch, n)
	}
	start := len(dst)
	dst = subFrame(dst, kind, ch, n)
	dst[start] = '>'
	if n < 0 {
		return append(dst[:start], toRESP3(dst[start:])...)
	}
	return dst
}

// subFrame appends the (un)subscribe reply [kind, ch, n] to dst (ch ""
// with n < 0: a nil channel, count -n-1).
func subFrame(dst []byte, kind, ch string, n int) []byte {
	dst = redcon.AppendArray(dst, 3)
	dst = redcon.AppendBulkString(dst, kind)
	if n < 0 {
		dst = redcon.AppendNull(dst)
		n = -n - 1
	} else {
		dst = redcon.AppendBulkString(dst, ch)
	}
	return redcon.AppendInt(dst, int64(n))
}

// cmdUnsubscribe answers UNSUBSCRIBE / SUNSUBSCRIBE [channel ...] (none:
// every channel of that kind).
func (c *Conn) cmdUnsubscribe(args [][]byte) *Call {
	shard := Lower(args[0]) == "sunsubscribe"
	kind := "unsubscribe"
	if shard {
		kind = "sunsubscribe"
	}
	var chans []string
	if len(args) > 1 {
		for _, a := range args[1:] {
			chans = append(chans, string(a))
		}
	} else if c.sub != nil {
		for ch, sh := range c.sub.chans {
			if sh == shard {
				chans = append(chans, ch)
			}
		}
	}
	if c.sub == nil {
		// Never subscribed: the replies are ordinary ones (pushes in RESP3).
		if len(chans) == 0 {
			return Reply(c.subFrame(nil, kind, "", -1))
		}
		var out []byte
		for _, ch := range chans {
			out = c.subFrame(out, kind, ch, 0)
		}
		return Reply(out)
	}
	if len(chans) == 0 {
		return c.pushFrame(c.subFrame(nil, kind, "", -len(c.sub.chans)-1))
	}
	for _, ch := range chans {
		c.unsubscribe(ch)
		if cl := c.pushFrame(c.subFrame(nil, kind, ch, len(c.sub.chans))); cl.closeAfter {
			return cl
		}
	}
	return &Call{done: closedChan}
}

func (c *Conn) unsubscribe(ch string) {
	if _, ok := c.sub.chans[ch]; !ok {
		return
	}
	c.s.charge(-subCost(ch))
	delete(c.sub.chans, ch)
	c.s.hub.Remove(ch, c)
}

// unsubscribeAll leaves every channel (RESET, and the connection's end).
func (c *Conn) unsubscribeAll() {
	if c.sub == nil {
		return
	}
	for ch := range c.sub.chans {
		c.unsubscribe(ch)
	}
}

// pushFrame queues a reply frame of subscribed mode behind the messages
// already queued, and returns the empty call dispatch hands on (or, when
// the connection is closing, one that closes it).
func (c *Conn) pushFrame(frame []byte) *Call {
	c.hold(int64(len(frame)), false)
	select {
	case c.sub.q.ch <- frame:
		return &Call{done: closedChan}
	case <-c.wdone:
	case <-c.wfail:
	case <-c.s.baseCtx.Done():
	}
	c.hold(-int64(len(frame)), false)
	return &Call{done: closedChan, closeAfter: true}
}

// pingSubscribed answers PING in subscribed mode: ["pong", message].
func (c *Conn) pingSubscribed(args [][]byte) *Call {
	if c.resp3.Load() {
		// RESP3 has no subscribed mode's PING: an ordinary reply, behind
		// the frames queued.
		if len(args) > 1 {
			return c.pushFrame(redcon.AppendBulk(nil, args[1]))
		}
		return c.pushFrame([]byte("+PONG\r\n"))
	}
	frame := redcon.AppendArray(nil, 2)
	frame = redcon.AppendBulkString(frame, "pong")
	if len(args) > 1 {
		frame = redcon.AppendBulk(frame, args[1])
	} else {
		frame = redcon.AppendBulkString(frame, "")
	}
	return c.pushFrame(frame)
}

// waitWritten waits until the writer wrote every queued reply; false when
// the connection or the server is closing.
func (c *Conn) waitWritten() bool {
	return c.waitWriter(func() bool { return c.unwritten.Load() == 0 })
}

// waitWriter waits, woken each time the writer takes something, until
// done holds; false when the connection or the server is closing.
func (c *Conn) waitWriter(done func() bool) bool {
	for !done() {
		select {
		case <-c.drained:
		case <-c.wdone:
			return false
		case <-c.wfail:
			return false
		case <-c.s.baseCtx.Done():
			return false
		}
	}
	return true
}

// subscribedAllowed lists the commands of subscribed mode (RESP2).
var subscribedAllowed = map[string]bool{
	"subscribe": true, "ssubscribe": true, "unsubscribe": true, "sunsubscribe": true,
	"psubscribe": true, "punsubscribe": true, "ping": true, "quit": true, "reset": true,
}

// framesWritten waits, after the connection left subscribed mode, until
// the writer took every queued frame, so that a later reply follows them;
// false when the connection or the server is closing.
func (c *Conn) framesWritten() bool {
	return c.waitWriter(func() bool { return len(c.sub.q.ch) == 0 })
}

// subCost is what a subscription to ch is charged: its name, kept in the
// connection's and the hub's maps, and their entries.
func subCost(ch string) int64 { return int64(len(ch) + 256) }

// charge adds n bytes (n < 0: gives them back) of state the server keeps
// beyond a request's life (subscriptions) to
// what MaxClientMemory bounds; a growth that would pass it fails (counted
// as a memory refusal) and changes nothing.
func (s *Server) charge(n int64) bool {
	if now := s.mem.Add(n); n > 0 && now > int64(s.cfg.MaxClientMemory) {
		s.mem.Add(-n)
		s.memRefused.Add(1)
		return false
	}
	return true
}
