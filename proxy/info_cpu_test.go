package proxy

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/proccpu"
)

// TestInfoCPUIsProcessCPU: INFO cpu reports the proxy process's own CPU
// time (redlock bench --target proxy divides it by the requests), user
// and system apart in seconds with six decimals, as Redis does: read
// between two readings of this process (the proxy runs in it), each part
// lies between them.
func TestInfoCPUIsProcessCPU(t *testing.T) {
	e := startEnv(t, 3, nil)
	c := dialRaw(t, e.addr)
	for i := range 200 { // some work to count
		c.cmd("SET", "cpu:"+strconv.Itoa(i), "v", "NX", "PX", "10000")
	}
	before, ok := proccpu.Self()
	if !ok {
		t.Skip("no process CPU times on this system")
	}
	info := c.cmd("INFO", "cpu")
	after, _ := proccpu.Self()
	field := func(name string) time.Duration {
		t.Helper()
		_, rest, found := strings.Cut(info, "\r\n"+name+":")
		if !found {
			t.Fatalf("INFO cpu has no %s: %q", name, info)
		}
		v, _, _ := strings.Cut(rest, "\r\n")
		sec, frac, dot := strings.Cut(v, ".")
		s, err1 := strconv.ParseInt(sec, 10, 64)
		us, err2 := strconv.ParseInt(frac, 10, 64)
		if !dot || len(frac) != 6 || err1 != nil || err2 != nil {
			t.Fatalf("%s: %q is not seconds with six decimals", name, v)
		}
		return time.Duration(s)*time.Second + time.Duration(us)*time.Microsecond
	}
	// getrusage's microseconds may round the readings either side.
	const slack = time.Millisecond
	for _, f := range []struct {
		name          string
		before, after time.Duration
	}{{"used_cpu_user", before.User, after.User}, {"used_cpu_sys", before.System, after.System}} {
		if got := field(f.name); got < f.before-slack || got > f.after+slack {
			t.Errorf("%s = %v, want between this process's %v and %v", f.name, got, f.before, f.after)
		}
	}
}
