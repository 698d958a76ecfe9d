package history

import (
	"fmt"
	"sync"
	"time"
)

// Kind is an operation's kind.
type Kind uint8

// The operation kinds.
const (
	Acquire Kind = iota + 1 // acquire(key) → granted (token, validity end) or refused
	Release                 // release(grant): the holder leaves; always completes
	Extend                  // extend(grant) → extended (new validity end) or refused
	Write                   // fenced write(key, token) → accepted or refused by the store
)

func (k Kind) String() string {
	switch k {
	case Acquire:
		return "acquire"
	case Release:
		return "release"
	case Extend:
		return "extend"
	case Write:
		return "write"
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Outcome is how an operation completed.
type Outcome uint8

// The outcomes.
const (
	OK          Outcome = iota + 1 // granted, released, extended, accepted
	Refused                        // the key is held, the extend or the write was refused
	Unavailable                    // failed without taking effect (an error)
)

// Op is one completed operation. Times are since the Recorder's start.
type Op struct {
	Client  int
	Kind    Kind
	Key     string
	Grant   int   // an Acquire's own grant ID; the grant a Release or Extend acts on, or a Write is made under (IDs from 1)
	Token   int64 // a granted Acquire's fencing token (0: none); a Write's token
	Outcome Outcome
	Until   time.Duration // validity end of a granted Acquire or a successful Extend
	Call    time.Duration // before the call was made
	Return  time.Duration // after its result was seen
}

// Recorder records a history. Its methods are safe for concurrent use;
// each client (a goroutine making one call at a time) has its own id.
type Recorder struct {
	start time.Time

	mu     sync.Mutex
	ops    []Op // guarded by mu: completed operations, in completion order
	grants int  // guarded by mu: grant IDs handed out
	noops  int  // guarded by mu: refused or failed acquires and extends
}

// NewRecorder returns an empty Recorder whose clock starts now.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Call is an operation invoked and not yet completed. Complete it with the
// method for its outcome; a Call never completed is not in the history.
type Call struct {
	r  *Recorder
	op Op
}

// Grant is a granted Acquire: what Release, Extend and Write name.
type Grant struct {
	id     int
	client int
	key    string
}

// ID returns the grant's ID (from 1).
func (g Grant) ID() int { return g.id }

func (r *Recorder) invoke(client int, k Kind, key string) Call {
	return Call{r: r, op: Op{Client: client, Kind: k, Key: key, Call: time.Since(r.start)}}
}

// Acquire records client's call to acquire key.
func (r *Recorder) Acquire(client int, key string) Call { return r.invoke(client, Acquire, key) }

// Release records the call releasing g, by g's client.
func (r *Recorder) Release(g Grant) Call {
	c := r.invoke(g.client, Release, g.key)
	c.op.Grant = g.id
	return c
}

// Extend records the call extending g, by g's client.
func (r *Recorder) Extend(g Grant) Call {
	c := r.invoke(g.client, Extend, g.key)
	c.op.Grant = g.id
	return c
}

// Write records a write to the store protected by g's key, by g's client
// with fencing token token.
func (r *Recorder) Write(g Grant, token int64) Call {
	c := r.invoke(g.client, Write, g.key)
	c.op.Grant, c.op.Token = g.id, token
	return c
}

// Granted completes an Acquire: the lock is held with fencing token token
// (0: none) and validity ending at until.
func (c Call) Granted(token int64, until time.Time) Grant {
	c.must(Acquire)
	c.op.Token, c.op.Until = token, until.Sub(c.r.start)
	id := c.complete(OK, true)
	return Grant{id: id, client: c.op.Client, key: c.op.Key}
}

// Extended completes an Extend: the validity now ends at until.
func (c Call) Extended(until time.Time) {
	c.must(Extend)
	c.op.Until = until.Sub(c.r.start)
	c.complete(OK, false)
}

// Released completes a Release, whatever it answered: the holder left.
func (c Call) Released() {
	c.must(Release)
	c.complete(OK, false)
}

// Accepted completes a Write the store accepted.
func (c Call) Accepted() {
	c.must(Write)
	c.complete(OK, false)
}

// Refused completes an Acquire (the key is held), an Extend or a Write
// that was refused.
func (c Call) Refused() {
	if c.op.Kind == Release {
		panic("history: Refused on a release")
	}
	c.complete(Refused, false)
}

// Unavailable completes an Acquire or Extend that failed with an error,
// or a Write that was not made.
func (c Call) Unavailable() {
	if c.op.Kind == Release {
		panic("history: Unavailable on a release")
	}
	c.complete(Unavailable, false)
}

func (c Call) must(k Kind) {
	if c.op.Kind != k {
		panic(fmt.Sprintf("history: %v completed as a %v", c.op.Kind, k))
	}
}

func (c Call) complete(o Outcome, grant bool) int {
	c.op.Return = time.Since(c.r.start)
	c.op.Outcome = o
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if noop(&c.op) {
		r.noops++
		return 0
	}
	if grant {
		r.grants++
		c.op.Grant = r.grants
	}
	r.ops = append(r.ops, c.op)
	return c.op.Grant
}

// noop reports whether op changes nothing in the model: a refused or
// failed acquire or extend, a write not made.
func noop(op *Op) bool {
	switch op.Kind {
	case Acquire, Extend:
		return op.Outcome != OK
	case Write:
		return op.Outcome == Unavailable
	}
	return false
}

// Ops returns a copy of the history: the completed operations that are
// not no-ops, in completion order.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// NoOps returns the number of refused or failed acquires and extends and
// writes not made: counted, not kept.
func (r *Recorder) NoOps() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.noops
}
