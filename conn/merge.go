package conn

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redlock-dev/redlock/resp"
)

// DefaultMergeMax is the default bound on the members of one merged call
// (see [Merge]).
const DefaultMergeMax = 32

// mergeSlack bounds how far apart the deadlines of one merged call's
// members may be: the call has its earliest member's deadline, so a
// member may time out at most this much before its own deadline.
const mergeSlack = 2 * time.Millisecond

// Merge lets a Conn send requests that each run one single-key script as
// one call of a multi-key version of the script, when several of them are
// queued for the same write. The engine merges its releases and extensions
// this way: a script call has a fixed cost on the master that one call
// shares across its keys.
//
// A member request's Cmd is "EVALSHA <Single> 1 <key> <arg>…" with exactly
// Args arguments (built with Single's [Script.AppendEvalSha]). The Conn
// holds members back only until its writer takes the next batch, which it
// does as soon as it is idle: a lone member goes out unchanged, with no
// added wait; several become one "EVALSHA <Multi> n <key>… <arg>…" whose
// array reply the Conn splits, completing each member with its own element.
//
// Order: a member is sent no earlier than the requests queued before it,
// but may be sent after requests queued after it, except those on the
// same key (see [Request.KeyHash]): one key's commands keep their order.
//
// Time: a merged call has its members' earliest deadline; members whose
// deadlines are more than 2 ms apart are not merged together. A member
// held while the writer is busy times out at its deadline like any other
// request.
type Merge struct {
	single, multi *Script
	args, max     int
	head          []byte // the members' common prefix, up to the key
}

// NewMerge returns the Merge of the single-key script single (one key,
// args arguments) into multi, which takes n keys and n×args arguments
// (member i's at ARGV[(i-1)×args+1 …]) and returns an array of n replies.
// At most max members share one call (0: [DefaultMergeMax]).
func NewMerge(single, multi *Script, args, max int) *Merge {
	if max <= 0 {
		max = DefaultMergeMax
	}
	return &Merge{single: single, multi: multi, args: args, max: max, head: single.AppendEvalSha(nil, 1, args)}
}

// member is a request held for merging.
type member struct {
	cb       Callback
	tag      uint64
	deadline time.Time
	cmd      []byte // Stable: the caller keeps it until the callback
	keyAt    int    // cmd[keyAt:argsAt] is the key's bulk string, cmd[argsAt:] the arguments'
	argsAt   int
	hash     uint64
}

// mergeList is the members of one Merge waiting for the next write.
type mergeList struct {
	m       *Merge
	members []member
	lo, hi  time.Time // the members' earliest and latest deadlines
}

// fits reports whether a member with deadline d may join l's call.
func (l *mergeList) fits(d time.Time) bool {
	if len(l.members) == 0 {
		return true
	}
	if d.IsZero() || l.lo.IsZero() {
		return d.IsZero() && l.lo.IsZero() && l.hi.IsZero()
	}
	lo, hi := l.lo, l.hi
	if d.Before(lo) {
		lo = d
	}
	if d.After(hi) {
		hi = d
	}
	return hi.Sub(lo) <= mergeSlack
}

// errBadMember is returned by Do for a member whose command does not have
// its Merge's shape.
var errBadMember = errors.New("command does not match its Merge")

// parseMember checks req against its Merge and returns the key's offsets.
func parseMember(req *Request) (keyAt, argsAt int, err error) {
	m := req.Merge
	if !req.Stable || !bytes.HasPrefix(req.Cmd, m.head) {
		return 0, 0, errBadMember
	}
	keyAt = len(m.head)
	rest := req.Cmd[keyAt:]
	i := bytes.IndexByte(rest, '\r')
	if len(rest) < 4 || rest[0] != '$' || i < 2 || i+1 >= len(rest) || rest[i+1] != '\n' {
		return 0, 0, errBadMember
	}
	n, perr := strconv.Atoi(string(rest[1:i]))
	end := i + 2 + n + 2
	if perr != nil || n < 0 || end > len(rest) || rest[end-2] != '\r' || rest[end-1] != '\n' ||
		(m.args > 0 && (end == len(rest) || rest[end] != '$')) {
		return 0, 0, errBadMember
	}
	return keyAt, keyAt + end, nil
}

// mergeLocked holds req (a member) for the next write. It reports whether
// nothing was queued for writing before: then the caller must wake the
// writer.
func (c *Conn) mergeLocked(req *Request, keyAt, argsAt int) (wake bool) {
	wake = len(c.wbuf) == 0 && c.nmerge == 0
	if c.conflictsLocked(req.KeyHash) {
		// A held member (of this Merge or another) is on the same key:
		// it goes first, so no two held members share a key and lists
		// may be written in any order.
		c.flushMergesLocked()
	}
	var l *mergeList
	for _, x := range c.merges {
		if x.m == req.Merge {
			l = x
			break
		}
	}
	if l == nil {
		l = &mergeList{m: req.Merge}
		c.merges = append(c.merges, l)
	}
	if !l.fits(req.Deadline) {
		c.emitLocked(l)
	}
	if d := req.Deadline; len(l.members) == 0 {
		l.lo, l.hi = d, d
	} else if d.Before(l.lo) {
		l.lo = d
	} else if d.After(l.hi) {
		l.hi = d
	}
	l.members = append(l.members, member{cb: req.Callback, tag: req.Tag, deadline: req.Deadline, cmd: req.Cmd, keyAt: keyAt, argsAt: argsAt, hash: req.KeyHash})
	c.nmerge++
	c.armLocked(req.Deadline)
	if req.KeyHash != 0 {
		w, b := bloomBit(req.KeyHash)
		c.bloom[w] |= b
	} else { // any key: every later request must go after it
		c.bloom = [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
	}
	if len(l.members) >= l.m.max {
		c.emitLocked(l)
	}
	return wake
}

// conflictsLocked reports whether a request on the key with hash h
// (0: unknown, maybe any key) must not overtake the held members.
func (c *Conn) conflictsLocked(h uint64) bool {
	if c.nmerge == 0 {
		return false
	}
	if h == 0 {
		return true
	}
	if w, b := bloomBit(h); c.bloom[w]&b == 0 {
		return false
	}
	for _, l := range c.merges {
		for i := range l.members {
			if l.members[i].hash == h || l.members[i].hash == 0 {
				return true
			}
		}
	}
	return false
}

// bloomBit returns the word and bit of hash h in Conn.bloom (mixed, so
// that hashes differing only in a few bits spread).
func bloomBit(h uint64) (word int, bit uint64) {
	m := h * 0x9e3779b97f4a7c15
	return int(m >> 62), 1 << (m >> 56 & 63)
}

// expireMergesLocked fails the held members whose deadline is not after
// now (appending them to fired) and returns the earliest deadline still
// queued, starting from next.
func (c *Conn) expireMergesLocked(now time.Time, fired []pending, next time.Time) ([]pending, time.Time) {
	if c.nmerge == 0 {
		return fired, next
	}
	for _, l := range c.merges {
		kept := l.members[:0]
		for _, m := range l.members {
			switch {
			case !m.deadline.IsZero() && !m.deadline.After(now):
				fired = append(fired, pending{cb: m.cb, tag: m.tag})
				c.nmerge--
				continue
			case !m.deadline.IsZero() && (next.IsZero() || m.deadline.Before(next)):
				next = m.deadline
			}
			kept = append(kept, m)
		}
		clear(l.members[len(kept):])
		l.members = kept
		if len(kept) > 0 {
			l.lo, l.hi = kept[0].deadline, kept[0].deadline
			for _, m := range kept[1:] {
				if m.deadline.Before(l.lo) {
					l.lo = m.deadline
				}
				if m.deadline.After(l.hi) {
					l.hi = m.deadline
				}
			}
		}
	}
	return fired, next
}

// flushMergesLocked moves every held member into the write buffer.
func (c *Conn) flushMergesLocked() {
	for _, l := range c.merges {
		if len(l.members) > 0 {
			c.emitLocked(l)
		}
	}
	c.bloom = [4]uint64{}
}

// emitLocked writes l's members as one request: the member itself when it
// is alone, else one call of the multi-key script.
func (c *Conn) emitLocked(l *mergeList) {
	ms := l.members
	c.nmerge -= len(ms)
	if len(ms) == 1 {
		m := &ms[0]
		c.writeLocked(&Request{Cmd: m.cmd, Deadline: m.deadline, Callback: m.cb, Tag: m.tag, Script: l.m.single, Stable: true, KeyHash: m.hash})
		clear(ms)
		l.members = ms[:0]
		return
	}
	g := groupPool.Get().(*group)
	g.m = l.m
	var deadline time.Time // the members' earliest
	for i := range ms {
		g.members = append(g.members, groupMember{cb: ms[i].cb, tag: ms[i].tag, cmd: ms[i].cmd, keyAt: ms[i].keyAt, argsAt: ms[i].argsAt, hash: ms[i].hash})
		if d := ms[i].deadline; !d.IsZero() && (deadline.IsZero() || d.Before(deadline)) {
			deadline = d
		}
	}
	c.beginBatchLocked(deadline)
	c.wbuf = g.appendCall(c.wbuf, false)
	c.wcmds += len(ms) // OnWrite counts requests: a merged call, its members
	// No Cmd: after a NOSCRIPT the reader re-encodes it from g (appendCall).
	p := c.q.push()
	p.cb, p.tag, p.deadline, p.script, p.done, p.extra, p.cmd, p.asking, p.native, p.keyHash = g, 0, deadline, l.m.multi, false, len(ms)-1, nil, false, NativeNone, 0 // several keys
	c.armLocked(deadline)
	c.grouped += len(ms) - 1
	clear(ms)
	l.members = ms[:0]
}

// failMergesLocked drops every held member, returning them to be failed.
func (c *Conn) failMergesLocked(fail []pending) []pending {
	for _, l := range c.merges {
		for _, m := range l.members {
			fail = append(fail, pending{cb: m.cb, tag: m.tag})
		}
		clear(l.members)
		l.members = l.members[:0]
	}
	c.nmerge = 0
	c.bloom = [4]uint64{}
	return fail
}

// group is the callback of one merged call: it hands each member its
// element of the array reply. It keeps the members' commands (Stable
// until their callbacks) to re-encode the call as EVAL after a NOSCRIPT
// instead of a copy of the call.
type group struct {
	m       *Merge
	members []groupMember
}

type groupMember struct {
	cb            Callback
	tag           uint64
	cmd           []byte
	keyAt, argsAt int
	hash          uint64 // the member's KeyHash (a NOSCRIPT re-send's order, resendReordersLocked)
}

// appendCall appends the merged call, as EVALSHA or (eval) as EVAL of
// the multi-key script's source, to dst.
func (g *group) appendCall(dst []byte, eval bool) []byte {
	n, multi := len(g.members), g.m.multi
	if eval {
		dst = resp.AppendArrayHeader(dst, 3+n+n*g.m.args)
		dst = resp.AppendBulkString(dst, "EVAL")
		dst = resp.AppendBulkString(dst, multi.src)
		dst = resp.AppendBulkInt(dst, int64(n))
	} else {
		dst = multi.AppendEvalSha(dst, n, n*g.m.args)
	}
	for i := range g.members {
		dst = append(dst, g.members[i].cmd[g.members[i].keyAt:g.members[i].argsAt]...)
	}
	for i := range g.members {
		dst = append(dst, g.members[i].cmd[g.members[i].argsAt:]...)
	}
	return dst
}

var groupPool = sync.Pool{New: func() any { return new(group) }}

// Complete implements Callback. A failure or an error reply is every
// member's outcome; a reply of another shape fails every member with an
// error matching resp.ErrProtocol.
func (g *group) Complete(_ uint64, r resp.Reply, err error) {
	split := err == nil && r.Type == resp.TypeArray && len(r.Elems) == len(g.members)
	if err == nil && !split && !r.IsError() {
		err = fmt.Errorf("%w: merged call of %d answered %s", resp.ErrProtocol, len(g.members), r)
		r = resp.Reply{}
	}
	for i, m := range g.members {
		if split {
			m.cb.Complete(m.tag, r.Elems[i], nil)
		} else {
			m.cb.Complete(m.tag, r, err)
		}
	}
	clear(g.members)
	g.members, g.m = g.members[:0], nil
	groupPool.Put(g)
}
