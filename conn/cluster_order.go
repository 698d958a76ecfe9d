package conn

import (
	"net"

	"github.com/redlock-dev/redlock/resp"
)

// Order of one slot's requests across redirects.
//
// A Conn applies requests in the order Do accepted them; the engine's
// rules rest on it (an extension's success raises a lock's deadline only
// when it is the latest one sent: the masters apply them in that order).
// A Cluster re-sends a request answered -MOVED or -ASK to the tail of the
// new node's queue, so without more a request routed there directly — by
// a map reloaded meanwhile — could be applied before an earlier request
// still on its way through the old node: Extend(8s) then Extend(30s), the
// 30s one applied first, left the member holding the key for 8s while the
// engine counted 30s (TestClusterExtendOrderAcrossMoved, engine).
//
// The rule: a request of a slot is sent to the slot's node only when every
// earlier request of the slot that has no outcome yet is on that node's
// queue (and so ahead of it); otherwise it is held, and sent when they
// are, in the order Do accepted them. Redirected requests move from queue
// to queue in the order the old node answers them, so a slot that moves
// once keeps its order. It is not kept when the owner changes again while
// a request is being redirected — also when the source gives the slot up
// before the target takes it: the target, still importing, bounces a
// request back to the source, then serves a later one itself. While a slot is stable this costs a count per
// request; a redirect holds the slot's later requests for one round trip.
// A request held behind a node that stopped answering waits for the
// earlier requests' deadlines (or the session's end), then goes.

// slotOrder is the order state of one slot (guarded by Cluster.omu).
type slotOrder struct {
	pending []nodeCount // nodes whose queues hold requests of the slot not yet answered
	held    []*redirect // requests waiting for pending to be on the slot's node only
}

// nodeCount is how many requests of a slot one node has not answered.
type nodeCount struct {
	c *Conn
	n int
}

// add changes c's count by d.
func (s *slotOrder) add(c *Conn, d int) {
	for i := range s.pending {
		if s.pending[i].c == c {
			s.pending[i].n += d
			if s.pending[i].n == 0 {
				last := len(s.pending) - 1
				s.pending[i] = s.pending[last]
				s.pending[last] = nodeCount{}
				s.pending = s.pending[:last]
			}
			return
		}
	}
	s.pending = append(s.pending, nodeCount{c, d})
}

// onlyAt reports whether every pending request of the slot is on c's
// queue (or none is pending).
func (s *slotOrder) onlyAt(c *Conn) bool {
	return len(s.pending) == 0 || len(s.pending) == 1 && s.pending[0].c == c
}

// admit returns the node to send r to now, or nil when r is held (sent
// by release). r must have a slot.
func (cl *Cluster) admit(r *redirect) (*Conn, error) {
	cl.omu.Lock()
	defer cl.omu.Unlock()
	c, err := cl.route(r.slot)
	if err != nil {
		return nil, err
	}
	s := cl.order[r.slot]
	if s == nil {
		s = &slotOrder{}
		cl.order[r.slot] = s
	}
	if len(s.held) > 0 || !s.onlyAt(c) {
		s.held = append(s.held, r)
		return nil, nil
	}
	s.add(c, 1)
	r.at = c
	return c, nil
}

// resending counts r on c's queue, before r is re-sent there: until r
// left its old node's count (resent), nothing routed to c may be sent
// ahead of it. It returns the old node, for resent. (r may be answered
// by c, and even redirected again, before resent runs.)
func (cl *Cluster) resending(r *redirect, c *Conn) (old *Conn) {
	if r.slot < 0 {
		return nil
	}
	cl.omu.Lock()
	defer cl.omu.Unlock()
	cl.order[r.slot].add(c, 1)
	old, r.at = r.at, c
	return old
}

// resent records that r, counted on c by resending, is on c's queue now
// (sent: it leaves old's count) or was not re-sent (it stays on old's).
func (cl *Cluster) resent(r *redirect, old, c *Conn, sent bool) {
	if r.slot < 0 {
		return
	}
	cl.omu.Lock()
	s := cl.order[r.slot]
	if !sent {
		s.add(c, -1)
		r.at = old
		cl.omu.Unlock()
		return
	}
	s.add(old, -1)
	failed := cl.releaseLocked(r.slot, s)
	cl.omu.Unlock()
	cl.failHeld(failed)
}

// answered records that r has its outcome (or was never sent: Do failed).
func (cl *Cluster) answered(r *redirect) {
	if r.slot < 0 {
		return
	}
	cl.omu.Lock()
	if r.at == nil {
		cl.omu.Unlock()
		return
	}
	s := cl.order[r.slot]
	s.add(r.at, -1)
	r.at = nil
	failed := cl.releaseLocked(r.slot, s)
	cl.omu.Unlock()
	cl.failHeld(failed)
}

// releaseLocked sends held requests of slot, in order, while every
// pending one is on the slot's node. It returns those that could not be
// sent (their err set), to be completed by failHeld without omu.
func (cl *Cluster) releaseLocked(slot int, s *slotOrder) (failed []*redirect) {
	n := 0
	for ; n < len(s.held); n++ {
		r := s.held[n]
		c, err := cl.route(slot)
		if err == nil && !s.onlyAt(c) {
			break
		}
		if err == nil {
			r.host, _, _ = net.SplitHostPort(c.Addr())
			req := r.req
			req.Callback, req.Tag = r, 0
			s.add(c, 1)
			r.at = c
			if err = c.Do(req); err != nil {
				s.add(c, -1)
				r.at = nil
			}
		}
		if err != nil {
			r.err = err
			failed = append(failed, r)
		}
	}
	if n > 0 {
		rest := copy(s.held, s.held[n:])
		clear(s.held[rest:])
		s.held = s.held[:rest]
	}
	return failed
}

// failHeld completes held requests that could not be sent.
func (cl *Cluster) failHeld(failed []*redirect) {
	for _, r := range failed {
		cl.inflight.Add(-1)
		r.cb.Complete(r.tag, resp.Reply{}, r.err)
	}
}
