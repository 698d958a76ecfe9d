package redisson

import (
	crand "crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/resp"
)

// Wake-ups across proxies. A Redisson hold lives on the masters, so its
// waiter may be subscribed through one proxy while the unlock goes through
// another (proxies behind a load balancer). The proxy that ends a hold
// wakes its own subscribers at once and also publishes the lock's channel
// on every master (proxy.Config.WakeChannel); every proxy keeps one subscription
// per member to that channel and wakes its subscribers of the lock's
// channel when the message arrives. The message is "<id> <channel>", the
// id random per wake-up: a proxy delivers each id once (its own
// publication, and the copies every other member delivers, are dropped).
// A message is a hint from a master (which anyone with PUBLISH on the
// masters can send): it is bounded and checked like a client's SUBSCRIBE,
// and costs a waiter one early retry of its tryLock at most.

// ChannelPrefix is the prefix of a lock's wake-up channel, the only
// channels a client may subscribe to (and RWChannelPrefix, a read-write
// lock's).
const ChannelPrefix = "redisson_lock__channel"

// MaxChannelLen bounds a wake-up channel's name.
const MaxChannelLen = 1024

// Channel reports whether ch is a lock's wake-up channel: the predicate
// of the channels the proxy's clients may subscribe to.
func Channel(ch string) bool {
	return len(ch) <= MaxChannelLen && (strings.HasPrefix(ch, ChannelPrefix) || strings.HasPrefix(ch, RWChannelPrefix))
}

// DefaultWakeChannel is the masters' channel over which proxies tell each
// other that a Redisson hold ended (Config.WakeChannel).
const DefaultWakeChannel = "redlock:proxy:wakeups"

// wakeIDLen is the length of a wake-up's id (hex).
const wakeIDLen = 16

// maxWakeSeen bounds the ids a proxy remembers to drop duplicates.
const maxWakeSeen = 4096

// wakeRelay is a server's side of the wake-ups across proxies.
type wakeRelay struct {
	s    *Locks
	subs []*conn.Subscriber

	mu   sync.Mutex
	seen map[string]struct{} // ids delivered or sent (guarded by mu)
	ring [maxWakeSeen]string // seen's ids, oldest first from next (guarded by mu)
	next int                 // guarded by mu
}

// startWakeRelay subscribes to the wake channel on every member: a
// standalone master's address, a cluster member's first seed (a cluster
// delivers PUBLISH on every node).
func (s *Locks) startWakeRelay() {
	if s.cfg.LocalWakeups {
		return
	}
	w := &wakeRelay{s: s, seen: map[string]struct{}{}}
	ec := s.eng.Config()
	addrs := append([]string(nil), ec.Addrs...)
	for _, m := range ec.Clusters {
		if len(m.Seeds) > 0 {
			addrs = append(addrs, m.Seeds[0])
		}
	}
	for _, a := range addrs {
		w.subs = append(w.subs, conn.Subscribe(a, ec.Conn, s.cfg.WakeChannel, w.received))
	}
	s.wakes = w
}

// close stops the subscriptions.
func (w *wakeRelay) close() {
	for _, sub := range w.subs {
		sub.Close()
	}
}

// remember records id; false when it was seen already.
func (w *wakeRelay) remember(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.seen[id]; ok {
		return false
	}
	if old := w.ring[w.next]; old != "" {
		delete(w.seen, old)
	}
	w.ring[w.next] = id
	w.next = (w.next + 1) % maxWakeSeen
	w.seen[id] = struct{}{}
	return true
}

// received handles one message of the wake channel (on a subscriber's
// goroutine; payload is valid during the call only).
func (w *wakeRelay) received(payload []byte) {
	id, ch, ok := strings.Cut(string(payload), " ")
	msg := "0"
	if len(id) == wakeIDLen+2 && id[wakeIDLen] == ':' && (id[wakeIDLen+1] == '0' || id[wakeIDLen+1] == '1') {
		id, msg = id[:wakeIDLen], id[wakeIDLen+1:]
	}
	if !ok || len(id) != wakeIDLen || !w.remember(id) {
		return
	}
	s := w.s
	if !strings.HasPrefix(ch, s.cfg.KeyPrefix) {
		return // another tenant's lock
	}
	local := ch[len(s.cfg.KeyPrefix):]
	if !Channel(local) {
		return
	}
	s.publish(local, msg)
}

// Wake wakes the waiters of a Redisson lock whose hold ended: this
// proxy's subscribers of its channel (ch, as on the masters: with the
// key prefix) at once, and other proxies' through the masters.
func (s *Locks) Wake(ch string) { s.wakeMsg(ch, "0") }

// wakeMsg is wake with Redisson's message: "0" (an unlock: one waiter
// retries) or "1" (a read-write lock's write unlock: every waiter
// retries). Across proxies the message rides on the id ("<id>:1"; a bare
// id is "0", which proxies of earlier releases also send).
func (s *Locks) wakeMsg(ch, msg string) {
	s.publish(s.unprefixed([]byte(ch)), msg)
	w := s.wakes
	if w == nil {
		return
	}
	var raw [wakeIDLen / 2]byte
	crand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	w.remember(id)
	tag := id
	if msg != "0" {
		tag += ":" + msg
	}
	cmd := resp.AppendCommandStrings(nil, "PUBLISH", s.cfg.WakeChannel, tag+" "+ch)
	deadline := time.Now().Add(s.tr.MasterTimeout(0))
	for i := range len(s.eng.Masters()) {
		w.send(i, cmd, deadline)
	}
}

// send enqueues cmd on member i's first connection without waiting for
// the reply (a hint: a failure only leaves other proxies' waiters to
// retry at the lock's TTL).
func (w *wakeRelay) send(i int, cmd []byte, deadline time.Time) {
	if cs := w.s.tr.Conns(i); len(cs) > 0 {
		cs[0].Do(conn.Request{Cmd: cmd, Deadline: deadline, Callback: discard{}})
	}
}

// discard is a callback that ignores the reply.
type discard struct{}

func (discard) Complete(uint64, resp.Reply, error) {}
