package engine

import (
	"context"
	"errors"
	"time"
)

// Observer receives the engine's measurements, for metrics
// ([Config.Observer]; the metrics package turns them into Prometheus
// series). The engine imports no metrics library: it calls these methods
// where the events happen, often on a master connection's reader
// goroutine, so they must be fast, must not block and must not call back
// into the engine. With no Observer the engine pays one nil check per
// event. Embed [NopObserver] to implement only some methods.
type Observer interface {
	// Acquire reports one acquisition attempt that ended: every TryLock,
	// and every try of a Lock call.
	Acquire(AcquireEvent)
	// Wait reports a Lock call that ended: how long it waited, and whether
	// it got the lock.
	Wait(d time.Duration, acquired bool)
	// Extend reports a decided extension, by Extend or the watchdog (auto).
	Extend(ok, auto bool)
	// Release reports a decided Unlock by its result (released, lost,
	// unavailable). The engine does not report the Unlock of an attached
	// lock (a token granted elsewhere, as the proxy's clients send back):
	// its caller knows what the token was, and reports it (the proxy also
	// reports [ReleaseCleanup]).
	Release(ReleaseResult)
	// Lost reports a lock that ended other than by Unlock (err: why, as
	// [Lock.Err]).
	Lost(err error)
	// MasterReply reports one master's part of an operation: its round
	// trip, and err nil when it answered (a refusal is an answer) or why
	// not (a timeout, a connection down, an error reply).
	MasterReply(master int, rtt time.Duration, err error)
	// WriteBatch reports one write to master carrying n commands.
	WriteBatch(master, n int)
}

// NopObserver implements [Observer] with methods that do nothing.
type NopObserver struct{}

func (NopObserver) Acquire(AcquireEvent)                  {}
func (NopObserver) Wait(time.Duration, bool)              {}
func (NopObserver) Extend(bool, bool)                     {}
func (NopObserver) Release(ReleaseResult)                 {}
func (NopObserver) Lost(error)                            {}
func (NopObserver) MasterReply(int, time.Duration, error) {}
func (NopObserver) WriteBatch(master, n int)              {}

// AcquireResult is how an acquisition attempt ended.
type AcquireResult uint8

const (
	// AcquireGranted: a quorum granted with validity left.
	AcquireGranted AcquireResult = iota
	// AcquireTaken: a quorum answered and the key is held
	// ([ErrNotAcquired]), or the grants came too late (validity used up).
	AcquireTaken
	// AcquireNoQuorum: too few masters answered to tell ([ErrUnavailable]).
	AcquireNoQuorum
	// AcquireTimeout: the caller's context deadline passed.
	AcquireTimeout
	// AcquireCancelled: the caller's context was cancelled, or the engine
	// closed.
	AcquireCancelled
)

var acquireResultNames = [...]string{AcquireGranted: "acquired", AcquireTaken: "taken", AcquireNoQuorum: "no_quorum", AcquireTimeout: "timeout", AcquireCancelled: "cancelled"}

// String returns the result's metric label: acquired, taken, no_quorum,
// timeout or cancelled.
func (r AcquireResult) String() string {
	if int(r) < len(acquireResultNames) {
		return acquireResultNames[r]
	}
	return "unknown"
}

// ReleaseResult is how a decided release ended.
type ReleaseResult uint8

const (
	// ReleaseReleased: a quorum of masters held the token and deleted it.
	ReleaseReleased ReleaseResult = iota
	// ReleaseLost: a quorum answered, and fewer than a quorum held the
	// token: the lock had expired or been taken over before its release
	// ([ErrLockLost]). Through the proxy: a value not known to be a
	// refused attempt's ([ReleaseCleanup]).
	ReleaseLost
	// ReleaseCleanup: a release of a value whose acquisition was refused
	// (and not granted since), as client libraries send after a failed
	// attempt; not a lost lock. The engine's own failed attempts clean up
	// without an Unlock: only the proxy reports it.
	ReleaseCleanup
	// ReleaseUnavailable: too few masters answered to tell
	// ([ErrUnavailable]).
	ReleaseUnavailable
)

var releaseResultNames = [...]string{ReleaseReleased: "released", ReleaseLost: "lost", ReleaseCleanup: "cleanup", ReleaseUnavailable: "unavailable"}

// String returns the result's metric label: released, lost, cleanup or
// unavailable.
func (r ReleaseResult) String() string {
	if int(r) < len(releaseResultNames) {
		return releaseResultNames[r]
	}
	return "unknown"
}

// AcquireEvent is one ended acquisition attempt.
type AcquireEvent struct {
	Result AcquireResult
	// Latency is from sending to every master until the decision.
	Latency time.Duration
	// Margin is grants − quorum: ≥ 0 when a quorum granted, how many more
	// masters could have failed; negative when it fell short.
	Margin int
	// TTL is the lock's TTL, and ValidityLeft the validity left when it was
	// granted (TTL − elapsed − drift; 0 unless Acquired).
	TTL, ValidityLeft time.Duration
}

// acquireResult classifies an acquisition error.
func acquireResult(err error) AcquireResult {
	switch {
	case err == nil:
		return AcquireGranted
	case errors.Is(err, context.DeadlineExceeded):
		return AcquireTimeout
	case errors.Is(err, context.Canceled), errors.Is(err, ErrClosed):
		return AcquireCancelled
	case errors.Is(err, ErrUnavailable):
		return AcquireNoQuorum
	}
	return AcquireTaken
}
