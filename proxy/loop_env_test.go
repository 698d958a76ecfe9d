package proxy

import (
	"os"
	"strconv"

	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// REDLOCK_PROXY_EVENT_LOOPS=n runs every server of the package's tests
// that does not choose on n event loops (-1: goroutines only).
func init() {
	if n, err := strconv.Atoi(os.Getenv("REDLOCK_PROXY_EVENT_LOOPS")); err == nil {
		respserver.DefaultEventLoops = func() int { return n }
	}
}
