package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/engine"
)

// engineLocker drives this module's engine.
type engineLocker struct {
	e   *engine.Engine
	ttl time.Duration
}

func newEngineLocker(ctx context.Context, addrs []string, cfg Config) (*engineLocker, error) {
	e, err := engine.New(engine.Config{Addrs: addrs, ConnsPerMaster: cfg.ConnsPerMaster})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.WaitReady(wctx); err != nil {
		e.Close()
		return nil, fmt.Errorf("bench: %w", err)
	}
	return &engineLocker{e: e, ttl: cfg.TTL}, nil
}

func (l *engineLocker) acquire(ctx context.Context, key string) (any, bool, error) {
	lk, err := l.e.TryLock(ctx, key, l.ttl)
	if err != nil {
		return nil, errors.Is(err, engine.ErrNotAcquired), err
	}
	return lk, false, nil
}

func (l *engineLocker) release(ctx context.Context, h any) error {
	return h.(*engine.Lock).Unlock(ctx)
}

func (l *engineLocker) close() error { return l.e.Close() }

// redsyncLocker drives go-redsync/redsync v4 over go-redis v9 clients, one
// per master, each with a pool as large as the concurrency (so the pool is
// not the bottleneck) and WithTries(1) (one attempt, like TryLock).
type redsyncLocker struct {
	rs      *redsync.Redsync
	clients []*goredis.Client
	ttl     time.Duration
}

func newRedsyncLocker(addrs []string, cfg Config) *redsyncLocker {
	l := &redsyncLocker{ttl: cfg.TTL}
	var pools []rsredis.Pool
	for _, a := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: a, PoolSize: cfg.Concurrency, DisableIndentity: true})
		l.clients = append(l.clients, c)
		pools = append(pools, rsgoredis.NewPool(c))
	}
	l.rs = redsync.New(pools...)
	return l
}

func (l *redsyncLocker) acquire(ctx context.Context, key string) (any, bool, error) {
	m := l.rs.NewMutex(key, redsync.WithTries(1), redsync.WithExpiry(l.ttl))
	if err := m.LockContext(ctx); err != nil {
		var taken *redsync.ErrTaken
		return nil, errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken), err
	}
	return m, false, nil
}

func (l *redsyncLocker) release(ctx context.Context, h any) error {
	ok, err := h.(*redsync.Mutex).UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock not confirmed")
	}
	return err
}

func (l *redsyncLocker) close() error {
	var errs []error
	for _, c := range l.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
