package engine

import "time"

// Attach returns a handle to a lock on key with token that was acquired
// elsewhere — by another process, a previous run, or a proxy client that
// only sends the key and token back — so it can be released or extended
// with [Lock.Unlock] and [Lock.Extend]. ttl is the lock's TTL, used for
// timeouts only. The handle's validity is unknown: [Lock.Valid] is false
// until an [Lock.Extend] succeeds. Attach does not contact the masters.
func (e *Engine) Attach(key, token string, ttl time.Duration) *Lock {
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	return &Lock{e: e, key: key, token: token, ttl: ttl, cix: e.connFor(key), first: e.firstMaster()}
}
