//go:build unix

package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

// proxyTimeout bounds one command sent to the proxy (it answers within its
// per-master timeouts; this covers the network to the proxy).
const proxyTimeout = 5 * time.Second

// proxyLock is a lock held through a redlock proxy: REDLOCK.LOCK takes it
// with a fencing token, the engine's compare-and-pexpire script (which the
// proxy runs as a quorum extension) keeps it, the compare-and-delete
// releases it. The proxy does the quorum and validity accounting per
// command; proxyLock keeps its own validity from the time it sent each
// successful command, so a proxy that stops answering costs at most the
// remaining validity before the loss is signalled.
type proxyLock struct {
	c              *conn.Conn
	key, token     string
	fence          int64
	ttl, maxHold   time.Duration
	driftFactor    float64       // the larger of --drift-factor and the proxy's
	driftMin       time.Duration // the larger of the engine's default and the proxy's
	acquired       time.Time
	log            *slog.Logger
	done, stop     chan struct{}
	ctx            context.Context // cancelled by halt: ends an extension in flight
	cancel         context.CancelFunc
	wg             sync.WaitGroup
	mu             sync.Mutex
	until          time.Time // validity end, as of the last granted command
	err            error     // why the lock ended (set once, before done closes)
	stopOnce, once sync.Once
}

// proxyAcquire connects to the proxy and takes the lock, waiting up to
// o.wait while it is held.
func proxyAcquire(ctx context.Context, o lockOpts, log *slog.Logger) (heldLock, func(), error) {
	if err := checkAddrs("proxy", []string{o.proxyAddr}); err != nil {
		return nil, nil, err
	}
	cfg := conn.Config{Password: firstNonEmpty(o.proxyPwd, os.Getenv(envProxyPassword))}
	if o.proxyTLSCA != "" || o.proxyTLSCert != "" || o.proxyTLSKey != "" {
		tc, err := clientTLS("proxy-tls-ca", o.proxyTLSCA, o.proxyTLSCert, o.proxyTLSKey)
		if err != nil {
			return nil, nil, err
		}
		cfg.TLS = tc
	}
	dctx, cancel := context.WithTimeout(ctx, proxyTimeout)
	c, err := conn.Dial(dctx, o.proxyAddr, cfg)
	cancel()
	if err != nil {
		// conn names the far end a master: here it is the proxy.
		why := strings.Replace(cleanError(err), "master not connected: ", "", 1)
		if errors.Is(err, conn.ErrAuth) {
			return nil, nil, exitError{exitConfig, fmt.Sprintf("the proxy %s refused the password: %s (set it with --proxy-password or $%s)", o.proxyAddr, why, envProxyPassword)}
		}
		if msg := tlsMismatch(err, cfg.TLS != nil); msg != "" {
			return nil, nil, exitError{exitConfig, fmt.Sprintf("proxy %s: %s: %s", o.proxyAddr, msg, why)}
		}
		return nil, nil, exitError{exitUnavailable, fmt.Sprintf("proxy %s: %s", o.proxyAddr, why)}
	}
	l := &proxyLock{c: c, key: o.key, ttl: o.ttl, maxHold: o.maxHold,
		driftFactor: o.driftFactor, driftMin: engine.DefaultDriftMin, log: log, done: make(chan struct{}), stop: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	// The proxy's drift allowance (INFO proxy): the larger of each part
	// and ours, so that our validity is never longer than the proxy's. A
	// proxy that does not say (an older one) leaves --drift-factor, with a
	// warning: it must then match the proxy's.
	rep, err := l.exec(ctx, "INFO", "proxy")
	f, m, haveF, haveM := proxyDrift(string(rep.Str))
	if haveF {
		l.driftFactor = max(l.driftFactor, f)
	}
	if haveM {
		l.driftMin = max(l.driftMin, m)
	}
	if err != nil || !haveF || !haveM {
		log.Warn("the proxy did not report its drift allowance; using --drift-factor (it must not be below the proxy's)",
			"drift_factor", l.driftFactor, "err", err)
	}
	log.Info("drift allowance", "factor", l.driftFactor, "min", l.driftMin)
	if err := l.acquire(ctx, o); err != nil {
		c.Close()
		return nil, nil, err
	}
	l.wg.Go(l.keep)
	return l, func() { l.halt(); c.Close() }, nil
}

// acquire sends REDLOCK.LOCK until it is granted or the wait is over.
func (l *proxyLock) acquire(ctx context.Context, o lockOpts) error {
	deadline := time.Now().Add(o.wait)
	// The masters get whole milliseconds: validity counts on no more.
	msTTL := max(l.ttl.Milliseconds(), 1)
	ttl := min(l.ttl, time.Duration(msTTL)*time.Millisecond)
	ms := strconv.FormatInt(msTTL, 10)
	for {
		// A fresh token per attempt: the release of an earlier attempt
		// that went unanswered may still run on the proxy (or the
		// masters) after this attempt's grant, and must not match it.
		l.token = newToken()
		sent := time.Now()
		rep, err := l.exec(ctx, "REDLOCK.LOCK", l.key, l.token, ms)
		switch {
		case err == nil && !rep.IsNull():
			n, ok := intReply(rep)
			if !ok {
				return fmt.Errorf("proxy answered REDLOCK.LOCK with %s, not a fencing token", rep.String())
			}
			l.fence, l.acquired, l.until = n, sent, l.validUntil(sent, ttl)
			if time.Until(l.until) > 0 {
				return nil
			}
			l.releaseQuietly() // granted, but the answer came too late to use it
		case err != nil && !isErrorReply(err):
			// No answer: the proxy may have granted it; take back our token.
			l.releaseQuietly()
		}
		switch {
		case ctx.Err() != nil:
			return interrupted(ctx, waitInterrupted)
		case err != nil && isErrorReply(err) && strings.HasPrefix(err.Error(), "ERR redlock proxy: misconfigured"):
			// The proxy's masters refuse for good (an ACL rule): waiting
			// cannot help.
			return exitError{exitConfig, fmt.Sprintf("proxy %s: %s", o.proxyAddr, cleanError(err))}
		case err != nil && isErrorReply(err) && (strings.HasPrefix(err.Error(), "ERR redlock proxy: invalid argument: ") || strings.HasPrefix(err.Error(), "ERR invalid argument: ")):
			// (The second: proxies before the refusals' common prefix.)
			// The proxy refused the request itself (a TTL over its
			// --max-ttl): trying again cannot help.
			return usageError{fmt.Errorf("proxy %s refused the lock: %s", o.proxyAddr, cleanError(err))}
		case err != nil && !time.Now().Before(deadline):
			return exitError{exitUnavailable, fmt.Sprintf("proxy %s: %s", o.proxyAddr, cleanError(err))}
		case err == nil && !time.Now().Before(deadline):
			return acquireExit(ctx, engine.ErrNotAcquired, o)
		}
		// Held (or the proxy could not tell): wait until the quorum's TTL
		// says the key may be free, within the wait.
		pause := 100 * time.Millisecond
		if err == nil {
			if p, perr := l.exec(ctx, "PTTL", l.key); perr == nil {
				if n, ok := intReply(p); ok && n > 0 {
					pause = time.Duration(n)*time.Millisecond + time.Millisecond
				}
			}
		}
		pause = min(pause, time.Second) + time.Duration(mrand.Int64N(int64(pause/10)+1))
		pause = min(pause, time.Until(deadline))
		select {
		case <-ctx.Done():
			return interrupted(ctx, waitInterrupted)
		case <-time.After(max(pause, 0)):
		}
	}
}

// validUntil is the validity end of a grant of ttl asked at sent: TTL minus
// the clock drift allowance the proxy also uses (--drift-factor).
func (l *proxyLock) validUntil(sent time.Time, ttl time.Duration) time.Time {
	drift := time.Duration(float64(ttl)*l.driftFactor) + l.driftMin
	return sent.Add(ttl - drift)
}

// proxyDrift reads the drift allowance from a proxy's INFO proxy section:
// drift_factor and drift_min_us, each reported as found and valid.
func proxyDrift(info string) (factor float64, minDrift time.Duration, haveF, haveM bool) {
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "drift_factor":
			f, err := strconv.ParseFloat(v, 64)
			factor, haveF = f, err == nil && f >= 0 && f < 1
		case "drift_min_us":
			us, err := strconv.ParseInt(v, 10, 64)
			minDrift, haveM = time.Duration(us)*time.Microsecond, err == nil && us >= 0
		}
	}
	return factor, minDrift, haveF, haveM
}

// nextExtension is when the keeper extends next: after a third of the TTL,
// or half the validity left if that is sooner (a large drift factor).
func (l *proxyLock) nextExtension() time.Duration {
	l.mu.Lock()
	left := time.Until(l.until)
	l.mu.Unlock()
	return max(min(l.ttl/3, left/2), time.Millisecond)
}

// keep extends the lock every third of its TTL (sooner when the validity
// left is shorter: half of it) until it is released, lost, or held for
// maxHold.
func (l *proxyLock) keep() {
	t := time.NewTimer(l.nextExtension())
	defer t.Stop()
	for {
		l.mu.Lock()
		until := l.until
		l.mu.Unlock()
		select {
		case <-l.stop:
			return
		case <-t.C:
		case <-time.After(time.Until(until) - time.Millisecond):
		}
		if time.Until(until) <= time.Millisecond { // also when both were due: a stopped process continued
			l.end(fmt.Errorf("%w: validity ran out (the proxy did not grant an extension in time)", engine.ErrLockLost))
			return
		}
		ttl := l.ttl
		if l.maxHold > 0 {
			ttl = min(ttl, time.Until(l.acquired.Add(l.maxHold)))
			if ttl < time.Millisecond {
				// No more extensions: the lock ends with its validity.
				select {
				case <-l.stop:
				case <-time.After(time.Until(until) - time.Millisecond):
					l.end(fmt.Errorf("%w: %w", engine.ErrLockLost, engine.ErrMaxHold))
				}
				return
			}
		}
		ttl = ttl.Truncate(time.Millisecond) // what the masters get
		sent := time.Now()
		// From the moment it is sent, a master may apply this TTL (shorter
		// than what is left, for the last one before --max-hold) whatever
		// the proxy answers: never count on more than it leaves.
		l.mu.Lock()
		l.until = minTime(l.until, l.validUntil(sent, ttl))
		until = l.until
		l.mu.Unlock()
		ctx, cancel := context.WithDeadline(l.ctx, until)
		rep, err := l.exec(ctx, "EVAL", scripts.Extend.Source(), "1", l.key, l.token, strconv.FormatInt(ttl.Milliseconds(), 10))
		cancel()
		switch n, _ := intReply(rep); {
		case err == nil && n == 1:
			l.mu.Lock()
			l.until = l.validUntil(sent, ttl)
			l.mu.Unlock()
			t.Reset(l.nextExtension())
		case err == nil:
			l.end(fmt.Errorf("%w: the proxy refused the extension (a quorum of masters no longer holds the token)", engine.ErrLockLost))
			return
		default: // the proxy could not tell: try again soon, within the validity
			l.log.Warn("extension failed; retrying", "key", l.key, "err", err)
			t.Reset(min(100*time.Millisecond, l.ttl/10))
		}
	}
}

// exec sends one command to the proxy; an error reply is an error.
func (l *proxyLock) exec(ctx context.Context, args ...string) (resp.Reply, error) {
	ctx, cancel := context.WithTimeout(ctx, proxyTimeout)
	defer cancel()
	return l.c.Exec(ctx, args...)
}

// intReply returns an integer reply's value.
func intReply(r resp.Reply) (int64, bool) { return r.Int, r.Type == resp.TypeInteger }

func (l *proxyLock) end(err error) {
	l.once.Do(func() {
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		close(l.done)
	})
}

// halt stops the keeper (and an extension it has in flight) and waits for
// it.
func (l *proxyLock) halt() {
	l.stopOnce.Do(func() { close(l.stop); l.cancel() })
	l.wg.Wait()
}

// releaseQuietly sends the release for our token, best effort (an
// acquisition that failed after the proxy may have granted it).
func (l *proxyLock) releaseQuietly() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = l.exec(ctx, "EVAL", scripts.Release.Source(), "1", l.key, l.token)
}

// isErrorReply reports whether err is the proxy's error reply (an answer),
// not a failure to get one.
func isErrorReply(err error) bool {
	var re *resp.Error
	return errors.As(err, &re)
}

func (l *proxyLock) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}
func (l *proxyLock) Token() string         { return l.token }
func (l *proxyLock) FencingToken() int64   { return l.fence }
func (l *proxyLock) Done() <-chan struct{} { return l.done }

// Err returns why the lock ended, or the validity running out (as the
// engine's Lock.Err does) when the keeper has not said so yet.
func (l *proxyLock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil && !time.Now().Before(l.until) {
		return fmt.Errorf("%w: validity ran out", engine.ErrLockLost)
	}
	return l.err
}

// Unlock stops extending and releases the lock through the proxy.
func (l *proxyLock) Unlock(ctx context.Context) error {
	l.halt()
	rep, err := l.exec(ctx, "EVAL", scripts.Release.Source(), "1", l.key, l.token)
	l.end(engine.ErrUnlocked)
	if err != nil {
		return err
	}
	if n, _ := intReply(rep); n != 1 {
		return fmt.Errorf("%w: a quorum of masters no longer held the token", engine.ErrLockLost)
	}
	return nil
}

// newToken returns a random lock token (engine.TokenLen hex characters).
func newToken() string {
	var raw [engine.TokenLen / 2]byte
	crand.Read(raw[:])
	return hex.EncodeToString(raw[:])
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// tlsMismatch names a TLS/plain mismatch with the proxy, from the dial's
// error (usingTLS: we spoke TLS), or "": a plain client's handshake to a
// TLS listener ends in EOF or a reset (the listener sends an alert and
// closes); a TLS client meets a plain listener's reply where a TLS record
// should be. Neither is an outage: retrying cannot cure it.
func tlsMismatch(err error, usingTLS bool) string {
	s := err.Error()
	switch {
	case usingTLS && (strings.Contains(s, "does not look like a TLS handshake") || strings.Contains(s, "record header")):
		return "the proxy does not speak TLS: drop --proxy-tls-ca (and --proxy-tls-cert/--proxy-tls-key)"
	case !usingTLS && strings.Contains(s, "handshake") && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(s, "EOF") || strings.Contains(s, "connection reset") || strings.Contains(s, "protocol error")):
		return "the proxy closed the connection during the handshake, as a TLS listener does to a plain client: pass --proxy-tls-ca FILE"
	}
	return ""
}
