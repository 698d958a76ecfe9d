package lockcmds

import (
	"testing"
	"time"
)

// TestRefusals: a refused key and value is remembered for refusalMemory,
// not another key or value, and a grant of the same key and value forgets
// it (a retry that got the lock with the value it was refused with).
func TestRefusals(t *testing.T) {
	r := newRefusals()
	k, v := []byte("key"), []byte("value")
	if r.remembered(k, v) {
		t.Fatal("remembered before any refusal")
	}
	r.granted(k, v) // no table yet: nothing to forget
	r.refused(k, v)
	for _, x := range []struct {
		key, value string
		want       bool
	}{
		{"key", "value", true},
		{"key", "other", false},
		{"other", "value", false},
		{"keyv", "alue", false}, // the same bytes, split elsewhere
	} {
		if got := r.remembered([]byte(x.key), []byte(x.value)); got != x.want {
			t.Errorf("remembered(%q, %q) = %v, want %v", x.key, x.value, got, x.want)
		}
	}
	r.granted([]byte("key"), []byte("other")) // another value's grant forgets nothing
	if !r.remembered(k, v) {
		t.Fatal("forgotten by another value's grant")
	}
	r.granted(k, v)
	if r.remembered(k, v) {
		t.Fatal("remembered after a grant of the same key and value")
	}
	// Older than refusalMemory: forgotten.
	r.refused(k, v)
	r.start = r.start.Add(-refusalMemory + time.Second)
	if !r.remembered(k, v) {
		t.Fatal("forgotten within refusalMemory")
	}
	r.start = r.start.Add(-2 * time.Second)
	if r.remembered(k, v) {
		t.Fatal("remembered longer than refusalMemory")
	}
}
