package engine

// HeadIdle reports whether the head of key's queue (a Lock call of this
// engine, key without the prefix) is waiting between tries: an Unlock now
// hands it the key in one script (the tests of the hand-off wait for it;
// a head whose own try is still out gets the kick instead).
func (e *Engine) HeadIdle(key string) bool {
	key = e.cfg.KeyPrefix + key
	s := e.waits.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	kw := s.keys[key]
	return kw != nil && len(kw.q) > 0 && !kw.q[0].trying && kw.q[0].pre == nil
}

// SetCollectHook makes f run in every acquisition's collect, between the
// result's arrival and its check (nil: none).
func SetCollectHook(f func()) {
	if f == nil {
		collectHook.Store(nil)
		return
	}
	collectHook.Store(&f)
}
