package respserver

import (
	"time"

	"github.com/panjf2000/ants/v2"
	"github.com/valyala/bytebufferpool"
)

// Workers runs asynchronous commands (of type T: the proxy's calls) on a
// bounded ants pool: at most MaxInFlight workers, reused across commands
// (no goroutine start, and a stack already grown to the engine's depth),
// idle ones stopped after a second. The in-flight slots taken before
// Invoke keep it from ever having to queue (see proxy's pool.go).
type Workers[T any] struct {
	p *ants.PoolWithFuncGeneric[T]
}

// NewWorkers returns a pool of at most size workers, each running run.
func NewWorkers[T any](size int, run func(T)) (*Workers[T], error) {
	p, err := ants.NewPoolWithFuncGeneric(size, run)
	if err != nil {
		return nil, err
	}
	return &Workers[T]{p}, nil
}

// Invoke runs x on a worker; it fails only once the pool was released.
func (w *Workers[T]) Invoke(x T) error { return w.p.Invoke(x) }

// Release stops the pool and waits (at most a second) for its goroutines.
func (w *Workers[T]) Release() { w.p.ReleaseTimeout(time.Second) }

// replyPool holds reply buffers of at most MaxPooledReply bytes; batchPool
// the writers' batch buffers (up to FlushAt). Separate pools, so that a
// small reply never gets a batch-sized buffer (its capacity is charged).
var replyPool, batchPool bytebufferpool.Pool

// MaxPooledReply is the largest reply buffer kept for reuse.
const MaxPooledReply = 512

// FlushAt is the size of pending replies that is written without waiting
// for the next reply to be ready.
const FlushAt = 64 << 10

// GetBuffer returns a reply buffer from its pool; PutBuffer gives it back.
func GetBuffer() *bytebufferpool.ByteBuffer { return replyPool.Get() }

// PutBuffer keeps only small reply buffers: a reply is charged to the
// client's memory by its buffer's capacity (proxy's call.replyBytes), so a
// pooled buffer must never be much larger than the small replies it will
// carry.
func PutBuffer(b *bytebufferpool.ByteBuffer) {
	if cap(b.B) <= MaxPooledReply {
		replyPool.Put(b)
	}
}

// GetBatch returns a writer's batch buffer from its pool; PutBatch gives
// it back.
func GetBatch() *bytebufferpool.ByteBuffer { return batchPool.Get() }

// PutBatch keeps batch buffers up to FlushAt.
func PutBatch(b *bytebufferpool.ByteBuffer) {
	if cap(b.B) <= FlushAt { // a large reply's batch is left to the GC
		batchPool.Put(b)
	}
}
