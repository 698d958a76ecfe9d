package bench

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/internal/members"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

// engineLocker drives this module's engine.
type engineLocker struct {
	e    *engine.Engine
	ttl  time.Duration
	opts []engine.Option // per acquisition (PeerFencing: WithFencing)
	kind string          // a lock-kind workload (WorkloadReentrant, …); "" for the plain lock
}

func newEngineLocker(ctx context.Context, addrs []string, cfg Config) (*engineLocker, error) {
	ec := engine.Config{ConnsPerMaster: cfg.ConnsPerMaster, MasterTimeout: cfg.MasterTimeout, MergeMax: cfg.MergeMax,
		Conn: cfg.masterConn(), FreshMasters: cfg.FreshMasters, MaxTTL: cfg.maxTTL(), Names: cfg.Names,
		DisableClockCheck: cfg.DisableClockCheck}
	if err := members.Apply(&ec, addrs); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	if cfg.metrics != nil {
		ec.Observer = cfg.metrics
	}
	e, err := engine.New(ec)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if cfg.metrics != nil {
		if err := cfg.metrics.Watch(e); err != nil {
			e.Close()
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := e.WaitReady(wctx); err != nil {
		e.Close()
		return nil, fmt.Errorf("bench: %w", err)
	}
	// This engine judges the masters' ages itself (to the second of their
	// uptime): it may see the quarantine end a little after the probe did.
	if err := waitVoting(ctx, e, cfg.Notice); err != nil {
		e.Close()
		return nil, err
	}
	return &engineLocker{e: e, ttl: cfg.TTL}, nil
}

func (l *engineLocker) acquire(ctx context.Context, key string) (any, bool, error) {
	var lk *engine.Lock
	var err error
	switch l.kind {
	case WorkloadReentrant:
		r, err := l.e.NewReentrant(key, "")
		if err == nil {
			err = r.TryLock(ctx, l.ttl)
		}
		if err != nil {
			return nil, errors.Is(err, engine.ErrNotAcquired), err
		}
		if err := r.TryLock(ctx, l.ttl); err != nil { // nested: one script per master
			r.Unlock(ctx)
			return nil, false, err
		}
		return r, false, nil
	case WorkloadRW:
		var rw *engine.RWLock
		if rw, err = l.e.NewRWLock(key); err == nil {
			lk, err = rw.TryRLock(ctx, l.ttl)
		}
	case WorkloadSemaphore:
		var s *engine.Semaphore
		if s, err = l.e.NewSemaphore(key, 4); err == nil {
			lk, err = s.TryAcquire(ctx, l.ttl)
		}
	default:
		lk, err = l.e.TryLock(ctx, key, l.ttl, l.opts...)
	}
	if err != nil {
		return nil, errors.Is(err, engine.ErrNotAcquired), err
	}
	return lk, false, nil
}

// wait implements waiter: Lock, which queues and is handed the key.
func (l *engineLocker) wait(ctx context.Context, key string) (any, error) {
	lk, err := l.e.Lock(ctx, key, l.ttl, l.opts...)
	if err != nil {
		return nil, err
	}
	return lk, nil
}

func (l *engineLocker) release(ctx context.Context, h any) error {
	if r, ok := h.(*engine.Reentrant); ok {
		r.Unlock(ctx) // the nested hold: no master traffic
		return r.Unlock(ctx)
	}
	return h.(*engine.Lock).Unlock(ctx)
}

func (l *engineLocker) close() error { return l.e.Close() }

// pipeline implements pipeliner: requests and write syscalls over all
// master connections so far.
func (l *engineLocker) pipeline() (requests, writes uint64) {
	for i := range l.e.Masters() {
		for _, c := range enginex.Open(l.e).Conns(i) {
			st := c.Stats()
			requests += st.Requests
			writes += st.Writes
		}
	}
	return requests, writes
}

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
		c := goredis.NewClient(&goredis.Options{Addr: a, PoolSize: cfg.Concurrency, DisableIndentity: true,
			Username: cfg.MasterConn.Username, Password: cfg.MasterConn.Password, TLSConfig: cfg.MasterConn.TLS})
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

// wait implements waiter with redsync's own waiting: its defaults (32
// tries, a random 50–250 ms delay between them), and a new call while it
// fails (the wait is measured from the first call).
func (l *redsyncLocker) wait(ctx context.Context, key string) (any, error) {
	m := l.rs.NewMutex(key, redsync.WithExpiry(l.ttl))
	for {
		err := m.LockContext(ctx)
		if err == nil {
			return m, nil
		}
		var taken *redsync.ErrTaken
		if ctx.Err() != nil || !(errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken)) {
			return nil, err
		}
	}
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

// proxyLocker drives a RESP proxy (or anything speaking the same
// protocol: a single redis-server works) with this module's pipelined
// connection: SET key token NX PX ttl to acquire, the compare-and-delete
// EVALSHA to release. Workers share ConnsPerMaster connections.
type proxyLocker struct {
	conns []*conn.Conn
	ttl   string
	next  atomic.Uint64
	calls sync.Pool // *proxyCall
}

// proxyHandle is an acquired lock on the proxy.
type proxyHandle struct {
	key, token string
	c          *conn.Conn
}

// proxyCall is one request in flight; its channel receives the outcome.
type proxyCall struct {
	buf []byte
	ch  chan proxyOutcome
}

type proxyOutcome struct {
	ok, null bool
	n        int64
	err      error
}

// Complete implements conn.Callback.
func (c *proxyCall) Complete(_ uint64, r resp.Reply, err error) {
	var o proxyOutcome
	switch {
	case err != nil:
		o.err = err
	case r.IsError():
		o.err = r.Err()
	case r.IsNull():
		o.null = true
	default:
		o.ok, o.n = r.IsOK(), r.Int
	}
	c.ch <- o
}

func newProxyLocker(ctx context.Context, cfg Config) (*proxyLocker, error) {
	l := &proxyLocker{ttl: strconv.FormatInt(cfg.TTL.Milliseconds(), 10)}
	l.calls.New = func() any { return &proxyCall{ch: make(chan proxyOutcome, 1)} }
	for range max(cfg.ConnsPerMaster, 1) {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cc := cfg.ProxyConn
		cc.Scripts = []*conn.Script{scripts.Release}
		c, err := conn.Dial(dctx, cfg.ProxyAddr, cc)
		cancel()
		if err != nil {
			l.close()
			return nil, fmt.Errorf("bench: proxy %s: %w", cfg.ProxyAddr, err)
		}
		l.conns = append(l.conns, c)
	}
	return l, nil
}

// do sends the command built by build and waits for its outcome.
// proxyCallTimeout bounds one call to the proxy when ctx has no deadline.
const proxyCallTimeout = 5 * time.Second

func (l *proxyLocker) do(ctx context.Context, c *conn.Conn, script *conn.Script, build func([]byte) []byte) proxyOutcome {
	call := l.calls.Get().(*proxyCall)
	call.buf = build(call.buf[:0])
	req := conn.Request{Cmd: call.buf, Callback: call, Script: script}
	if dl, ok := ctx.Deadline(); ok {
		req.Deadline = dl
	} else {
		req.Deadline = time.Now().Add(proxyCallTimeout) // a stalled proxy cannot hang a worker
	}
	if err := c.Do(req); err != nil {
		l.calls.Put(call)
		return proxyOutcome{err: err}
	}
	select {
	case o := <-call.ch:
		l.calls.Put(call)
		return o
	case <-ctx.Done():
		// The callback will still fire into the buffered channel; the
		// call is not reused.
		return proxyOutcome{err: ctx.Err()}
	}
}

func (l *proxyLocker) acquire(ctx context.Context, key string) (any, bool, error) {
	var tok [20]byte
	_, _ = crand.Read(tok[:])
	h := &proxyHandle{key: key, token: hex.EncodeToString(tok[:]), c: l.conns[l.next.Add(1)%uint64(len(l.conns))]}
	o := l.do(ctx, h.c, nil, func(b []byte) []byte {
		return resp.AppendCommandStrings(b, "SET", key, h.token, "NX", "PX", l.ttl)
	})
	switch {
	case o.err != nil:
		return nil, false, o.err
	case o.null:
		return nil, true, nil
	case !o.ok:
		return nil, false, errors.New("bench: proxy: unexpected SET reply")
	}
	return h, false, nil
}

func (l *proxyLocker) release(ctx context.Context, hv any) error {
	h := hv.(*proxyHandle)
	o := l.do(ctx, h.c, scripts.Release, func(b []byte) []byte {
		b = scripts.Release.AppendEvalSha(b, 1, 1)
		b = resp.AppendBulkString(b, h.key)
		return resp.AppendBulkString(b, h.token)
	})
	switch {
	case o.err != nil:
		return o.err
	case o.n != 1:
		return fmt.Errorf("bench: proxy: release of %q not confirmed (reply %d)", h.key, o.n)
	}
	return nil
}

func (l *proxyLocker) close() error {
	for _, c := range l.conns {
		c.Close()
	}
	return nil
}
