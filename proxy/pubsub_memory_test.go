package proxy

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/redlock-dev/redlock/proxy/internal/redisson"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// TestSubscriptionsCharged: each connection may keep 1024
// channels of up to 1024 bytes in the hub and its own maps; none of it is
// charged to MaxClientMemory (MaxClients 10000: ~10 GiB of channel names).
func TestSubscriptionsCharged(t *testing.T) {
	e := startEnv(t, 3, nil)
	pad := strings.Repeat("x", respserver.MaxChannelLen-len(redisson.ChannelPrefix)-12)
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	const conns = 20
	for k := 0; k < conns; k++ {
		c := dialRaw(t, e.addr)
		for b := 0; b < respserver.MaxSubscriptions/128; b++ {
			args := []string{"SUBSCRIBE"}
			for i := 0; i < 128; i++ {
				args = append(args, redisson.ChannelPrefix+":"+strconv.Itoa(k)+"-"+strconv.Itoa(b*128+i)+pad)
			}
			c.sendCmd(args...)
			for i := 0; i < 128; i++ {
				if got := c.read(); !strings.HasPrefix(got, "*3") {
					t.Fatalf("conn %d: %q", k, got)
				}
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	n := e.srv.rs.Channels()
	t.Logf("%d hub channels from %d connections; heap grew %d MiB; charged to MaxClientMemory: %d bytes", n, conns, (int64(ms1.HeapInuse)-int64(ms0.HeapInuse))>>20, e.srv.rs.MemCharged())
	if e.srv.rs.MemCharged() < int64(n)*(respserver.MaxChannelLen-100) {
		t.Errorf("subscriptions held (%d channels of ~1 KiB) but %d bytes charged to MaxClientMemory", n, e.srv.rs.MemCharged())
	}
	e.srv.Close()
	if m := e.srv.rs.MemCharged(); m != 0 {
		t.Errorf("%d bytes still charged after every connection closed", m)
	}
}
