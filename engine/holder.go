package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/redlock-dev/redlock/internal/enginex"
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
	// holder's own validity is shorter by its drift allowance. It is
	// [NoExpiry] when a quorum holds the token without a TTL (a key
	// written outside the engine, or leaked): it is held until deleted.
	Remaining time.Duration
}

// NoExpiry is [Holding.Remaining] (and [Leader.Remaining]) for a token a
// quorum of masters holds without a TTL, as PTTL's -1.
const NoExpiry time.Duration = -1

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
	reps, err := e.broadcast(ctx, key, timeout, scripts.Holder, cmd, anyReply, nil)
	if err != nil {
		return Holding{}, err
	}
	elapsed := time.Since(t1)
	tok, left, _, err := e.quorumHolder("holder", reps, elapsed, func(r resp.Reply) (*keyAnswer, error) {
		if r.Type != resp.TypeArray || len(r.Elems) != 2 || r.Elems[0].Type != resp.TypeBulkString || r.Elems[1].Type != resp.TypeInteger {
			return nil, fmt.Errorf("engine: unexpected reply %s", r)
		}
		return &keyAnswer{token: string(r.Elems[0].Str), pttl: r.Elems[1].Int}, nil
	})
	return Holding{Token: tok, Remaining: left}, err
}

// keyAnswer is one master's answer to a read of a lock key: the token it
// holds and its PTTL, and what else the read returned (an election's
// leader record).
type keyAnswer struct {
	token     string
	pttl      int64
	published bool // a leader record of the token came with it
	term, seq int64
	value     string
}

// quorumHolder decides a quorum read of a lock key (Holder, an
// election's Leader) from the masters' replies: the token a quorum
// holds, with how long a quorum will still hold it after the read (the
// quorum-th longest PTTL less elapsed); "" and no error when so few
// masters hold any one token that even those that did not answer could
// not make a quorum of it; else an error matching ErrUnavailable. parse
// reads a reply that is neither an error nor nil (nil: the key is free);
// its error, or a failed master's, counts as no answer — as does a
// master in restart quarantine (broadcast made its answer an error). It
// also returns every master's parsed answer (nil where none).
func (e *Engine) quorumHolder(op string, reps []enginex.MasterReply, elapsed time.Duration, parse func(resp.Reply) (*keyAnswer, error)) (string, time.Duration, []*keyAnswer, error) {
	qe := &QuorumError{Op: op, Total: e.n, Quorum: e.q}
	answers := make([]*keyAnswer, len(reps))
	counts := map[string]int{}
	best := ""
	for i, r := range reps {
		rerr := r.Err
		if rerr == nil && r.Reply.IsError() {
			rerr = r.Reply.Err()
		}
		var a *keyAnswer
		if rerr == nil && !r.Reply.IsNull() {
			a, rerr = parse(r.Reply)
		}
		if rerr != nil {
			qe.Masters = append(qe.Masters, &MasterError{Master: i, Addr: e.addrs[i], Err: rerr})
			continue
		}
		qe.Answered++
		if a == nil {
			continue
		}
		answers[i] = a
		counts[a.token]++
		if best == "" || counts[a.token] > counts[best] {
			best = a.token
		}
	}
	if best != "" && counts[best] >= e.q {
		var left []time.Duration
		for _, a := range answers {
			if a == nil || a.token != best {
				continue
			}
			d := time.Duration(math.MaxInt64) // no TTL: held until deleted
			if a.pttl >= 0 {
				d = time.Duration(a.pttl) * time.Millisecond
			}
			left = append(left, d)
		}
		slices.Sort(left)
		if d := left[len(left)-e.q]; d != math.MaxInt64 {
			return best, max(0, d-elapsed), answers, nil
		}
		return best, NoExpiry, answers, nil
	}
	if counts[best]+e.n-qe.Answered < e.q {
		return "", 0, answers, nil
	}
	qe.Granted = counts[best]
	qe.unavailable, qe.sentinel = true, ErrUnavailable
	return "", 0, answers, qe
}
