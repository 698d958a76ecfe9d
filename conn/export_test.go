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
