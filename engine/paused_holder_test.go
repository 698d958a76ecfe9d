package engine_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// fencedWrite is the storage's side of fencing, on a Redis of its own: it
// stores ARGV[2] in KEYS[2] only if ARGV[1], the writer's fencing token, is
// not lower than the highest token it accepted (KEYS[1]). Tokens are a
// master clock in µs plus a count, well under 2^53: exact as Lua numbers.
const fencedWrite = `local hi = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) < hi then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
return 1`

// storeWrite writes value to the fenced store c with token: true when the
// store accepted it.
func storeWrite(ctx context.Context, c *conn.Conn, token int64, value string) (bool, error) {
	r, err := c.Exec(ctx, "EVAL", fencedWrite, "2", "store:highest", "store:data", strconv.FormatInt(token, 10), value)
	if err != nil {
		return false, err
	}
	return r.Text() == "1", nil
}

// pausedKindEnv makes TestPausedHolderChild a leader ("election": its
// token is its term) instead of a lock holder.
const pausedKindEnv = "REDLOCK_PAUSED_KIND"

// pausedHolderEnv tells TestPausedHolderChild where the masters and the
// store are: "master,master,...;store".
const pausedHolderEnv = "REDLOCK_PAUSED_HOLDER"

// TestPausedHolderChild is the holder process of TestPausedHolder: it takes
// a fenced, auto-extended lock, prints "token N", prints "lost <matches
// ErrLockLost> <err>" when the lock's Done closes, and for each line on
// stdin writes to the store with its token — whatever Done says, as a
// holder that was paused between its check and its write would — and
// prints "write accepted" or "write refused".
func TestPausedHolderChild(t *testing.T) {
	spec := os.Getenv(pausedHolderEnv)
	if spec == "" {
		t.Skip("TestPausedHolder's child process")
	}
	masters, store, _ := strings.Cut(spec, ";")
	e, err := engine.New(engine.Config{Addrs: strings.Split(masters, ","), FreshMasters: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	sc, err := conn.Dial(ctx, store, conn.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	var l interface {
		Done() <-chan struct{}
		Err() error
	}
	var token int64
	if os.Getenv(pausedKindEnv) == "election" {
		el, err := e.NewElection("paused", pausedTTL)
		if err != nil {
			t.Fatal(err)
		}
		ld, err := el.Campaign(ctx, "child")
		if err != nil {
			t.Fatal(err)
		}
		l, token = ld, ld.Term()
	} else {
		lk, err := e.Lock(ctx, "paused", pausedTTL, engine.WithFencing(), engine.WithAutoExtend(0))
		if err != nil {
			t.Fatal(err)
		}
		l, token = lk, lk.FencingToken()
	}
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Printf(format+"\n", args...)
		mu.Unlock()
	}
	say("token %d", token)
	go func() {
		<-l.Done()
		say("lost %v %v", errors.Is(l.Err(), engine.ErrLockLost), l.Err())
	}()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ok, err := storeWrite(wctx, sc, token, "child")
		cancel()
		switch {
		case err != nil:
			say("write error %v", err)
		case ok:
			say("write accepted")
		default:
			say("write refused")
		}
	}
}

// pausedTTL is the TTL of TestPausedHolder's locks.
const pausedTTL = time.Second

// TestPausedHolder (issue #32 item 4): a holder process stopped (SIGSTOP)
// past its validity, then continued. Meanwhile its lock expired on the
// masters and another holder took it with a higher fencing token and
// wrote. Continued, the paused holder's lock ends at once (Done closes,
// Err matches ErrLockLost: its watchdog could not extend it while it was
// stopped), and its late write with the old token is refused by the
// fenced store. The same for a leader (issue #34): its late write with
// its term is refused after the next leader's.
func TestPausedHolder(t *testing.T) {
	for _, kind := range []string{"lock", "election"} {
		t.Run(kind, func(t *testing.T) { pausedHolder(t, kind) })
	}
}

func pausedHolder(t *testing.T, kind string) {
	set := mastertest.Start(t, 3)
	store := mastertest.Start(t, 1).Addrs()[0]
	child := exec.Command(os.Args[0], "-test.run=^TestPausedHolderChild$", "-test.count=1")
	child.Env = append(os.Environ(), pausedHolderEnv+"="+strings.Join(set.Addrs(), ",")+";"+store, pausedKindEnv+"="+kind)
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		child.Process.Kill()
		child.Wait()
	})
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	next := func(within time.Duration) string {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatal("the holder process exited")
				}
				if strings.HasPrefix(l, "token ") || strings.HasPrefix(l, "lost ") || strings.HasPrefix(l, "write ") {
					return l
				}
			case <-time.After(within):
				t.Fatalf("no line from the holder process within %v", within)
			}
		}
	}
	line := next(20 * time.Second)
	old, err := strconv.ParseInt(strings.TrimPrefix(line, "token "), 10, 64)
	if err != nil {
		t.Fatalf("holder process: %q", line)
	}
	stdin.Write([]byte("w\n"))
	if l := next(5 * time.Second); l != "write accepted" {
		t.Fatalf("the holder's write while it held the lock: %q", l)
	}

	// Stopped past its validity: another holder takes the key and writes.
	time.Sleep(pausedTTL / 2) // an extension or two
	if err := child.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	e, err := engine.New(engine.Config{Addrs: set.Addrs(), FreshMasters: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var token int64
	var release func(context.Context) error
	if kind == "election" {
		el, err := e.NewElection("paused", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ld, err := el.Campaign(ctx, "parent")
		if err != nil {
			t.Fatalf("the paused leader's election was not won within a TTL: %v", err)
		}
		token, release = ld.Term(), ld.Resign
		if got, err := el.Leader(ctx); err != nil || got.Term != token || got.Value != "parent" {
			t.Fatalf("Leader = %+v, %v; want the new leader", got, err)
		}
	} else {
		l, err := e.Lock(ctx, "paused", 10*time.Second, engine.WithFencing())
		if err != nil {
			t.Fatalf("the paused holder's key was not free within a TTL: %v", err)
		}
		token, release = l.FencingToken(), l.Unlock
	}
	if d := time.Since(stopped); d > 3*pausedTTL {
		t.Fatalf("taken %v after the holder stopped: its TTL is %v", d, pausedTTL)
	}
	if token <= old {
		t.Fatalf("new holder's token %d not above the paused holder's %d", token, old)
	}
	sc, err := conn.Dial(ctx, store, conn.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if ok, err := storeWrite(ctx, sc, token, "parent"); !ok || err != nil {
		t.Fatalf("the new holder's write: %v %v", ok, err)
	}
	time.Sleep(time.Until(stopped.Add(pausedTTL + 300*time.Millisecond)))

	// Continued: lost at once, and its late write refused.
	if err := child.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	continued := time.Now()
	line = next(5 * time.Second)
	if !strings.HasPrefix(line, "lost true ") {
		t.Fatalf("after SIGCONT the holder process said %q, want its lock lost (Err matching ErrLockLost)", line)
	}
	// Its keeper's timer is overdue when it continues: a slow machine's
	// scheduling is all that may delay it.
	if d := time.Since(continued); d > time.Second {
		t.Fatalf("the paused holder's Done closed %v after it continued", d)
	}
	t.Logf("paused holder: %s, %v after SIGCONT", line, time.Since(continued).Round(time.Millisecond))
	stdin.Write([]byte("w\n"))
	if l := next(5 * time.Second); l != "write refused" {
		t.Fatalf("the paused holder's late write with token %d: %q, want refused", old, l)
	}
	if r, err := sc.Exec(ctx, "GET", "store:data"); err != nil || r.Text() != "parent" {
		t.Fatalf("the store holds %q (%v), want the new holder's write", r.Text(), err)
	}
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}
}
