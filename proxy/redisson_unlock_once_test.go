package proxy

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/resp"
)

// Property (i) of the grant rule for Redisson's unlocks: Redisson 3.24+
// sends an unlock with a request id (its unlock latch) and resends the
// same request when the reply is late — possibly through another
// connection or another proxy while the first run is still going. The
// same request must act once: a hold of count 2 unlocked by one request
// sent twice at the same moment through two proxies keeps count 1.

// sendOnce sends one command on a connection of its own and returns the
// reply in RESP encoding (or the error's text): for goroutines, where a
// test must not Fatal.
func sendOnce(addr string, args ...string) string {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "dial: " + err.Error()
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(resp.AppendCommandStrings(nil, args...)); err != nil {
		return "write: " + err.Error()
	}
	r, err := resp.NewReader(nc).ReadReply()
	if err != nil {
		return "read: " + err.Error()
	}
	return string(resp.AppendReply(nil, r))
}

// sendTwice sends args through both proxies at the same moment.
func sendTwice(x *ruleRun, args []string) [2]string {
	var out [2]string
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range x.p {
		wg.Go(func() {
			<-start
			out[i] = sendOnce(x.p[i].addr, args...)
		})
	}
	close(start)
	wg.Wait()
	return out
}

// TestResentUnlockActsOnce (issue #41 finding 1): a write hold (and a
// read hold) of count 2, RLock's and RFairLock's nested holds too; the
// same unlock — one latch id — is sent twice at once through two proxies;
// another owner then tries the lock and must be refused (one level is
// still held); one more unlock (a new request) frees it. Before the fix
// the read-write lock's second run decremented again: a second writer was
// granted in about half the trials.
func TestResentUnlockActsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("20 trials per kind against 5 masters and two proxies")
	}
	x := startRuleRun(t, "", nil)
	const lease = "9000"
	readTry, writeTry := rSHA(t, "redisson-3.20.0-rwReadTryLock"), rSHA(t, "redisson-3.20.0-rwWriteTryLock")
	readUnlock, writeUnlock := rSHA(t, "redisson-3.44.0-rwReadUnlock"), rSHA(t, "redisson-3.44.0-rwWriteUnlock")
	rlockTry, rlockUnlock := rSHA(t, "redisson-3.19.0-tryLock"), rSHA(t, "redisson-3.24.0-unlock")
	fairTry, fairUnlock := rSHA(t, "redisson-3.31.0-fairTryLock"), rSHA(t, "redisson-3.31.0-fairUnlock")
	now := func() string { return strconv.FormatInt(time.Now().UnixMilli(), 10) }
	fairKeys := func(k string) []string {
		return []string{k, "redisson_lock_queue:{" + k + "}", "redisson_lock_timeout:{" + k + "}"}
	}
	type kind struct {
		name string
		// take acquires (or re-enters) k for owner: the reply $-1 is a grant.
		take func(k, owner string) []string
		// other is another owner's acquisition, refused while k is held.
		other func(k string) []string
		// unlock is owner's unlock of k as request id.
		unlock func(k, owner, id string) []string
	}
	evalsha := func(sha string, keys []string, argv ...string) []string {
		return append(append([]string{"EVALSHA", sha, strconv.Itoa(len(keys))}, keys...), argv...)
	}
	kinds := []kind{
		{name: "read-write write",
			take: func(k, o string) []string { return evalsha(writeTry, []string{k}, lease, o+":write") },
			other: func(k string) []string {
				return evalsha(writeTry, []string{k}, lease, "other-0123456789:1:write")
			},
			unlock: func(k, o, id string) []string {
				return evalsha(writeUnlock, []string{k, "redisson_rwlock:{" + k + "}", "redisson_unlock_latch:{" + k + "}:" + id},
					"1", lease, o+":write", "publish", "10000")
			}},
		{name: "read-write read",
			take: func(k, o string) []string {
				return evalsha(readTry, []string{k, "{" + k + "}:" + o + ":rwlock_timeout"}, lease, o, o+":write")
			},
			other: func(k string) []string {
				return evalsha(writeTry, []string{k}, lease, "other-0123456789:1:write")
			},
			unlock: func(k, o, id string) []string {
				return evalsha(readUnlock, []string{k, "redisson_rwlock:{" + k + "}", "{" + k + "}:" + o + ":rwlock_timeout", "{" + k + "}", "redisson_unlock_latch:{" + k + "}:" + id},
					"0", o, "publish", "10000")
			}},
		{name: "RLock",
			take:  func(k, o string) []string { return evalsha(rlockTry, []string{k}, lease, o) },
			other: func(k string) []string { return evalsha(rlockTry, []string{k}, lease, "other-0123456789:1") },
			unlock: func(k, o, id string) []string {
				return evalsha(rlockUnlock, []string{k, "redisson_lock__channel:" + k, "redisson_unlock_latch:" + k + ":" + id},
					"0", lease, o, "publish", "10000")
			}},
		{name: "RFairLock",
			take: func(k, o string) []string { return evalsha(fairTry, fairKeys(k), lease, o, now(), "300000") },
			other: func(k string) []string {
				return evalsha(fairTry, fairKeys(k), lease, "other-0123456789:1", now(), "300000")
			},
			unlock: func(k, o, id string) []string {
				return evalsha(fairUnlock, append(fairKeys(k), "redisson_lock__channel:{"+k+"}", "redisson_unlock_latch:{"+k+"}:"+id),
					"0", lease, o, now(), "publish", "10000")
			}},
	}
	const trials = 20
	for _, kd := range kinds {
		t.Run(kd.name, func(t *testing.T) {
			x.t = t
			bad := 0
			for trial := range trials {
				k := fmt.Sprintf("once:{%s:%d}", kd.name, trial)
				owner := fmt.Sprintf("owner-%d-0123456789:7", trial)
				for range 2 {
					if r := x.cmd(t, trial%2, kd.take(k, owner)...); r != "$-1\r\n" {
						t.Fatalf("trial %d: taking %s: %q", trial, k, r)
					}
				}
				id := fmt.Sprintf("%032x", trial+1)
				replies := sendTwice(x, kd.unlock(k, owner, id))
				if r := x.cmd(t, 0, kd.other(k)...); r == "$-1\r\n" {
					bad++
					t.Errorf("trial %d: another owner granted after one unlock (sent twice, replies %q) of a hold of count 2", trial, replies)
					continue
				}
				// The second level is released by a request of its own.
				if r := x.cmd(t, 1, kd.unlock(k, owner, fmt.Sprintf("%032x", 1000+trial))...); r != ":1\r\n" && r != "$-1\r\n" {
					t.Errorf("trial %d: the last unlock: %q; want the hold released (replies to the resent one: %q)", trial, r, replies)
				}
				if r := x.cmd(t, 0, kd.other(k)...); r != "$-1\r\n" {
					t.Errorf("trial %d: another owner after the last unlock: %q; want granted (the resent unlock counted less than once)", trial, r)
				}
			}
			if bad > 0 {
				t.Logf("%d of %d trials granted a second holder", bad, trials)
			}
		})
	}
}

// TestResentUnlockOfFreeLock: an unlock that finds the lock free answers
// 1 and, as Redisson's own script does, sets its latch: resent after
// another client took the lock, it answers 1 again — not nil, which
// Redisson turns into IllegalMonitorStateException (seen by the retry
// nemesis, read-write and fair rows).
func TestResentUnlockOfFreeLock(t *testing.T) {
	x := startRuleRun(t, "", nil)
	writeTry, writeUnlock := rSHA(t, "redisson-3.20.0-rwWriteTryLock"), rSHA(t, "redisson-3.24.0-rwWriteUnlock")
	fairTry, fairUnlock := rSHA(t, "redisson-3.31.0-fairTryLock"), rSHA(t, "redisson-3.31.0-fairUnlock")
	now := func() string { return strconv.FormatInt(time.Now().UnixMilli(), 10) }
	for _, tc := range []struct {
		name          string
		unlock, other []string
	}{
		{"read-write write",
			[]string{"EVALSHA", writeUnlock, "3", "free:{rw}", "redisson_rwlock:{free:{rw}}", "redisson_unlock_latch:{free:{rw}}:00ff", "1", "9000", "me-0123456789:1:write", "publish", "10000"},
			[]string{"EVALSHA", writeTry, "1", "free:{rw}", "9000", "other-0123456789:1:write"}},
		{"fair",
			[]string{"EVALSHA", fairUnlock, "5", "free:{f}", "redisson_lock_queue:{free:{f}}", "redisson_lock_timeout:{free:{f}}", "redisson_lock__channel:{free:{f}}", "redisson_unlock_latch:{free:{f}}:00ff", "0", "9000", "me-0123456789:1", now(), "publish", "10000"},
			[]string{"EVALSHA", fairTry, "3", "free:{f}", "redisson_lock_queue:{free:{f}}", "redisson_lock_timeout:{free:{f}}", "9000", "other-0123456789:1", now(), "300000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x.t = t
			if r := x.cmd(t, 0, tc.unlock...); r != ":1\r\n" {
				t.Fatalf("unlock of a free lock: %q; want :1", r)
			}
			if r := x.cmd(t, 1, tc.other...); r != "$-1\r\n" {
				t.Fatalf("another owner's tryLock: %q", r)
			}
			if r := x.cmd(t, 1, tc.unlock...); r != ":1\r\n" {
				t.Errorf("the unlock resent after another owner took the lock: %q; want :1 (its latch)", r)
			}
		})
	}
}
