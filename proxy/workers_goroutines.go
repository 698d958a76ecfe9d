//go:build redlock_proxy_goroutines

package proxy

import "github.com/valyala/bytebufferpool"

// The build the pool replaced, kept for A/B measurements
// (docs/benchmarks.md): a goroutine per asynchronous command and a fresh
// reply buffer per reply. The in-flight slots bound both alike.
type workers struct{}

func newWorkers(int) (*workers, error) { return &workers{}, nil }

func (*workers) invoke(cl *call) error { go execute(cl); return nil }

func (*workers) release() {}

const pooledBuffers = false

func getBuffer() *bytebufferpool.ByteBuffer { return new(bytebufferpool.ByteBuffer) }

func putBuffer(*bytebufferpool.ByteBuffer) {}

func getBatch() *bytebufferpool.ByteBuffer { return new(bytebufferpool.ByteBuffer) }

func putBatch(*bytebufferpool.ByteBuffer) {}
