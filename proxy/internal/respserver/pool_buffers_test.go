package respserver

import (
	"testing"

	"github.com/valyala/bytebufferpool"
)

// TestReplyBuffersStaySmall: a reply is charged by its pooled buffer's
// capacity, so the reply pool must never hand out a batch-sized buffer
// (a 5-byte reply in a 64 KiB buffer would be 64 KiB of memory charged as
// 5 before, and MaxClientMemory would not bound it); batches have their
// own pool.
func TestReplyBuffersStaySmall(t *testing.T) {
	for range 64 {
		PutBuffer(&bytebufferpool.ByteBuffer{B: make([]byte, 0, FlushAt)})
		PutBatch(&bytebufferpool.ByteBuffer{B: make([]byte, 0, FlushAt)})
	}
	for range 256 {
		if b := GetBuffer(); cap(b.B) > MaxPooledReply {
			t.Fatalf("reply buffer of capacity %d from the pool, want ≤ %d", cap(b.B), MaxPooledReply)
		}
	}
	cl := &Call{out: []byte("+OK\r\n"), bb: &bytebufferpool.ByteBuffer{B: make([]byte, 5, 300)}}
	if got := cl.replyBytes(); got != 300 {
		t.Errorf("pooled reply charged %d bytes, want its capacity 300", got)
	}
	cl = &Call{out: []byte("+OK\r\n")}
	if got := cl.replyBytes(); got != 5 {
		t.Errorf("unpooled reply charged %d bytes, want 5", got)
	}
}
