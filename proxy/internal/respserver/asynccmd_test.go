package respserver_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// asyncCmdProbe is an AsyncCommand whose Start does what the command's
// name says; it counts how each of its values ran.
type asyncCmdProbe struct {
	how    string // "reply", "twice", "sync-then-panic", "panic", "panic-reply", "later"
	arg    string
	runs   *atomic.Int64
	starts *atomic.Int64
	both   *atomic.Int64 // values that ran by both Run and Start
	ran    atomic.Int32  // 1: Run, 2: Start (of this value)
}

type probeReply string

func (r probeReply) AppendReply(dst []byte) []byte { return redcon.AppendBulkString(dst, string(r)) }

type panicReply struct{}

func (panicReply) AppendReply([]byte) []byte { panic("test panic in AppendReply") }

func (p *asyncCmdProbe) mark(how int32) {
	if p.ran.Swap(how) != 0 {
		p.both.Add(1)
	}
}

func (p *asyncCmdProbe) Run(_ context.Context, dst []byte) []byte {
	p.runs.Add(1)
	p.mark(1)
	switch p.how {
	case "panic", "sync-then-panic":
		panic("test panic in Run")
	case "panic-reply":
		return panicReply{}.AppendReply(dst)
	}
	return redcon.AppendBulkString(dst, "run:"+p.arg)
}

func (p *asyncCmdProbe) Start(done respserver.Done) {
	p.starts.Add(1)
	p.mark(2)
	r := probeReply("start:" + p.arg)
	switch p.how {
	case "reply":
		done.Reply(r)
	case "later": // from another goroutine, as the masters' answers complete it
		go func() {
			time.Sleep(time.Millisecond)
			done.Reply(r)
		}()
	case "twice":
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				done.Reply(probeReply(fmt.Sprintf("start:%s:%d", p.arg, i)))
			}()
		}
		wg.Wait()
		done.Reply(probeReply("start:" + p.arg + ":late"))
	case "sync-then-panic":
		done.Reply(r)
		panic("test panic in Start after its reply")
	case "panic":
		panic("test panic in Start")
	case "panic-reply":
		done.Reply(panicReply{})
	}
}

// asyncCmdServer serves PROBE <how> <key> <arg> as an AsyncCmd on key.
func asyncCmdServer(t *testing.T, loops int) (addr string, runs, starts, both *atomic.Int64, panics func() uint64) {
	runs, starts, both = new(atomic.Int64), new(atomic.Int64), new(atomic.Int64)
	probe := func(c *respserver.Conn, args [][]byte) *respserver.Call {
		return c.AsyncCmd(args[2:3], &asyncCmdProbe{how: string(args[1]), arg: string(args[3]), runs: runs, starts: starts, both: both})
	}
	cfg := testConfig(loops, &respserver.Command{Name: "probe", Arity: 4, First: 2, Last: 2, Step: 1, Run: probe})
	cfg.QueueTimeout, cfg.RequestTimeout = 5*time.Second, 5*time.Second
	srv, addr := serve(t, cfg)
	panics = func() uint64 {
		return srv.Stats().PanicsRecovered
	}
	return addr, runs, starts, both, panics
}

type probeConn struct {
	t  *testing.T
	nc net.Conn
	rd *bufio.Reader
}

func dialProbe(t *testing.T, addr string) *probeConn {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &probeConn{t: t, nc: nc, rd: bufio.NewReader(nc)}
}

// send writes the commands in one write (a pipeline: none runs on the
// reader directly).
func (p *probeConn) send(cmds ...[]string) {
	var b []byte
	for _, args := range cmds {
		b = redcon.AppendArray(b, len(args))
		for _, a := range args {
			b = redcon.AppendBulkString(b, a)
		}
	}
	if _, err := p.nc.Write(b); err != nil {
		p.t.Fatal(err)
	}
}

// reply reads one reply (a bulk string's payload, or the line); "" at EOF.
func (p *probeConn) reply() string {
	line, err := p.rd.ReadString('\n')
	if err != nil {
		return ""
	}
	if line[0] != '$' || line == "$-1\r\n" {
		return line
	}
	var n int
	fmt.Sscanf(line[1:], "%d", &n)
	body := make([]byte, n+2)
	if _, err := io.ReadFull(p.rd, body); err != nil {
		return ""
	}
	return string(body[:n])
}

// closed reports whether the server closed the connection with nothing
// more to read.
func (p *probeConn) closed() bool {
	p.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := p.rd.ReadByte()
	return errors.Is(err, io.EOF) || err != nil && !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestAsyncCmdContract: a command given as a respserver.AsyncCommand
// (Conn.AsyncCmd: SET NX PX and the engine's release and extension
// scripts) runs by exactly one of Run and Start; its reply is delivered
// once whatever Start does with Done (replies twice, from several
// goroutines); a panic in Start before its reply, or in the Replier,
// answers the internal error and closes the connection (counted), as the
// closures it replaced did; a panic after the reply leaves the reply and
// the connection as they are, and is counted; and
// pipelined commands on one key answer in request order — on goroutines
// and on an event loop.
func TestAsyncCmdContract(t *testing.T) {
	loops := []int{0}
	if respserver.LoopsSupported {
		loops = append(loops, 1)
	}
	for _, n := range loops {
		t.Run(fmt.Sprintf("loops=%d", n), func(t *testing.T) { testAsyncCmdContract(t, n) })
	}
}

func testAsyncCmdContract(t *testing.T, loops int) {
	addr, runs, starts, both, panics := asyncCmdServer(t, loops)
	const internal = "-ERR redlock proxy internal error; closing the connection\r\n"

	t.Run("once", func(t *testing.T) {
		c := dialProbe(t, addr)
		// A pipeline on one key: the first starts, the rest wait for it
		// (and run by Run, on a worker) or start in turn.
		var cmds [][]string
		var want []string
		for i := range 60 {
			how := []string{"reply", "later", "twice"}[i%3]
			arg := fmt.Sprint(i)
			cmds = append(cmds, []string{"PROBE", how, "k" + fmt.Sprint(i%2), arg})
			want = append(want, arg)
		}
		r0, s0 := runs.Load(), starts.Load()
		c.send(cmds...)
		for i, w := range want {
			got := c.reply()
			if !strings.HasSuffix(got, ":"+w) && !strings.Contains(got, ":"+w+":") {
				t.Fatalf("reply %d: %q, want the reply of command %s (request order, one reply each)", i, got, w)
			}
		}
		c.send([]string{"PROBE", "reply", "k0", "after"})
		if got := c.reply(); !strings.HasSuffix(got, ":after") {
			t.Fatalf("the command after the pipeline: %q (a second reply of a command was delivered?)", got)
		}
		if n := runs.Load() - r0 + starts.Load() - s0; n != int64(len(cmds)+1) {
			t.Errorf("%d commands ran %d times (Run and Start together), want once each", len(cmds)+1, n)
		}
		if b := both.Load(); b != 0 {
			t.Errorf("%d commands ran by both Run and Start", b)
		}
	})

	for _, tc := range []struct{ how, first string }{
		{"panic", internal},       // Start panics before its reply
		{"panic-reply", internal}, // the Replier panics (in Run too)
	} {
		t.Run(tc.how, func(t *testing.T) {
			c := dialProbe(t, addr)
			before, s0 := panics(), starts.Load()
			// Pipelined behind a command of the same key, so that on
			// goroutines it is not run directly by Run on the reader.
			c.send([]string{"PROBE", "later", "pk", "a"}, []string{"PROBE", tc.how, "pk2", "b"})
			if got := c.reply(); got != "start:a" && got != "run:a" {
				t.Fatalf("the command before: %q", got)
			}
			if got := c.reply(); got != tc.first {
				t.Fatalf("%s: %q, want %q", tc.how, got, tc.first)
			}
			if !c.closed() {
				t.Fatalf("%s: the connection stays open", tc.how)
			}
			if d := panics() - before; d != 1 {
				t.Errorf("%s: %d panics counted, want 1", tc.how, d)
			}
			if d := starts.Load() - s0; d != 2 {
				t.Errorf("%s: %d of the 2 commands started by Start, want both (on another key, pipelined)", tc.how, d)
			}
		})
	}

	t.Run("sync-then-panic", func(t *testing.T) {
		// A panic after the reply was delivered: the reply stands
		// (Done.Reply's first call counts), the connection stays open,
		// and the panic is counted.
		c := dialProbe(t, addr)
		before := panics()
		c.send([]string{"PROBE", "later", "sk", "a"}, []string{"PROBE", "sync-then-panic", "sk2", "b"})
		if got := c.reply(); got != "start:a" && got != "run:a" {
			t.Fatalf("the command before: %q", got)
		}
		got := c.reply()
		if got == "run:b" {
			t.Skip("ran by Run: no Start to test")
		}
		if got != "start:b" {
			t.Fatalf("reply %q, want start:b", got)
		}
		c.send([]string{"PROBE", "reply", "sk", "c"})
		if got := c.reply(); got != "start:c" && got != "run:c" {
			t.Fatalf("the next command: %q", got)
		}
		if d := panics() - before; d != 1 {
			t.Errorf("%d panics counted after the reply, want 1", d)
		}
	})
}
