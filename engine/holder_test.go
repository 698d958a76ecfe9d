package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/engine"
)

func TestHolder(t *testing.T) {
	v := newEnv(t, 5, functional)
	ctx := context.Background()
	h, err := v.e.Holder(ctx, "h:key")
	if err != nil || h.Token != "" {
		t.Fatalf("free key: %+v, %v", h, err)
	}
	l := v.mustLock("h:key", 3*time.Second)
	h, err = v.e.Holder(ctx, "h:key")
	if err != nil || h.Token != l.Token() {
		t.Fatalf("held key: %+v, %v; want token %s", h, err, l.Token())
	}
	if h.Remaining <= 2*time.Second || h.Remaining > 3*time.Second {
		t.Fatalf("remaining %v; want in (2s, 3s]", h.Remaining)
	}
	if _, err := v.e.Holder(ctx, ""); !errors.Is(err, engine.ErrBadArgument) {
		t.Fatalf("empty key: %v", err)
	}

	// Split answers: the token a quorum holds, else free — only when the
	// masters that did not answer could not make a quorum of any.
	set := func(key string, vals ...string) {
		for i, val := range vals {
			v.mustExec(i, "DEL", key)
			if val != "" {
				v.mustExec(i, "SET", key, val, "PX", "10000")
			}
		}
	}
	set("h:split", "A", "B", "A", "", "A")
	if h, err := v.e.Holder(ctx, "h:split"); err != nil || h.Token != "A" {
		t.Fatalf("A on 3 of 5: %+v, %v", h, err)
	}
	set("h:split", "A", "B", "A", "B", "")
	if h, err := v.e.Holder(ctx, "h:split"); err != nil || h.Token != "" {
		t.Fatalf("A on 2, B on 2: %+v, %v; want free", h, err)
	}
	// Held on 0 and 1; 2 and 3 stopped: A could hold 2 and 3 too.
	set("h:split", "A", "A", "", "", "")
	v.pause(2, 3)
	_, err = v.e.Holder(ctx, "h:split")
	if !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("A on 2 answering masters, 2 silent: %v; want ErrUnavailable", err)
	}
	if qe := quorumError(t, err); qe.Answered != 3 || qe.Granted != 2 {
		t.Fatalf("answered %d granted %d; want 3, 2", qe.Answered, qe.Granted)
	}
}

// Holder, like Leader, decides within ctx's deadline: with one of five
// masters stopped, a read whose ctx is shorter than the per-master
// timeout names the holder instead of returning ctx's error.
//
// Found by the adversarial review of engine.Election (issue #34): it
// failed on the first version.
func TestHolderWithinContext(t *testing.T) {
	cfg := functional
	cfg.MasterTimeout = 4 * time.Second
	v := newEnv(t, 5, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l := v.mustLock(keyName(t), 10*time.Second)
	v.waitHeld(l.Key(), l.Token())
	v.pause(4)
	// A quarter of the per-master timeout: a second's room for a busy
	// machine (300 ms once ran out under load 25), still a context that
	// ends long before the stopped master's request does.
	rctx, rcancel := context.WithTimeout(ctx, time.Second)
	defer rcancel()
	if h, err := v.e.Holder(rctx, l.Key()); err != nil || h.Token != l.Token() {
		t.Fatalf("Holder with 4 of 5 masters answering within 1s: %+v, %v; want the holder", h, err)
	}
}
