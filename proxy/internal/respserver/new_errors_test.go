package respserver

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// TestNewErrors: a Config the server cannot serve is ErrConfig (the proxy
// reports it as a bad config); an event loop that cannot start for want of
// file descriptors is the system's error, not ErrConfig (`redlock proxy`
// must not call it a usage error).
func TestNewErrors(t *testing.T) {
	base := Config{MaxInFlight: 16, MaxPipeline: 16}
	dup := base
	dup.Commands = []*Command{{Name: "get", Arity: 2}, {Name: "get", Arity: 2}}
	if _, err := New(dup); !errors.Is(err, ErrConfig) {
		t.Errorf("a command twice: %v, want ErrConfig", err)
	}
	if !LoopsSupported {
		return
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Skip(err)
	}
	low := old
	low.Cur = uint64(len(fds) + 20) // room for a few loops, not 64
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip(err)
	}
	many := base
	many.EventLoops = 64
	s, err := New(many)
	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	if s != nil {
		s.Close()
	}
	if err == nil {
		t.Fatal("64 event loops started with about 20 file descriptors free")
	}
	if errors.Is(err, ErrConfig) {
		t.Errorf("out of file descriptors: %v, want the system's error, not ErrConfig", err)
	}
}
