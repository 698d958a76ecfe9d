package proxy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/resp"
)

// TestOverloadBurstsNotRefused: short pipelined bursts separated by idle
// gaps, each answered far within the 1s QueueTimeout, are never refused
// -BUSY. (The admission once estimated waits from completions per
// wall-clock window, idle gaps included: the estimate fell to the average
// load, and bursts were refused as "would wait about 1s"; found by
// review.)
func TestOverloadBurstsNotRefused(t *testing.T) {
	e := startEnv(t, 5, nil)
	rc := dialRaw(t, e.addr)
	const n = 400
	total := 0
	for round := range 5 {
		var req []byte
		for i := range n {
			req = resp.AppendCommandStrings(req, "SET", fmt.Sprint("burst:", round, ":", i), "v", "NX", "PX", "30000")
		}
		t0 := time.Now()
		rc.send(string(req))
		busy, example := 0, ""
		for range n {
			r := rc.read()
			if strings.HasPrefix(r, "-BUSY") {
				busy++
				example = r
			}
		}
		el := time.Since(t0)
		total += busy
		t.Logf("round %d: burst of %d answered in %v, %d -BUSY %s", round, n, el, busy, strings.TrimSpace(example))
		time.Sleep(400 * time.Millisecond)
	}
	if total > 0 {
		t.Errorf("%d commands refused -BUSY although every burst was answered well within the 1s queue timeout", total)
	}
}

// TestQueuedNotSentAfterClose: SET NX PX commands waiting in the
// admission queue when Close begins never reach the masters (as runOne's
// commands send nothing once the server's context ended; found by
// review).
func TestQueuedNotSentAfterClose(t *testing.T) {
	e := startEnv(t, 5, func(c *Config) { c.QueueTimeout = 30 * time.Second })
	ms := e.set.Masters()
	const n = 200
	stopAndPipeline(t, e, "afterclose:", n)
	time.Sleep(50 * time.Millisecond) // 64 admitted (on the stopped masters), the rest queued
	closed := make(chan struct{})
	go func() { e.srv.Close(); close(closed) }()
	time.Sleep(20 * time.Millisecond) // Close began: the server's context is cancelled
	for _, m := range ms {
		m.Resume()
	}
	<-closed
	time.Sleep(100 * time.Millisecond)
	held := 0
	for i := 64; i < n; i++ {
		if e.holding(t, fmt.Sprint("afterclose:", i), "v") >= e.quorum() {
			held++
		}
	}
	if held > 0 {
		t.Errorf("%d commands that were queued when Close began were granted on a quorum of masters afterwards", held)
	}
}
