package respserver

import "sync"

// Subscriber is a connection that subscribed to channels (S: the server's
// connection type). Deliver queues msg, published on ch, for it — as a
// "smessage" when it subscribed with SSUBSCRIBE (shard) — without
// blocking: it is called under the hub's lock. It reports whether the
// message was queued, or dropped (a full queue, or no memory for it);
// neither: the connection takes no messages.
type Subscriber interface {
	comparable
	Deliver(ch, msg string, shard bool) (queued, dropped bool)
}

// Hub maps channels to their subscribed connections, and publishes on
// them. The zero value is ready to use.
//
// Publishing is the server's capability; what is published, and on which
// channels a client may subscribe, is the lock rooms'.
type Hub[S Subscriber] struct {
	mu   sync.Mutex
	subs map[string]map[S]bool // channel → subscriber → by SSUBSCRIBE (guarded by mu)
}

// Add subscribes s to ch (shard: by SSUBSCRIBE).
func (h *Hub[S]) Add(ch string, s S, shard bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = map[string]map[S]bool{}
	}
	m := h.subs[ch]
	if m == nil {
		m = map[S]bool{}
		h.subs[ch] = m
	}
	m[s] = shard
}

// Remove unsubscribes s from ch.
func (h *Hub[S]) Remove(ch string, s S) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.subs[ch]; m != nil {
		delete(m, s)
		if len(m) == 0 {
			delete(h.subs, ch)
		}
	}
}

// Publish hands msg on ch to every subscriber and returns how many queued
// it and how many dropped it. It delivers under the hub's lock, so a
// connection whose Remove returned gets no later message of that channel:
// the messages it got precede its unsubscribe reply in its queue.
func (h *Hub[S]) Publish(ch, msg string) (queued, dropped int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s, shard := range h.subs[ch] {
		q, d := s.Deliver(ch, msg, shard)
		if q {
			queued++
		}
		if d {
			dropped++
		}
	}
	return queued, dropped
}

// Channels returns the number of channels with a subscriber.
func (h *Hub[S]) Channels() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}
