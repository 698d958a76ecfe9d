package redisson

import (
	"strings"
	"testing"
)

// subscriber is a Publisher with one subscriber, of channel ch: what it
// was sent.
type subscriber struct {
	ch   string
	msgs []string
}

func (p *subscriber) Publish(ch, msg string) int {
	if ch != p.ch {
		return 0
	}
	p.msgs = append(p.msgs, msg)
	return 1
}

// TestWakeMessages: what the wake channel carries is a hint from anyone
// with PUBLISH on the masters: a message wakes this proxy's subscribers
// of a Redisson lock channel of its own tenant, each id once, and
// anything else is dropped.
func TestWakeMessages(t *testing.T) {
	const ch = "redisson_lock__channel:{a}"
	sub := &subscriber{ch: ch}
	s := &Locks{cfg: Config{KeyPrefix: "t1:", Publisher: sub}}
	w := &wakeRelay{s: s, seen: map[string]struct{}{}}
	id := func(n int) string { return "00000000000000" + string(rune('a'+n/26)) + string(rune('a'+n%26)) }
	long := "t1:" + ChannelPrefix + string(make([]byte, MaxChannelLen))
	cases := []struct {
		name    string
		payload string
		woken   bool
	}{
		{"the lock's channel", id(0) + " t1:" + ch, true},
		{"the same id again", id(0) + " t1:" + ch, false},
		{"another id", id(1) + " t1:" + ch, true},
		{"another tenant", id(2) + " t2:" + ch, false},
		{"no prefix", id(3) + " " + ch, false},
		{"not a wake channel", id(4) + " t1:__keyspace@0__:x", false},
		{"a channel too long", id(5) + " " + long, false},
		{"a short id", "abc t1:" + ch, false},
		{"no separator", id(6), false},
		{"empty", "", false},
	}
	for _, tc := range cases {
		sub.msgs = nil
		w.received([]byte(tc.payload))
		switch woken := len(sub.msgs) > 0; {
		case woken && !tc.woken:
			t.Errorf("%s: woke a subscriber", tc.name)
		case !woken && tc.woken:
			t.Errorf("%s: no wake-up", tc.name)
		}
	}
}

// FuzzWakeMessage: no message of the wake channel panics the proxy or
// wakes a subscriber of a channel that is not a Redisson lock's.
func FuzzWakeMessage(f *testing.F) {
	f.Add([]byte("0123456789abcdef redisson_lock__channel:{a}"))
	f.Add([]byte("0123456789abcdef:1 redisson_rwlock:{a}"))
	f.Add([]byte("0123456789abcdef:2 redisson_rwlock:{a}"))
	f.Add([]byte("0123456789abcdef "))
	f.Add([]byte(" "))
	f.Fuzz(func(t *testing.T, payload []byte) {
		// A subscriber of whatever channel the message names.
		_, ch, _ := strings.Cut(string(payload), " ")
		sub := &subscriber{ch: ch}
		s := &Locks{cfg: Config{Publisher: sub}}
		w := &wakeRelay{s: s, seen: map[string]struct{}{}}
		w.received(payload)
		if len(sub.msgs) > 0 && (!Channel(ch) || len(ch) > MaxChannelLen) {
			t.Fatalf("woke a subscriber of %q", ch)
		}
		for _, m := range sub.msgs {
			// The message is Redisson's 0 or 1, whatever the payload.
			if m != "0" && m != "1" {
				t.Fatalf("published %q", m)
			}
		}
	})
}
