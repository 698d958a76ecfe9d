package conn

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/redlock-dev/redlock/resp"
)

// Subscriber keeps one connection to a server subscribed to one Pub/Sub
// channel and calls a function with each message's payload, from its own
// goroutine. It dials and authenticates like a [Conn] with the same
// [Config], and reconnects with the same back-off after a failure.
// Messages published while it is disconnected are lost (Redis Pub/Sub
// delivers at most once): treat them as hints. Create it with [Subscribe];
// Close it when done.
type Subscriber struct {
	c      *Conn // dialing and handshake only: no session goroutines
	cancel context.CancelFunc
	done   chan struct{}
}

// Subscribe starts a Subscriber to channel on addr. fn receives each
// message's payload, valid only during the call.
func Subscribe(addr string, cfg Config, channel string, fn func(payload []byte)) *Subscriber {
	cfg.Scripts, cfg.DisableNative = nil, true // it sends no scripts: nothing to ask
	s := &Subscriber{c: &Conn{addr: addr, cfg: cfg.withDefaults()}, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.run(ctx, channel, fn)
	return s
}

// Close stops the Subscriber and waits for its goroutine. Idempotent.
func (s *Subscriber) Close() error {
	s.cancel()
	<-s.done
	return nil
}

func (s *Subscriber) run(ctx context.Context, channel string, fn func([]byte)) {
	defer close(s.done)
	backoff := s.c.cfg.ReconnectMin
	for ctx.Err() == nil {
		start := time.Now()
		s.session(ctx, channel, fn)
		if time.Since(start) > fastReconnectWindow {
			backoff = s.c.cfg.ReconnectMin
		}
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		backoff = min(2*backoff, s.c.cfg.ReconnectMax)
	}
}

// session connects, subscribes and delivers messages until the connection
// fails or ctx ends.
func (s *Subscriber) session(ctx context.Context, channel string, fn func([]byte)) {
	nc, rd, _, err := s.c.connect(ctx)
	if err != nil {
		return
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	if _, err := nc.Write(resp.AppendCommandStrings(nil, "SUBSCRIBE", channel)); err != nil {
		return
	}
	for {
		r, err := rd.ReadReply()
		if err != nil {
			return
		}
		// ["message", channel, payload]; the subscribe confirmation and
		// anything else are skipped.
		if len(r.Elems) == 3 && string(r.Elems[0].Str) == "message" {
			fn(r.Elems[2].Str)
		}
	}
}
