package conn

// SetReadHook makes every Conn's reader run f before each reply it reads
// (nil: none), for tests of a reader short of CPU.
func SetReadHook(f func()) {
	if f == nil {
		readHook.Store(nil)
		return
	}
	readHook.Store(&f)
}

// WriteCounts returns the writes made by callers themselves (direct.go)
// and the writer goroutine's wake-ups so far.
func (c *Conn) WriteCounts() (direct, wakeups uint64) {
	return c.direct.Load(), c.wakeups.Load()
}
