package engine

import (
	"container/heap"
	"sync"
	"time"
)

// keeper is the engine's one scheduler for held locks. It extends the
// locks taken with WithAutoExtend about a third of their TTL after each
// grant, and ends every lock it watches (auto-extended, or whose Done or
// Context was asked for) when its validity runs out. One goroutine and one
// timer serve every lock, however many: the locks wait in a heap ordered
// by the time the keeper acts on them next. Extensions are ordinary
// fan-outs on the masters' pipelines; their decisions arrive in the
// connections' reader goroutines and come back through the inbox.
type keeper struct {
	e     *Engine
	start sync.Once
	wake  chan struct{} // buffered 1: the heap's head or the inbox changed
	stop  chan struct{}
	done  chan struct{} // closed when run returns

	mu      sync.Mutex
	h       lockHeap // guarded by mu
	stopped bool     // guarded by mu: close ran; watch adds nothing

	inMu  sync.Mutex
	inbox []*op // guarded by inMu: decided extensions
}

// expiryGuard is how long before the validity deadline the keeper ends a
// lock whose validity is running out, so that timer latency does not make
// Done close after the deadline.
const expiryGuard = time.Millisecond

func (k *keeper) init(e *Engine) {
	k.e = e
	k.wake = make(chan struct{}, 1)
	k.stop = make(chan struct{})
	k.done = make(chan struct{})
}

func (k *keeper) poke() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// watch schedules l (again) unless it is scheduled or ended. It reports
// false when the keeper has stopped (the engine is closing): l then ended
// with ErrClosed.
func (k *keeper) watch(l *Lock) bool {
	l.watched.Store(true)
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		l.end(ErrClosed)
		return false
	}
	k.start.Do(func() { go k.run() })
	if l.kIdx == 0 && !l.ended() {
		l.kAt = k.nextAt(l)
		heap.Push(&k.h, l)
		if l.kIdx == 1 {
			k.poke()
		}
	}
	k.mu.Unlock()
	return true
}

// reschedule moves l after its deadline changed.
func (k *keeper) reschedule(l *Lock) {
	k.mu.Lock()
	if l.kIdx != 0 {
		l.kAt = k.nextAt(l)
		heap.Fix(&k.h, l.kIdx-1)
		if l.kIdx == 1 {
			k.poke()
		}
	}
	k.mu.Unlock()
}

// remove forgets l.
func (k *keeper) remove(l *Lock) {
	k.mu.Lock()
	if l.kIdx != 0 {
		heap.Remove(&k.h, l.kIdx-1)
	}
	k.mu.Unlock()
}

// nextAt returns when the keeper acts on l next (ns since the epoch): the
// next extension, or the end of the validity. Called with mu held.
func (k *keeper) nextAt(l *Lock) int64 {
	until := l.until.Load() - int64(expiryGuard)
	if !l.auto || l.extending || l.maxed.Load() {
		return until
	}
	// A third of the TTL after the last grant; when the per-master timeout
	// is long next to the TTL, early enough for two per-master timeouts
	// before the deadline, but not sooner than a tenth of the TTL.
	if l.retryAt != 0 {
		return min(l.retryAt, k.lastChance(l)) // after an unanswered extension
	}
	g := l.granted.Load()
	after := min(int64(l.ttl/3), l.until.Load()-g-2*int64(k.e.cfg.masterTimeout(l.ttl)))
	return g + max(after, int64(l.ttl/10))
}

// retry keeps l after a watchdog extension that too few masters answered
// (err): nobody can tell whether the lock is still held, and its validity
// is not over, so it is not lost yet. The watchdog tries again a
// twentieth of the TTL (at least a per-master timeout) from now, as long
// as an extension could still be decided before the deadline (lastChance);
// then the lock ends, with err in its cause. It reports false when that
// moment has passed (the caller ends the lock).
func (k *keeper) retry(l *Lock, err error) bool {
	now := int64(time.Since(k.e.epoch))
	if now >= k.lastChance(l) {
		return false
	}
	k.mu.Lock()
	l.retryErr = err
	l.retryAt = now + int64(max(l.ttl/20, k.e.cfg.masterTimeout(l.ttl)))
	k.mu.Unlock()
	k.reschedule(l)
	return true
}

// lastChance is when a lock whose extensions get no quorum of answers
// ends: the last instant an extension sent then could still be decided
// (within a per-master timeout) before the deadline, less expiryGuard.
// Its validity is about to end; ending it then also leaves the timer's
// latency a per-master timeout of room. ns since the epoch.
func (k *keeper) lastChance(l *Lock) int64 {
	return l.until.Load() - int64(expiryGuard) - int64(k.e.cfg.masterTimeout(l.ttl))
}

// extended clears a pending retry after a successful extension.
func (k *keeper) extended(l *Lock) {
	k.mu.Lock()
	l.retryAt, l.retryErr = 0, nil
	k.mu.Unlock()
}

// decided is the notify hook of the watchdog's extensions.
func (k *keeper) decided(o *op) {
	k.inMu.Lock()
	k.inbox = append(k.inbox, o)
	k.inMu.Unlock()
	k.poke()
}

func (k *keeper) run() {
	defer close(k.done)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var inbox []*op
	var due []*Lock
	for {
		select {
		case <-k.stop:
			return
		case <-k.wake:
		case <-t.C:
		}
		k.inMu.Lock()
		inbox, k.inbox = k.inbox, inbox[:0]
		k.inMu.Unlock()
		for i, o := range inbox {
			l := o.lock
			k.mu.Lock()
			l.extending = false
			k.mu.Unlock()
			l.extendDone(o) // reschedules l, or ends it on failure
			inbox[i] = nil
		}

		now := int64(time.Since(k.e.epoch))
		k.mu.Lock()
		for len(k.h) > 0 && k.h[0].kAt <= now {
			due = append(due, heap.Pop(&k.h).(*Lock))
		}
		k.mu.Unlock()
		for i, l := range due {
			k.act(l, now)
			due[i] = nil
		}
		due = due[:0]

		k.mu.Lock()
		next := time.Hour
		if len(k.h) > 0 {
			next = time.Duration(k.h[0].kAt - now)
		}
		k.mu.Unlock()
		t.Reset(max(next, 0))
	}
}

// act handles l, popped from the heap because its time came: extend it,
// end it, or put it back.
func (k *keeper) act(l *Lock, now int64) {
	if l.ended() {
		return
	}
	k.mu.Lock()
	retrying := l.retryErr != nil
	k.mu.Unlock()
	if now >= l.until.Load()-int64(expiryGuard) || (retrying && now >= k.lastChance(l)) {
		l.end(l.expired())
		return
	}
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		l.end(ErrClosed)
		return
	}
	extend := l.auto && !l.extending && !l.maxed.Load()
	ttl := l.ttl
	if extend && l.holdEnd != 0 {
		// The last extensions end the validity by holdEnd.
		ttl = min(ttl, time.Duration(l.holdEnd-now))
		if ttl < l.ttl {
			l.maxed.Store(true) // the last extension
		}
	}
	if extend && (ttl < time.Millisecond || l.extensions.Load() >= int64(k.e.cfg.MaxExtensions)) {
		l.maxed.Store(true)
		extend = false
	}
	l.extending = extend
	if l.kIdx == 0 {
		l.kAt = k.nextAt(l)
		heap.Push(&k.h, l)
	}
	k.mu.Unlock()
	if extend {
		l.sendExtend(ttl, ttl.Milliseconds(), true)
	}
}

// close stops the scheduler and ends every lock it watched with ErrClosed
// (nothing extends them any more).
func (k *keeper) close() {
	k.mu.Lock()
	k.stopped = true
	k.mu.Unlock()
	ran := true
	k.start.Do(func() { ran = false }) // run can no longer start
	close(k.stop)
	if ran {
		<-k.done
	}
	k.mu.Lock()
	locks := append([]*Lock(nil), k.h...)
	k.mu.Unlock()
	for _, l := range locks {
		l.end(ErrClosed)
	}
}

// lockHeap orders locks by kAt; Lock.kIdx is the position + 1.
type lockHeap []*Lock

func (h lockHeap) Len() int           { return len(h) }
func (h lockHeap) Less(i, j int) bool { return h[i].kAt < h[j].kAt }
func (h lockHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].kIdx, h[j].kIdx = i+1, j+1
}
func (h *lockHeap) Push(x any) {
	l := x.(*Lock)
	l.kIdx = len(*h) + 1
	*h = append(*h, l)
}
func (h *lockHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	l.kIdx = 0
	return l
}
