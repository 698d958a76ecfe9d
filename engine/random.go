package engine

import (
	crand "crypto/rand"
	"sync"
)

// readRandom fills b (a token's raw bytes: at most randChunkSize) from
// crypto/rand. Small reads are served from chunks read in one call: each
// call of crypto/rand costs about 200 ns whatever its size (the kernel's
// vgetrandom makes and erases a key per call), a fifth of a lock's
// preparation at 1,000 lockers. Every byte is handed out once and wiped
// from the chunk as it is, so the bytes are as unpredictable as
// crypto/rand's own (docs/safety.md, assumption T).
func readRandom(b []byte) {
	if len(b) > randChunkSize {
		crand.Read(b)
		return
	}
	c := randChunks.Get().(*randChunk)
	if c.off+len(b) > randChunkSize {
		crand.Read(c.buf[:])
		c.off = 0
	}
	n := copy(b, c.buf[c.off:])
	clear(c.buf[c.off : c.off+n])
	c.off += n
	randChunks.Put(c)
}

const randChunkSize = 1024

type randChunk struct {
	buf [randChunkSize]byte
	off int
}

var randChunks = sync.Pool{New: func() any { return &randChunk{off: randChunkSize} }}
