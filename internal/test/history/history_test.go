package history

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

const ms = time.Millisecond

func acq(client, grant int, token int64, call, ret, until time.Duration) Op {
	return Op{Client: client, Kind: Acquire, Key: "k", Grant: grant, Token: token, Outcome: OK, Call: call, Return: ret, Until: until}
}

func rel(client, grant int, call, ret time.Duration) Op {
	return Op{Client: client, Kind: Release, Key: "k", Grant: grant, Outcome: OK, Call: call, Return: ret}
}

func ext(client, grant int, call, ret, until time.Duration) Op {
	return Op{Client: client, Kind: Extend, Key: "k", Grant: grant, Outcome: OK, Call: call, Return: ret, Until: until}
}

func write(client, grant int, token int64, accepted bool, at time.Duration) Op {
	o := Refused
	if accepted {
		o = OK
	}
	return Op{Client: client, Kind: Write, Key: "k", Grant: grant, Token: token, Outcome: o, Call: at, Return: at}
}

func onKey(key string, op Op) Op { op.Key = key; return op }

// TestCheckCatches feeds the checker histories with and without each
// violation it claims to catch; each case fails if the verdict is wrong.
func TestCheckCatches(t *testing.T) {
	for _, tc := range []struct {
		name  string
		legal bool
		ops   []Op
	}{
		// Mutual exclusion.
		{"overlapping grants", false, []Op{acq(1, 1, 0, 0, 1*ms, 100*ms), acq(2, 2, 0, 10*ms, 11*ms, 200*ms)}},
		{"grant after the holder's validity end", true, []Op{acq(1, 1, 0, 0, 1*ms, 100*ms), acq(2, 2, 0, 150*ms, 151*ms, 300*ms)}},
		{"grant whose call spans the validity end", true, []Op{acq(1, 1, 0, 0, 1*ms, 100*ms), acq(2, 2, 0, 50*ms, 100*ms, 300*ms)}},
		{"grant returning just before the validity end", false, []Op{acq(1, 1, 0, 0, 1*ms, 100*ms), acq(2, 2, 0, 50*ms, 99*ms, 300*ms)}},
		{"grant after a release", true, []Op{acq(1, 1, 0, 0, 1*ms, 100*ms), rel(1, 1, 20*ms, 25*ms), acq(2, 2, 0, 30*ms, 31*ms, 200*ms)}},
		{"grant concurrent with the release", true, []Op{acq(1, 1, 0, 0, 1*ms, 100*ms), rel(1, 1, 20*ms, 30*ms), acq(2, 2, 0, 10*ms, 25*ms, 200*ms)}},
		{"grant returning before the release is called", false, []Op{acq(1, 1, 0, 0, 1*ms, 100*ms), acq(2, 2, 0, 10*ms, 15*ms, 200*ms), rel(1, 1, 20*ms, 25*ms)}},
		{"release of a lost lock frees nothing", false, []Op{acq(1, 1, 0, 0, 1*ms, 100*ms), acq(2, 2, 0, 150*ms, 151*ms, 300*ms),
			rel(1, 1, 160*ms, 161*ms), acq(3, 3, 0, 170*ms, 171*ms, 400*ms)}},
		{"keys are independent", true, []Op{acq(1, 1, 0, 0, 1*ms, 100*ms), onKey("k2", acq(2, 2, 0, 10*ms, 11*ms, 200*ms))}},
		{"concurrent grants, one order legal", true, []Op{acq(2, 2, 0, 0, 200*ms, 300*ms), acq(1, 1, 0, 50*ms, 60*ms, 100*ms)}},
		// Extensions.
		{"releases and extends", true, []Op{acq(1, 1, 1, 0, 1*ms, 100*ms), write(1, 1, 1, true, 2*ms), ext(1, 1, 50*ms, 51*ms, 300*ms),
			rel(1, 1, 250*ms, 251*ms), acq(2, 2, 2, 240*ms, 260*ms, 500*ms), write(2, 2, 2, true, 261*ms), rel(2, 2, 270*ms, 271*ms),
			acq(3, 3, 0, 280*ms, 281*ms, 600*ms), ext(3, 3, 590*ms, 591*ms, 900*ms), acq(1, 4, 3, 950*ms, 951*ms, 1200*ms)}},
		{"grant before the extended validity end", false, []Op{acq(1, 1, 0, 0, 1*ms, 100*ms), ext(1, 1, 50*ms, 51*ms, 300*ms), acq(2, 2, 0, 200*ms, 201*ms, 400*ms)}},
		{"extend after another grant", false, []Op{acq(1, 1, 0, 0, 1*ms, 100*ms), acq(2, 2, 0, 150*ms, 151*ms, 300*ms), ext(1, 1, 160*ms, 161*ms, 400*ms)}},
		{"extend after the release", false, []Op{acq(1, 1, 0, 0, 1*ms, 100*ms), rel(1, 1, 10*ms, 11*ms), ext(1, 1, 20*ms, 21*ms, 400*ms)}},
		{"extend past the validity end, nobody else granted", true, []Op{acq(1, 1, 0, 0, 1*ms, 100*ms), ext(1, 1, 120*ms, 121*ms, 400*ms)}},
		// Points are ordered: an operation the model must place after a
		// late grant cannot take effect before it.
		{"operation placed after a late grant returns too early", false, []Op{acq(1, 1, 0, 0, 1*ms, 100*ms), acq(2, 2, 0, 50*ms, 150*ms, 300*ms),
			ext(2, 2, 60*ms, 90*ms, 400*ms)}},
		// Fencing: tokens.
		{"token order violation", false, []Op{acq(1, 1, 6, 0, 1*ms, 100*ms), acq(2, 2, 5, 150*ms, 151*ms, 300*ms)}},
		{"equal tokens", false, []Op{acq(1, 1, 6, 0, 1*ms, 100*ms), acq(2, 2, 6, 150*ms, 151*ms, 300*ms)}},
		{"token order follows the grant order, not the call order", true, []Op{acq(1, 1, 5, 0, 10*ms, 50*ms), acq(2, 2, 6, 5*ms, 60*ms, 300*ms)}},
		{"token order against the only grant order", false, []Op{acq(1, 1, 6, 0, 10*ms, 50*ms), acq(2, 2, 5, 5*ms, 60*ms, 300*ms)}},
		{"unfenced grants between fenced ones", true, []Op{acq(1, 1, 5, 0, 1*ms, 100*ms), acq(2, 2, 0, 150*ms, 151*ms, 300*ms), acq(3, 3, 6, 350*ms, 351*ms, 500*ms)}},
		// Fencing: the store.
		{"stale write accepted", false, []Op{acq(1, 1, 5, 0, 1*ms, 100*ms), write(1, 1, 5, true, 10*ms), acq(2, 2, 6, 150*ms, 151*ms, 300*ms),
			write(2, 2, 6, true, 160*ms), write(1, 1, 5, true, 170*ms)}},
		{"stale write refused", true, []Op{acq(1, 1, 5, 0, 1*ms, 100*ms), write(1, 1, 5, true, 10*ms), acq(2, 2, 6, 150*ms, 151*ms, 300*ms),
			write(2, 2, 6, true, 160*ms), write(1, 1, 5, false, 170*ms)}},
		{"stale write before the new holder's write", true, []Op{acq(1, 1, 5, 0, 1*ms, 100*ms), acq(2, 2, 6, 150*ms, 151*ms, 300*ms),
			write(1, 1, 5, true, 155*ms), write(2, 2, 6, true, 160*ms)}},
		{"valid holder's write refused", false, []Op{acq(1, 1, 5, 0, 1*ms, 100*ms), write(1, 1, 5, false, 10*ms)}},
		{"holder rewrites its token", true, []Op{acq(1, 1, 5, 0, 1*ms, 100*ms), write(1, 1, 5, true, 10*ms), write(1, 1, 5, true, 20*ms)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Check(tc.ops, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if r.OK() != tc.legal {
				t.Fatalf("legal %v, checker says %v", tc.legal, r)
			}
			if !tc.legal && r.Detail == "" {
				t.Error("no detail for an illegal history")
			}
			t.Log(r)
		})
	}
}

// generate returns a legal history of about n operations over keys keys:
// per key, holders in turn (each next acquire called before the previous
// holder's release returns), half of them fenced, each fenced holder
// writing its token; one in 4 extends; one in 50 pauses past its validity:
// the next grant comes after it, and its late write and release after the
// next holder's write.
func generate(rng *rand.Rand, keys, n int) []Op {
	const ttl = time.Second
	us := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Microsecond }
	var ops []Op
	grant := 0
	for k := range keys {
		key := fmt.Sprintf("k%d", k)
		var token, stored int64
		free := time.Duration(0) // the earliest the next grant may take effect
		var stale []Op           // a paused holder's write and release, after the next holder's write
		for len(ops) < n*(k+1)/keys {
			grant++
			client := k*4 + grant%4
			c := free - us(0, 20)
			r := free + us(10, 200)
			var tok int64
			if rng.IntN(2) == 0 {
				token++
				tok = token
			}
			until := c + ttl
			ops = append(ops, onKey(key, acq(client, grant, tok, c, r, until)))
			at := r + us(5, 50)
			if tok != 0 {
				ops = append(ops, onKey(key, write(client, grant, tok, tok >= stored, at)))
				stored = max(stored, tok)
			}
			for _, op := range stale {
				op.Call, op.Return = at+op.Call, at+op.Return
				if op.Kind == Write {
					op = write(op.Client, op.Grant, op.Token, op.Token >= stored, op.Call)
					stored = max(stored, op.Token)
				}
				ops = append(ops, onKey(key, op))
			}
			stale = nil
			if rng.IntN(4) == 0 {
				ec := at + us(5, 50)
				until = ec + ttl
				ops = append(ops, onKey(key, ext(client, grant, ec, ec+us(10, 200), until)))
				at = ec + 300*time.Microsecond
			}
			if rng.IntN(50) == 0 {
				// Paused: the next grant comes after its validity end.
				free = until + us(0, 50)
				if tok != 0 {
					stale = append(stale, write(client, grant, tok, false, time.Microsecond))
				}
				stale = append(stale, rel(client, grant, 2*time.Microsecond, 100*time.Microsecond))
				continue
			}
			rc := at + us(5, 300)
			ops = append(ops, onKey(key, rel(client, grant, rc, rc+us(10, 200))))
			free = rc
		}
	}
	return ops
}

// TestCheckEpochs: a cut carries the highest token granted and stored,
// and none falls where it would lose or invent a violation: while a
// holder is valid, inside an operation's interval, between a grant and
// its extend. Each case fails if its rule is taken out of epochs.
func TestCheckEpochs(t *testing.T) {
	// 200 fenced holders writing their tokens 100-299, then 100
	// unfenced ones, each released before the next is called: a cut may
	// fall after every release.
	var ops []Op
	for i := range 300 {
		c := time.Duration(i) * 10 * ms
		g := i + 1
		if i < 200 {
			ops = append(ops, acq(g%3, g, int64(100+i), c, c+1*ms, c+time.Second), write(g%3, g, int64(100+i), true, c+2*ms), rel(g%3, g, c+3*ms, c+4*ms))
		} else {
			ops = append(ops, acq(g%3, g, 0, c, c+1*ms, c+time.Second), rel(g%3, g, c+3*ms, c+4*ms))
		}
	}
	end := 3010 * ms
	// A holder valid across 70 of its own writes, then another grant.
	held := []Op{acq(1, 1000, 500, end, end+ms, end+time.Hour)}
	for i := range 70 {
		held = append(held, write(1, 1000, 500, true, end+time.Duration(2+i)*ms))
	}
	// A write refused, legal only after a write 70 operations later.
	spanning := []Op{acq(1, 1000, 500, end, end+ms, end+10*ms), rel(1, 1000, end+2*ms, end+3*ms), write(1, 1000, 500, false, end+4*ms)}
	spanning[2].Return = end + time.Hour
	for i := range 35 {
		c := end + 20*ms + time.Duration(i)*10*ms
		spanning = append(spanning, acq(2, 2000+i, 0, c, c+ms, c+time.Second), rel(2, 2000+i, c+2*ms, c+3*ms))
	}
	spanning = append(spanning, acq(3, 3000, 501, end+time.Second, end+time.Second+ms, end+2*time.Second), write(3, 3000, 501, true, end+time.Second+2*ms))
	// A holder's extend after its validity end and 70 of its writes,
	// nobody else granted: legal only if no cut separates it from its
	// grant (after a cut there is no holder to extend). Its new validity
	// end is already past, so only the extend rule keeps the cut away.
	lateExtend := []Op{acq(1, 1000, 500, end, end+ms, end+100*ms)}
	for i := range 70 {
		lateExtend = append(lateExtend, write(1, 1000, 500, true, end+time.Duration(2+i)*ms))
	}
	lateExtend = append(lateExtend, ext(1, 1000, end+200*ms, end+201*ms, end+150*ms))
	for _, tc := range []struct {
		name   string
		legal  bool
		ops    []Op
		epochs int // at least
	}{
		{"legal", true, nil, 3},
		{"token below one granted epochs before", false, []Op{acq(1, 1000, 150, end, end+ms, end+time.Second)}, 3},
		{"stale write accepted epochs later", false, []Op{write(1, 100, 199, true, end)}, 3},
		{"stale write refused epochs later", true, []Op{write(1, 100, 199, false, end)}, 3},
		{"overlap within a late epoch", false, []Op{acq(1, 1000, 0, 2500*ms+ms/2, 2500*ms+ms/2, 2600*ms)}, 3},
		{"holder valid across a would-be cut", false, append(held, acq(2, 1001, 0, end+time.Second, end+time.Second+ms, end+2*time.Second)), 3},
		{"write spanning a would-be cut", true, spanning, 3},
		{"extend past the validity end across a would-be cut", true, lateExtend, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Check(append(append([]Op(nil), ops...), tc.ops...), 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if r.OK() != tc.legal || r.Epochs < tc.epochs {
				t.Fatalf("legal %v, checker says %v (%d epochs)", tc.legal, r, r.Epochs)
			}
			t.Log(r)
		})
	}
}

// TestCheckScale: 100,000 operations check in seconds, on 8 keys or one,
// and a single violation among the 100,000 on one key (the longest
// per-key history) is found.
func TestCheckScale(t *testing.T) {
	for _, keys := range []int{8, 1} {
		ops := generate(rand.New(rand.NewPCG(1, uint64(keys))), keys, 100000)
		// The middle acquire of key k0, and the end of k0's history.
		var mid Op
		var end time.Duration
		for _, op := range ops {
			if op.Key == "k0" {
				end = max(end, op.Return, op.Until)
				if op.Kind == Acquire && op.Grant > len(ops)/keys/6 && mid.Grant == 0 {
					mid = op
				}
			}
		}
		end += time.Second
		for _, tc := range []struct {
			name  string
			legal bool
			extra []Op
		}{
			{"legal", true, nil},
			{"overlap", false, []Op{onKey("k0", acq(99, 1<<30, 0, mid.Return+1, mid.Return+2, mid.Return+time.Second))}},
			{"token order", false, []Op{onKey("k0", acq(99, 1<<30, 1, end, end+1, end+time.Second))}},
			{"stale write accepted", false, []Op{onKey("k0", write(99, 1, 1, true, end))}},
		} {
			if keys > 1 && !tc.legal {
				continue // the race detector makes each 100,000 a few seconds
			}
			t.Run(fmt.Sprintf("%d-keys/%s", keys, tc.name), func(t *testing.T) {
				r, err := Check(append(append([]Op(nil), ops...), tc.extra...), time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if r.OK() != tc.legal || r.Epochs < 10*r.Keys {
					t.Fatalf("legal %v, checker says %v (%d epochs)", tc.legal, r, r.Epochs)
				}
				if r.Elapsed > 20*time.Second {
					t.Errorf("%d operations took %v", r.Ops, r.Elapsed)
				}
				t.Logf("%d ops, %d keys, %d epochs: %v in %v", r.Ops, r.Keys, r.Epochs, r.Outcome, r.Elapsed)
			})
		}
	}
}

// leaseLock is a lease lock with fencing in one process, right or
// broken (it grants to everyone).
type leaseLock struct {
	broken bool
	mu     sync.Mutex
	holder int
	until  time.Time
	token  int64
	stored int64
}

func (l *leaseLock) acquire(id int, ttl time.Duration) (int64, time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if !l.broken && l.holder != 0 && now.Before(l.until) {
		return 0, time.Time{}, false
	}
	l.token++
	l.holder, l.until = id, now.Add(ttl)
	return l.token, l.until, true
}

func (l *leaseLock) release(id int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holder == id {
		l.holder = 0
	}
}

func (l *leaseLock) write(token int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if token < l.stored {
		return false
	}
	l.stored = token
	return true
}

// TestRecorder records clients of an in-process lease lock from many
// goroutines (-race checks the Recorder): the right lock's history is
// linearizable, the broken one's is not.
func TestRecorder(t *testing.T) {
	for _, broken := range []bool{false, true} {
		t.Run(fmt.Sprintf("broken=%v", broken), func(t *testing.T) {
			rec := NewRecorder()
			locks := []*leaseLock{{broken: broken}, {broken: broken}}
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 200 {
						k := (w + i) % len(locks)
						key := fmt.Sprint("k", k)
						a := rec.Acquire(w, key)
						tok, until, ok := locks[k].acquire(w*1000+i+1, 50*time.Millisecond)
						if !ok {
							a.Refused()
							time.Sleep(20 * time.Microsecond)
							continue
						}
						g := a.Granted(tok, until)
						wr := rec.Write(g, tok)
						if locks[k].write(tok) {
							wr.Accepted()
						} else {
							wr.Refused()
						}
						time.Sleep(10 * time.Microsecond)
						rl := rec.Release(g)
						locks[k].release(w*1000 + i + 1)
						rl.Released()
					}
				}()
			}
			wg.Wait()
			r, err := Check(rec.Ops(), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if r.OK() == broken {
				t.Fatalf("broken lock %v: %v", broken, r)
			}
			t.Logf("%v (%d refused acquires not kept)", r, rec.NoOps())
		})
	}
}

// BenchmarkRecorder: the cost a locker pays per grant recorded (acquire,
// fenced write, release).
func BenchmarkRecorder(b *testing.B) {
	rec := NewRecorder()
	until := time.Now().Add(time.Second)
	b.ReportAllocs()
	for i := range b.N {
		g := rec.Acquire(0, "k").Granted(int64(i+1), until)
		rec.Write(g, int64(i+1)).Accepted()
		rec.Release(g).Released()
	}
}
