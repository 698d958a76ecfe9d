package bench

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/scripts"
)

// rueidisLocker is Redlock written on rueidis clients
// (github.com/redis/rueidis): one rueidis.Client per master, with the
// library's defaults (auto-pipelining of concurrent Do calls over its
// default PipelineMultiplex connections) and DisableCache. It is what a
// competent rueidis user writes for Redlock over N independent masters,
// not a lock shipped by rueidis:
//
//   - acquire sends SET key token NX PX ttl to every master at once (one
//     goroutine per master but the first, which runs on the caller's), all
//     under one deadline of the engine's per-master timeout, and waits for
//     every reply (as redsync does); it succeeds with a quorum N/2+1 within
//     the validity ttl − elapsed − drift (the engine's drift allowance). A
//     failed acquire releases the key on every master that did not refuse
//     it (a timed-out SET may have landed).
//   - release runs the engine's compare-and-delete script
//     (rueidis.NewLuaScript: EVALSHA, EVAL on NOSCRIPT) on every master and
//     succeeds when a quorum deleted the key. It has no deadline of its
//     own: rueidis bounds every reply wait by its ConnWriteTimeout (10s by
//     default), as go-redis's read timeout bounds redsync's.
//
// Why not rueidislock (v1.0.79): its Locker builds one rueidis.Client from
// one ClientOption, and a lock is KeyMajority of 2·KeyMajority−1 keys
// ("prefix:i:name") all sent through that one client, one key after the
// other, each then kept alive by an extending goroutine. Its majority is
// over keys of one deployment, not over N independent masters: it is not
// Redlock, so it cannot be the peer of an engine that is.
type rueidisLocker struct {
	clients       []rueidis.Client // one per master, in Config.Masters order
	ttl           time.Duration
	ttlMillis     int64         // SET's PX argument
	masterTimeout time.Duration // bounds an acquire's fan-out
	drift         time.Duration // clock drift allowance for ttl
	quorum        int
}

// rueidisHandle is a lock taken by a rueidisLocker.
type rueidisHandle struct {
	key, token string
}

// errRueidisNotAcquired is matched by the rueidis peer's failed acquires
// that masters' refusals alone do not explain (errors, expired validity).
var errRueidisNotAcquired = errors.New("bench: rueidis: lock not acquired")

// rueidisRelease is the engine's compare-and-delete script, sent by rueidis.
var rueidisRelease = rueidis.NewLuaScript(scripts.Release.Source())

// newRueidisLocker connects one rueidis client to each of addrs.
func newRueidisLocker(addrs []string, cfg Config) (*rueidisLocker, error) {
	mt := cfg.masterTimeout()
	l := &rueidisLocker{
		ttl: cfg.TTL, ttlMillis: cfg.TTL.Milliseconds(), masterTimeout: mt, quorum: len(addrs)/2 + 1,
		drift: time.Duration(float64(cfg.TTL)*engine.DefaultDriftFactor) + engine.DefaultDriftMin,
	}
	for _, a := range addrs {
		c, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress: []string{a}, ForceSingleClient: true, DisableCache: true,
			ClientSetInfo: rueidis.DisableClientSetInfo, // as redsync's go-redis clients (DisableIndentity)
			Username:      cfg.MasterConn.Username, Password: cfg.MasterConn.Password, TLSConfig: cfg.MasterConn.TLS,
		})
		if err != nil {
			l.close()
			return nil, fmt.Errorf("bench: rueidis: master %s: %w", a, err)
		}
		l.clients = append(l.clients, c)
	}
	return l, nil
}

// each runs do for every master i with pick(i) (every master when pick is
// nil) at once: the first on the caller's goroutine, the others on one
// goroutine each. It returns when every do has returned.
func (l *rueidisLocker) each(pick func(i int) bool, do func(i int, c rueidis.Client)) {
	var wg sync.WaitGroup
	first := -1
	for i, c := range l.clients {
		switch {
		case pick != nil && !pick(i):
		case first < 0:
			first = i
		default:
			wg.Go(func() { do(i, c) })
		}
	}
	if first >= 0 {
		do(first, l.clients[first])
	}
	wg.Wait()
}

func (l *rueidisLocker) acquire(ctx context.Context, key string) (any, bool, error) {
	var tok [20]byte
	_, _ = crand.Read(tok[:])
	h := &rueidisHandle{key: key, token: hex.EncodeToString(tok[:])}
	t1 := time.Now()
	actx, cancel := context.WithTimeout(ctx, l.masterTimeout)
	errs := make([]error, len(l.clients))
	l.each(nil, func(i int, c rueidis.Client) {
		errs[i] = c.Do(actx, c.B().Set().Key(key).Value(h.token).Nx().PxMilliseconds(l.ttlMillis).Build()).Error()
	})
	cancel()
	validity := l.ttl - time.Since(t1) - l.drift
	granted, refused := 0, 0
	var failed []error
	for i, err := range errs {
		switch {
		case err == nil:
			granted++
		case rueidis.IsRedisNil(err):
			refused++
		default:
			failed = append(failed, fmt.Errorf("master %d: %w", i, err))
		}
	}
	if granted >= l.quorum && validity > 0 {
		return h, false, nil
	}
	cerr := l.cleanup(ctx, h, func(i int) bool { return !rueidis.IsRedisNil(errs[i]) })
	switch {
	case ctx.Err() != nil:
		return nil, false, ctx.Err()
	case refused > len(l.clients)-l.quorum: // the refusals alone rule out a quorum
		return nil, true, nil
	}
	return nil, false, fmt.Errorf("%w: %d/%d masters granted, validity left %v: %w",
		errRueidisNotAcquired, granted, len(l.clients), validity, errors.Join(append(failed, cerr)...))
}

// cleanup releases h on the masters pick selects after a failed acquire,
// even when ctx has ended, within engine.DefaultCleanupTimeout.
func (l *rueidisLocker) cleanup(ctx context.Context, h *rueidisHandle, pick func(i int) bool) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), engine.DefaultCleanupTimeout)
	defer cancel()
	_, err := l.unlock(ctx, h, pick)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	return nil
}

// unlock runs the compare-and-delete script for h on the masters pick
// selects (nil: all) and returns how many deleted the key, with every
// master's error joined.
func (l *rueidisLocker) unlock(ctx context.Context, h *rueidisHandle, pick func(i int) bool) (int, error) {
	deleted := make([]bool, len(l.clients))
	errs := make([]error, len(l.clients))
	keys, args := []string{h.key}, []string{h.token}
	l.each(pick, func(i int, c rueidis.Client) {
		n, err := rueidisRelease.Exec(ctx, c, keys, args).AsInt64()
		if err != nil {
			errs[i] = fmt.Errorf("master %d: %w", i, err)
		}
		deleted[i] = n == 1
	})
	n := 0
	for _, d := range deleted {
		if d {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// wait implements waiter the way the Redlock description says to retry:
// after any failed attempt (refused, or errRueidisNotAcquired), a random
// delay in [base, 2·base) with the engine's base (engine.DefaultRetryDelay),
// until ctx ends.
func (l *rueidisLocker) wait(ctx context.Context, key string) (any, error) {
	for {
		h, contended, err := l.acquire(ctx, key)
		if err == nil && !contended {
			return h, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		t := time.NewTimer(engine.DefaultRetryDelay + rand.N(engine.DefaultRetryDelay))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func (l *rueidisLocker) release(ctx context.Context, hv any) error {
	h := hv.(*rueidisHandle)
	n, err := l.unlock(ctx, h, nil)
	if n >= l.quorum {
		return nil
	}
	return fmt.Errorf("bench: rueidis: release of %q confirmed by %d/%d masters: %w", h.key, n, len(l.clients), err)
}

// close closes every client; rueidis waits for its connections' goroutines.
func (l *rueidisLocker) close() error {
	for _, c := range l.clients {
		c.Close()
	}
	l.clients = nil
	return nil
}
