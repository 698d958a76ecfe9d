package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/redlock-dev/redlock/conn"
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
	// With Readers, it is how long a quorum still holds the last of them.
	Remaining time.Duration
	// Readers is the number of read locks of an [RWLock] on the key that
	// a quorum of masters holds unexpired, when no writer holds it (Token
	// ""): the key is held, for reading. Each master's 1,024 longest-lived
	// unexpired readers are read; a master with more is too many to tell
	// ([ErrUnavailable]). (With cluster members, only a key with a {hash
	// tag} can be an RWLock's: other keys are read without readers.)
	Readers int
}

// Held reports whether a quorum holds the key: a token, or readers.
func (h Holding) Held() bool { return h.Token != "" || h.Readers > 0 }

// NoExpiry is [Holding.Remaining] (and [Leader.Remaining]) for a token a
// quorum of masters holds without a TTL, as PTTL's -1.
const NoExpiry time.Duration = -1

// Holder reads who holds key, as a quorum read: every master is asked
// for the key's value and PTTL, and an [RWLock]'s readers, in one step.
// The key is held by a token when a quorum of masters answered with it,
// held for reading when a quorum holds one or more of the same readers,
// and free when so few masters hold any one token or reader that even the
// masters that did not answer could not make a quorum of it. Otherwise —
// too few answers to tell — it returns an error matching [ErrUnavailable]
// (a [*QuorumError] with op "holder"). A master in restart quarantine does
// not count as an answer: it may have lost the key. A master that has not answered within nine tenths of
// what is left of ctx's deadline counts as failed. The read is a
// snapshot: the holder may change as soon as it returns.
func (e *Engine) Holder(ctx context.Context, key string) (Holding, error) {
	if key == "" {
		return Holding{}, errEmptyKey
	}
	key = e.cfg.KeyPrefix + key
	// An RWLock's readers share the key's slot only through a hash tag
	// (NewRWLock requires one with cluster members).
	readers := e.clusters == nil || conn.HashTag(key) != key
	nkeys := 1
	if readers {
		nkeys = 2
	}
	cmd := scripts.Holder.AppendEvalSha(nil, nkeys, 0)
	cmd = resp.AppendBulkString(cmd, key)
	if readers {
		cmd = resp.AppendBulkString(cmd, key+readersSuffix)
	}
	t1 := time.Now()
	// Within ctx's deadline: the masters that did not answer by then count
	// as failures and the read decides from the others.
	timeout := withinDeadline(ctx, transport{e}.MasterTimeout(0))
	reps, err := e.broadcast(ctx, key, timeout, scripts.Holder, cmd, anyReply, nil)
	if err != nil {
		return Holding{}, err
	}
	elapsed := time.Since(t1)
	answers, qe := e.holderAnswers("holder", reps, func(r resp.Reply) (*keyAnswer, error) {
		if r.Type != resp.TypeArray || (len(r.Elems) != 2 && len(r.Elems) != 4) || r.Elems[1].Type != resp.TypeInteger ||
			(r.Elems[0].Type != resp.TypeBulkString && !r.Elems[0].IsNull()) {
			return nil, fmt.Errorf("engine: unexpected reply %s", r)
		}
		if r.Elems[0].Type == resp.TypeBulkString && len(r.Elems[0].Str) == 0 {
			// Held (SET NX refuses it), by no token Holding can name.
			return nil, fmt.Errorf("engine: %s holds an empty value, not a lock's token", key)
		}
		a := &keyAnswer{token: string(r.Elems[0].Str), pttl: r.Elems[1].Int}
		if len(r.Elems) == 4 {
			var err error
			if a.readers, err = parseReaders(r.Elems[2]); err != nil {
				return nil, err
			}
			if r.Elems[3].Type != resp.TypeInteger {
				return nil, fmt.Errorf("engine: unexpected reply %s", r)
			}
			a.truncated = r.Elems[3].Int > int64(len(a.readers))
		}
		return a, nil
	})
	tok, left, err := e.quorumToken(qe, answers, elapsed)
	if err != nil || tok != "" || !readers {
		return Holding{Token: tok, Remaining: left}, err
	}
	return e.quorumReaders(qe, answers, elapsed)
}

// parseReaders reads the holder script's readers: token, ms left, ….
func parseReaders(r resp.Reply) (map[string]int64, error) {
	if r.Type != resp.TypeArray || len(r.Elems)%2 != 0 {
		return nil, fmt.Errorf("engine: unexpected readers %s", r)
	}
	m := make(map[string]int64, len(r.Elems)/2)
	for i := 0; i < len(r.Elems); i += 2 {
		t, ms := r.Elems[i], r.Elems[i+1]
		if t.Type != resp.TypeBulkString || ms.Type != resp.TypeInteger {
			return nil, fmt.Errorf("engine: unexpected readers %s", r)
		}
		m[string(t.Str)] = ms.Int
	}
	return m, nil
}

// quorumReaders decides the read of an RWLock's readers, where no writer
// holds the key: the readers a quorum of masters holds, and how long a
// quorum still holds the last of them (each reader's quorum-th longest
// time left, less elapsed). It returns an error matching ErrUnavailable
// when a reader short of a quorum could reach one on the masters that did
// not answer (the count and the time left could be more), or when a
// master has more unexpired readers than the script returns (1,024, the
// longest-lived: the others could be held by a quorum too).
func (e *Engine) quorumReaders(qe *QuorumError, answers []*keyAnswer, elapsed time.Duration) (Holding, error) {
	left := map[string][]int64{}
	for i, a := range answers {
		if a == nil {
			continue // no answer: named in qe
		}
		if a.truncated {
			return Holding{}, fmt.Errorf("%w: holder: master %d (%s) has more than %d unexpired readers: too many to tell who holds the key",
				ErrUnavailable, i, e.addrs[i], len(a.readers))
		}
		for tok, ms := range a.readers {
			if ms < 0 {
				ms = math.MaxInt64 // scored +inf: held until deleted
			}
			left[tok] = append(left[tok], ms)
		}
	}
	var h Holding
	undecided := 0
	for _, ms := range left {
		if len(ms) < e.q {
			if len(ms)+e.n-qe.Answered >= e.q {
				undecided = max(undecided, len(ms))
			}
			continue
		}
		slices.Sort(ms)
		h.Readers++
		if d := ms[len(ms)-e.q]; d == math.MaxInt64 || h.Remaining == NoExpiry {
			h.Remaining = NoExpiry
		} else {
			h.Remaining = max(h.Remaining, max(0, time.Duration(d)*time.Millisecond-elapsed))
		}
	}
	if undecided > 0 {
		qe.Granted = undecided
		qe.unavailable, qe.sentinel = true, ErrUnavailable
		return Holding{}, qe
	}
	return h, nil
}

// keyAnswer is one master's answer to a read of a lock key: the token it
// holds and its PTTL, and what else the read returned (an election's
// leader record).
type keyAnswer struct {
	token     string
	pttl      int64
	published bool             // a leader record of the token came with it
	readers   map[string]int64 // an RWLock's readers: token → ms left (-1: no expiry)
	truncated bool             // the master has more unexpired readers than it sent
	term, seq int64
	value     string
}

// quorumHolder decides a quorum read of a lock key (Holder, an
// election's Leader) from the masters' replies: the token a quorum
// holds, with how long a quorum will still hold it after the read (the
// quorum-th longest PTTL less elapsed); "" and no error when so few
// masters hold any one token that even those that did not answer could
// not make a quorum of it; else an error matching ErrUnavailable. parse
// is holderAnswers'. It also returns every master's parsed answer (nil
// where it did not answer; a token "" where it holds none).
func (e *Engine) quorumHolder(op string, reps []enginex.MasterReply, elapsed time.Duration, parse func(resp.Reply) (*keyAnswer, error)) (string, time.Duration, []*keyAnswer, error) {
	answers, qe := e.holderAnswers(op, reps, parse)
	tok, left, err := e.quorumToken(qe, answers, elapsed)
	return tok, left, answers, err
}

// holderAnswers reads the masters' replies to a quorum read of a lock
// key: each master's parsed answer (nil where it did not answer; a token
// "" where it holds none), and a QuorumError counting the answers and
// naming each master that gave none. parse reads a reply that is neither
// an error nor nil (nil: nothing held); its error, or a failed master's,
// counts as no answer — as does a master in restart quarantine
// (broadcast made its answer an error).
func (e *Engine) holderAnswers(op string, reps []enginex.MasterReply, parse func(resp.Reply) (*keyAnswer, error)) ([]*keyAnswer, *QuorumError) {
	qe := &QuorumError{Op: op, Total: e.n, Quorum: e.q}
	answers := make([]*keyAnswer, len(reps))
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
			a = &keyAnswer{} // answered: nothing held here
		}
		answers[i] = a
	}
	return answers, qe
}

// quorumToken decides the token of holderAnswers' answers, as
// quorumHolder says; qe becomes the error when it cannot tell.
func (e *Engine) quorumToken(qe *QuorumError, answers []*keyAnswer, elapsed time.Duration) (string, time.Duration, error) {
	counts := map[string]int{}
	best := ""
	for _, a := range answers {
		if a == nil || a.token == "" {
			continue // no answer, or no token (an RWLock's readers only, or nothing)
		}
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
			return best, max(0, d-elapsed), nil
		}
		return best, NoExpiry, nil
	}
	if counts[best]+e.n-qe.Answered < e.q {
		return "", 0, nil
	}
	qe.Granted = counts[best]
	qe.unavailable, qe.sentinel = true, ErrUnavailable
	return "", 0, qe
}
