package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

// Holding is what [Engine.Holder] read.
type Holding struct {
	// Token is the token a quorum of masters holds for the key ([Lock.Token];
	// a [Reentrant]'s begins with its owner and a colon), "" when the key
	// is free.
	Token string
	// Remaining is how long a quorum of masters will still hold the token
	// after the read, as their clocks count: the quorum-th longest PTTL
	// among the masters that hold it, less the time the read took. The
	// holder's own validity is shorter by its drift allowance.
	Remaining time.Duration
}

// Holder reads who holds key, as a quorum read: every master is asked
// for the key's value and PTTL in one step. The key is held by a token
// when a quorum of masters answered with it, and free when so few masters
// hold any one token that even the masters that did not answer could not
// make a quorum of it. Otherwise — too few answers to tell — it returns an
// error matching [ErrUnavailable] (a [*QuorumError] with op "holder"). A
// master in restart quarantine does not count as an answer: it may have
// lost the key. A master that has not answered within nine tenths of
// what is left of ctx's deadline counts as failed. The read is a
// snapshot: the holder may change as soon as it returns.
func (e *Engine) Holder(ctx context.Context, key string) (Holding, error) {
	if key == "" {
		return Holding{}, errEmptyKey
	}
	key = e.cfg.KeyPrefix + key
	cmd := scripts.Holder.AppendEvalSha(nil, 1, 0)
	cmd = resp.AppendBulkString(cmd, key)
	t1 := time.Now()
	// Within ctx's deadline: the masters that did not answer by then count
	// as failures and the read decides from the others.
	timeout := withinDeadline(ctx, transport{e}.MasterTimeout(0))
	reps, err := e.broadcast(ctx, key, timeout, scripts.Holder, cmd, func(resp.Reply) bool { return true }, nil)
	if err != nil {
		return Holding{}, err
	}
	elapsed := time.Since(t1)
	qe := &QuorumError{Op: "holder", Total: e.n, Quorum: e.q}
	counts := map[string]int{}
	best := ""
	for i, r := range reps {
		rerr := r.Err
		if rerr == nil && r.Reply.IsError() {
			rerr = r.Reply.Err()
		}
		if rerr == nil && !r.Reply.IsNull() && (r.Reply.Type != resp.TypeArray || len(r.Reply.Elems) != 2 || r.Reply.Elems[0].Type != resp.TypeBulkString || r.Reply.Elems[1].Type != resp.TypeInteger) {
			rerr = fmt.Errorf("engine: unexpected reply %s", r.Reply)
		}
		if rerr != nil {
			qe.Masters = append(qe.Masters, &MasterError{Master: i, Addr: e.addrs[i], Err: rerr})
			continue
		}
		qe.Answered++
		if r.Reply.IsNull() {
			continue
		}
		tok := string(r.Reply.Elems[0].Str)
		counts[tok]++
		if counts[tok] > counts[best] || best == "" {
			best = tok
		}
	}
	unanswered := e.n - qe.Answered
	if best != "" && counts[best] >= e.q {
		var left []time.Duration
		for _, r := range reps {
			if r.Err == nil && r.Reply.Type == resp.TypeArray && len(r.Reply.Elems) == 2 && string(r.Reply.Elems[0].Str) == best {
				ms := r.Reply.Elems[1].Int
				if ms < 0 { // no TTL: held until deleted
					ms = int64(e.cfg.MaxTTL / time.Millisecond)
				}
				left = append(left, time.Duration(ms)*time.Millisecond)
			}
		}
		slices.Sort(left)
		return Holding{Token: best, Remaining: max(0, left[len(left)-e.q]-elapsed)}, nil
	}
	if counts[best]+unanswered < e.q {
		return Holding{}, nil
	}
	qe.Granted = counts[best]
	qe.unavailable, qe.sentinel = true, ErrUnavailable
	return Holding{}, qe
}
