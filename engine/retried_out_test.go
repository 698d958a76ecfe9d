package engine

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
)

// changingErr is an error whose message changes after it was made, as a
// watchdog extension's lateQuorumError does when answers come in.
type changingErr struct{ msg atomic.Pointer[string] }

func (e *changingErr) Error() string { return *e.msg.Load() }
func (e *changingErr) Is(target error) bool {
	return target == ErrUnavailable
}

// The error that ends a lock whose watchdog retried until its validity
// ran out reads the last extension's error when it is printed, not when
// the lock ended: the lock can end within a round trip of that
// extension's decision, before the healthy masters' answers arrive (CI
// failure of TestLockLossErrorNamesAnswers with fmt.Errorf's frozen
// message).
func TestRetriedOutErrorReadsLate(t *testing.T) {
	last := &changingErr{}
	early, late := "master 1: no answer yet", "master 1: granted"
	last.msg.Store(&early)
	l := &Lock{e: &Engine{}}
	l.retryErr = last
	err := l.expired()
	last.msg.Store(&late)
	if msg := err.Error(); !strings.Contains(msg, late) || strings.Contains(msg, early) {
		t.Errorf("the error kept the last extension's message from when the lock ended: %s", msg)
	}
	for _, target := range []error{ErrLockLost, ErrExpired, ErrUnavailable} {
		if !errors.Is(err, target) {
			t.Errorf("errors.Is(%v, %v) = false", err, target)
		}
	}
}
