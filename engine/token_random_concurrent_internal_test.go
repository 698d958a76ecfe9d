package engine

import (
	"sync"
	"testing"
)

// TestReadRandomConcurrent (review of d658df8): tokens drawn at
// once by many goroutines through the pooled chunks never repeat (no
// chunk shared between two draws, no offset handed out twice), mixed
// sizes included: 20 bytes (a lock token), 16 (a waiter id), a chunk's
// size exactly and one more. Run alone (with -race to check the pool's
// use):
//
//	go test -race -run TestReadRandomConcurrent -count=1 ./engine
func TestReadRandomConcurrent(t *testing.T) {
	const goroutines, draws = 8, 4000
	var mu sync.Mutex
	seen := make(map[string]bool, goroutines*draws)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]string, 0, draws)
			for i := range draws {
				size := TokenLen / 2
				switch i % 97 {
				case 3:
					size = 16
				case 5:
					size = randChunkSize
				case 7:
					size = randChunkSize + 1
				case 11:
					size = randChunkSize - 3 // crosses a refill
				}
				b := make([]byte, size)
				readRandom(b)
				// 16 leading bytes identify a draw (2^-128 chance of a
				// coincidence): a repeat means bytes handed out twice.
				local = append(local, string(b[:16]))
			}
			mu.Lock()
			defer mu.Unlock()
			for _, s := range local {
				if seen[s] {
					t.Errorf("goroutine %d: bytes %x drawn twice", g, s)
					return
				}
				seen[s] = true
			}
		}()
	}
	wg.Wait()
}
