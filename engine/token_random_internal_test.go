package engine

import (
	"bytes"
	"testing"
)

// TestReadRandomFresh: tokens drawn from the shared chunks are all
// different across many chunk refills, a read never returns bytes a
// previous read returned (each byte is handed out once and wiped), and a
// read larger than a chunk is served whole.
func TestReadRandomFresh(t *testing.T) {
	seen := make(map[[TokenLen / 2]byte]bool)
	for range 5 * randChunkSize / (TokenLen / 2) {
		var raw [TokenLen / 2]byte
		readRandom(raw[:])
		if seen[raw] {
			t.Fatalf("token bytes %x drawn twice", raw)
		}
		seen[raw] = true
	}
	c := randChunks.Get().(*randChunk)
	if c.off > 0 && !bytes.Equal(c.buf[:c.off], make([]byte, c.off)) {
		t.Errorf("%d bytes handed out are still in the chunk", c.off)
	}
	randChunks.Put(c)
	big := make([]byte, 3*randChunkSize)
	readRandom(big)
	if zeros := bytes.Count(big, []byte{0}); zeros > len(big)/16 {
		t.Errorf("a %d-byte read has %d zero bytes: not filled", len(big), zeros)
	}
}
