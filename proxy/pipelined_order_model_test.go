package proxy

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/proxy/internal/lockcmds"
	"github.com/redlock-dev/redlock/resp"
)

// TestPipelinedOrderModel (review of b4f29c4, the per-key ordering
// fast path Conn.solo): clients send random pipelines of SET NX PX,
// release scripts, DELIFEQ, extend scripts, GET, EXISTS of two keys, PING and
// ECHO on a few keys of their own, sometimes reading every reply before
// the next batch (a settled connection), sometimes only part of them
// (commands in flight behind the next batch), sometimes pausing; every
// reply is checked against a sequential model of the connection's
// commands. On the loop and on goroutines, with 1 and 4 connections per
// master (connFor, 391dd0c), and with one in-flight slot (the loop's
// stalled calls). Run alone:
//
//	go test -run TestPipelinedOrderModel -count=1 ./proxy
func TestPipelinedOrderModel(t *testing.T) {
	set := mastertest.Start(t, 3)
	for _, m := range loopModes {
		for _, v := range []struct{ cpm, slots int }{{1, 0}, {4, 0}, {1, 1}} {
			cpm := v.cpm
			t.Run(fmt.Sprintf("%s/conns%d/slots%d", m.name, cpm, v.slots), func(t *testing.T) {
				e := startEnvOn(t, set, func(c *Config) {
					c.EventLoops = m.loops
					c.EngineConfig.ConnsPerMaster = cpm
					if v.slots > 0 {
						c.MaxInFlight = v.slots
					}
				})
				var wg sync.WaitGroup
				for conn := range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						seed := uint64(time.Now().UnixNano()) + uint64(conn)
						orderModelClient(t, e.addr, fmt.Sprintf("om:%s:%d:%d", m.name, cpm, conn), seed, 40)
					}()
				}
				wg.Wait()
			})
		}
	}
}

// orderModelClient runs rounds of random pipelines on one connection and
// checks each reply against the sequential model (t.Error: goroutine).
func orderModelClient(t *testing.T, addr, prefix string, seed uint64, rounds int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	c := dialRaw(t, addr)
	keys := []string{prefix + ":a", prefix + ":b", prefix + ":c"}
	holder := map[string]string{} // key -> token held ("" free)
	lastTok := map[string]string{}
	// someTok: the key's last token, or now and then one nobody holds.
	someTok := func(k string) string {
		if tok := lastTok[k]; tok != "" && rng.IntN(5) != 0 {
			return tok
		}
		return "nobody"
	}
	release, extend := lockcmds.LibTable[0].Source, lockcmds.LibTable[1].Source
	var want, sent []string // expected replies and commands, not yet read
	ntok := 0
	gen := func() {
		k := keys[rng.IntN(len(keys))]
		var args []string
		var w string
		switch r := rng.IntN(100); {
		case r < 35:
			ntok++
			tok := fmt.Sprintf("t%d", ntok)
			lastTok[k] = tok
			args = []string{"SET", k, tok, "NX", "PX", "20000"}
			if holder[k] == "" {
				holder[k], w = tok, "+OK\r\n"
			} else {
				w = "$-1\r\n"
			}
		case r < 55:
			tok := someTok(k)
			if rng.IntN(2) == 0 {
				args = []string{"EVAL", release, "1", k, tok}
			} else {
				args = []string{"DELIFEQ", k, tok}
			}
			if holder[k] != "" && holder[k] == tok {
				holder[k], w = "", ":1\r\n"
			} else {
				w = ":0\r\n"
			}
		case r < 65:
			tok := someTok(k)
			args = []string{"EVAL", extend, "1", k, tok, "20000"}
			if holder[k] != "" && holder[k] == tok {
				w = ":1\r\n"
			} else {
				w = ":0\r\n"
			}
		case r < 78:
			args = []string{"GET", k}
			if h := holder[k]; h != "" {
				w = fmt.Sprintf("$%d\r\n%s\r\n", len(h), h)
			} else {
				w = "$-1\r\n"
			}
		case r < 88:
			k2 := keys[rng.IntN(len(keys))]
			args = []string{"EXISTS", k, k2}
			n := 0
			for _, x := range []string{k, k2} {
				if holder[x] != "" {
					n++
				}
			}
			w = fmt.Sprintf(":%d\r\n", n)
		case r < 94:
			args, w = []string{"PING"}, "+PONG\r\n"
		default:
			args, w = []string{"ECHO", k}, fmt.Sprintf("$%d\r\n%s\r\n", len(k), k)
		}
		c.send(string(resp.AppendCommandStrings(nil, args...)))
		want = append(want, w)
		sent = append(sent, fmt.Sprintf("%q", args))
	}
	readN := func(n int) bool {
		for range n {
			got := c.read()
			if got != want[0] {
				t.Errorf("%s (seed %d): %s: reply %q, want %q", prefix, seed, sent[0], got, want[0])
				return false
			}
			want, sent = want[1:], sent[1:]
		}
		return true
	}
	for range rounds {
		b := 1
		if rng.IntN(3) > 0 {
			b = 1 + rng.IntN(12)
		}
		for range b {
			gen()
			if rng.IntN(8) == 0 {
				time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
			}
		}
		switch rng.IntN(4) {
		case 0: // settle
			if !readN(len(want)) {
				return
			}
		case 1: // part
			if !readN(rng.IntN(len(want) + 1)) {
				return
			}
		case 2: // settle, then pause
			if !readN(len(want)) {
				return
			}
			time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		}
	}
	if !readN(len(want)) {
		return
	}
	// Leave nothing held for the next subtest on the same masters.
	for _, k := range keys {
		if h := holder[k]; h != "" {
			c.cmd("EVAL", release, "1", k, h)
		}
	}
}
