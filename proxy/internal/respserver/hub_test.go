package respserver

import (
	"slices"
	"testing"
)

// sub is a Subscriber that records what it was given, and drops once
// full (or takes nothing, when off).
type sub struct {
	got  []string
	room int
	off  bool
}

func (s *sub) Deliver(ch, msg string, shard bool) (queued, dropped bool) {
	switch {
	case s.off:
		return false, false
	case len(s.got) == s.room:
		return false, true
	}
	kind := "message"
	if shard {
		kind = "smessage"
	}
	s.got = append(s.got, kind+" "+ch+" "+msg)
	return true, false
}

// TestHub: a message reaches the subscribers of its channel only, in the
// kind each subscribed with; a full subscriber drops it and one that takes
// no messages is neither; none after Remove; empty channels are forgotten.
func TestHub(t *testing.T) {
	var h Hub[*sub]
	a, b, full, off := &sub{room: 10}, &sub{room: 10}, &sub{}, &sub{off: true}
	h.Add("c1", a, false)
	h.Add("c1", b, true)
	h.Add("c1", full, false)
	h.Add("c1", off, false)
	h.Add("c2", a, false)
	if q, d := h.Publish("c1", "0"); q != 2 || d != 1 {
		t.Fatalf("Publish(c1) = %d queued, %d dropped; want 2, 1", q, d)
	}
	if q, d := h.Publish("none", "0"); q != 0 || d != 0 {
		t.Fatalf("Publish(none) = %d, %d; want 0, 0", q, d)
	}
	h.Remove("c1", a)
	h.Publish("c1", "1")
	h.Publish("c2", "2")
	if want := []string{"message c1 0", "message c2 2"}; !slices.Equal(a.got, want) {
		t.Errorf("a got %q, want %q", a.got, want)
	}
	if want := []string{"smessage c1 0", "smessage c1 1"}; !slices.Equal(b.got, want) {
		t.Errorf("b got %q, want %q", b.got, want)
	}
	for _, s := range []*sub{b, full, off} {
		h.Remove("c1", s)
	}
	h.Remove("c2", a)
	if n := h.Channels(); n != 0 {
		t.Errorf("%d channels left after every Remove, want 0", n)
	}
}
