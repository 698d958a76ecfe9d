package proxy

import (
	"time"

	"github.com/panjf2000/ants/v2"
	"github.com/valyala/bytebufferpool"
)

// workers runs asynchronous commands on a bounded ants pool: at most
// MaxInFlight workers, reused across commands (no goroutine start, and a
// stack already grown to the engine's depth), idle ones stopped after a
// second. The in-flight slots taken before invoke keep it from ever
// having to queue (see pool.go).
type workers struct {
	p *ants.PoolWithFuncGeneric[*call]
}

func newWorkers(size int) (*workers, error) {
	p, err := ants.NewPoolWithFuncGeneric(size, execute)
	if err != nil {
		return nil, err
	}
	return &workers{p}, nil
}

func (w *workers) invoke(cl *call) error { return w.p.Invoke(cl) }

// release stops the pool and waits (at most a second) for its goroutines.
func (w *workers) release() { w.p.ReleaseTimeout(time.Second) }

// Reply and write buffers come from their pools and go back after use.
func getBuffer() *bytebufferpool.ByteBuffer { return replyPool.Get() }

// putBuffer keeps only small reply buffers: a reply is charged to the
// client's memory by its buffer's capacity (call.replyBytes), so a pooled
// buffer must never be much larger than the small replies it will carry.
func putBuffer(b *bytebufferpool.ByteBuffer) {
	if cap(b.B) <= maxPooledReply {
		replyPool.Put(b)
	}
}

func getBatch() *bytebufferpool.ByteBuffer { return batchPool.Get() }

func putBatch(b *bytebufferpool.ByteBuffer) {
	if cap(b.B) <= flushAt { // a large reply's batch is left to the GC
		batchPool.Put(b)
	}
}
