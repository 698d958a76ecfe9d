package inspect_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/inspect"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/resp"
)

// startMasters starts n real redis-server masters for t. It skips t when
// redis-server is missing, unless REDLOCK_REQUIRE_REDIS=1 (then it fails):
// embedded masters are no test of what Run sees on real ones (SCAN pages,
// WRONGTYPE).
func startMasters(t *testing.T, n int) *localmaster.Set {
	t.Helper()
	if !localmaster.Available() {
		if os.Getenv("REDLOCK_REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server not on PATH and REDLOCK_REQUIRE_REDIS=1")
		}
		t.Skip("redis-server not on PATH")
	}
	s, err := localmaster.Start(t.Context(), localmaster.Options{N: n, RequireReal: true, Notice: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// planter writes test data with plain connections, one per master.
type planter struct {
	t  *testing.T
	cs []*conn.Conn
}

func newPlanter(t *testing.T, addrs []string) *planter {
	p := &planter{t: t}
	for _, a := range addrs {
		c, err := conn.Dial(t.Context(), a, conn.Config{})
		if err != nil {
			t.Fatal(err)
		}
		p.cs = append(p.cs, c)
	}
	return p
}

func (p *planter) close() {
	for _, c := range p.cs {
		c.Close()
	}
}

// on runs one command on each of the masters listed.
func (p *planter) on(masters []int, args ...string) {
	p.t.Helper()
	for _, i := range masters {
		ctx, cancel := context.WithTimeout(p.t.Context(), 5*time.Second)
		_, err := p.cs[i].Exec(ctx, args...)
		cancel()
		if err != nil {
			p.t.Fatalf("master %d: %q: %v", i, args, err)
		}
	}
}

// waiter counts replies and keeps the first error.
type waiter struct {
	wg  sync.WaitGroup
	mu  sync.Mutex
	err error
}

func (w *waiter) Complete(_ uint64, r resp.Reply, err error) {
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		w.mu.Lock()
		w.err = cmp.Or(w.err, err)
		w.mu.Unlock()
	}
	w.wg.Done()
}

// pipeline sends every command to every master listed, pipelined, and
// waits for the replies.
func (p *planter) pipeline(masters []int, cmds [][]string) {
	p.t.Helper()
	w := &waiter{}
	dl := time.Now().Add(30 * time.Second)
	for _, i := range masters {
		for _, args := range cmds {
			w.wg.Add(1)
			if err := p.cs[i].Do(conn.Request{Cmd: resp.AppendCommandStrings(nil, args...), Deadline: dl, Callback: w}); err != nil {
				p.t.Fatal(err)
			}
		}
	}
	w.wg.Wait()
	if w.err != nil {
		p.t.Fatal(w.err)
	}
}

var (
	all   = []int{0, 1, 2, 3, 4}
	first = []int{0, 1, 2}
	last  = []int{3, 4}
)

const nBulk = 5000

// binToken is a token that is not valid UTF-8 and longer than
// DefaultMaxValueLen.
var binToken = strings.Repeat("B\x00\xff", 40)

// plant writes the scene every subtest inspects; it returns the expected
// findings of a default Run: key -> kinds.
func plant(p *planter) map[string][]inspect.Kind {
	const px = "600000"
	// Healthy: not findings.
	p.on(all, "SET", "lock:healthy5", "tok5", "PX", px)
	p.on(first, "SET", "lock:healthy3", "tok3", "PX", px) // exactly a quorum
	// Anomalies.
	p.on(first, "SET", "lock:leaked", "tokL") // no PX
	p.on(last, "SET", "lock:minority", "tokM", "PX", px)
	p.on(first, "SET", "lock:mismatch", "tokA", "PX", px)
	p.on(last, "SET", "lock:mismatch", binToken, "PX", px)
	p.on([]int{1}, "SET", "other:leaked", "tokO") // outside "lock:*"; no TTL and a minority
	// Not locks, and the fencing counter.
	p.on([]int{0, 1}, "HSET", "lock:hash", "f", "v")
	p.on(all, "SET", engine.DefaultFenceKey, "42")
	p.on(all, "SET", engine.DefaultFenceKey+"{lock:x}", "43") // a per-key counter (cluster members)
	// Many healthy keys, over several SCAN pages.
	cmds := make([][]string, nBulk)
	for i := range cmds {
		cmds[i] = []string{"SET", fmt.Sprintf("bulk:%05d", i), fmt.Sprintf("tok-%d", i), "PX", px}
	}
	p.pipeline(all, cmds)
	return map[string][]inspect.Kind{
		"lock:leaked":   {inspect.NoTTL},
		"lock:minority": {inspect.Minority},
		"lock:mismatch": {inspect.Mismatch},
		"other:leaked":  {inspect.NoTTL, inspect.Minority},
	}
}

// lockKeys is the number of keys plant writes matching "lock:*" (the hash
// included: it is looked up too).
const lockKeys = 6

func run(t *testing.T, addrs []string, o inspect.Options) *inspect.Report {
	t.Helper()
	rep, err := inspect.Run(t.Context(), addrs, conn.Config{}, o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func findingsOf(rep *inspect.Report) map[string][]inspect.Kind {
	got := map[string][]inspect.Kind{}
	for _, f := range rep.Findings {
		got[f.Key] = f.Kinds
	}
	return got
}

func checkFindings(t *testing.T, rep *inspect.Report, want map[string][]inspect.Kind) {
	t.Helper()
	if got := findingsOf(rep); !reflect.DeepEqual(got, want) {
		t.Errorf("findings:\n got %v\nwant %v", got, want)
	}
	if !slices.IsSortedFunc(rep.Findings, func(a, b inspect.Finding) int { return strings.Compare(a.Key, b.Key) }) {
		t.Errorf("findings not sorted by key")
	}
}

func without(m map[string][]inspect.Kind, keys ...string) map[string][]inspect.Kind {
	m = maps.Clone(m)
	for _, k := range keys {
		delete(m, k)
	}
	return m
}

func TestRun(t *testing.T) {
	s := startMasters(t, 5)
	addrs := s.Addrs()
	p := newPlanter(t, addrs)
	want := plant(p)
	total := nBulk + lockKeys + 1 // other:leaked; the fencing counter is excluded

	t.Run("Default", func(t *testing.T) {
		rep := run(t, addrs, inspect.Options{})
		checkFindings(t, rep, want)
		if rep.Keys != total || rep.Excluded != 2 || rep.Quorum != 3 || rep.Match != "*" || rep.Truncated {
			t.Errorf("keys %d (want %d) excluded %d quorum %d match %q truncated %v", rep.Keys, total, rep.Excluded, rep.Quorum, rep.Match, rep.Truncated)
		}
		if !reflect.DeepEqual(rep.NotLocks, []string{"lock:hash"}) {
			t.Errorf("not locks %q", rep.NotLocks)
		}
		for i, m := range rep.Masters {
			if m.Index != i || m.Addr != addrs[i] || !m.Complete || m.Failed() || m.Pages < 2 || m.Scanned < nBulk {
				t.Errorf("master %d: %+v", i, m)
			}
		}
		if rep.Healthy() {
			t.Error("Healthy with findings")
		}
		byKey := map[string]inspect.Finding{}
		for _, f := range rep.Findings {
			byKey[f.Key] = f
			if len(f.Masters) != 5 {
				t.Fatalf("%s: %d master states", f.Key, len(f.Masters))
			}
		}
		// Per-master states.
		leaked := byKey["lock:leaked"]
		for i, st := range leaked.Masters {
			wantSt := inspect.MasterState{Master: i, PTTL: -2}
			if i < 3 {
				wantSt = inspect.MasterState{Master: i, Present: true, Value: "tokL", ValueLen: 4, PTTL: -1}
			}
			if st != wantSt {
				t.Errorf("lock:leaked master %d: %+v, want %+v", i, st, wantSt)
			}
		}
		if leaked.Held != 3 {
			t.Errorf("lock:leaked held %d", leaked.Held)
		}
		mis := byKey["lock:mismatch"]
		if mis.Held != 5 {
			t.Errorf("lock:mismatch held %d", mis.Held)
		}
		for i, st := range mis.Masters {
			if !st.Present || st.PTTL <= 0 || st.PTTL > 600000 || st.Error != "" {
				t.Errorf("lock:mismatch master %d: %+v", i, st)
			}
			if i < 3 && (st.Value != "tokA" || st.Quoted) {
				t.Errorf("lock:mismatch master %d: %+v", i, st)
			}
			// The binary token: cut to DefaultMaxValueLen bytes, quoted.
			if wantV := fmt.Sprintf("%q", binToken[:inspect.DefaultMaxValueLen]); i >= 3 && (st.Value != wantV || !st.Quoted || st.ValueLen != len(binToken)) {
				t.Errorf("lock:mismatch master %d: %+v, want value %s", i, st, wantV)
			}
		}
		mino := byKey["lock:minority"]
		if mino.Held != 2 || mino.Masters[0].Present || !mino.Masters[3].Present || mino.Masters[3].PTTL <= 0 {
			t.Errorf("lock:minority: %+v", mino)
		}
	})

	t.Run("Match", func(t *testing.T) {
		rep := run(t, addrs, inspect.Options{Match: "lock:*"})
		checkFindings(t, rep, without(want, "other:leaked"))
		if rep.Keys != lockKeys || rep.Excluded != 0 {
			t.Errorf("keys %d excluded %d", rep.Keys, rep.Excluded)
		}
		rep = run(t, addrs, inspect.Options{Match: "nothing:*"})
		checkFindings(t, rep, map[string][]inspect.Kind{})
		if rep.Keys != 0 || !rep.Healthy() || len(rep.NotLocks) != 0 {
			t.Errorf("match nothing: %+v", rep)
		}
	})

	t.Run("ManyKeys", func(t *testing.T) {
		const count = 300
		rep := run(t, addrs, inspect.Options{Match: "bulk:*", Count: count})
		checkFindings(t, rep, map[string][]inspect.Kind{})
		if rep.Keys != nBulk || !rep.Healthy() {
			t.Errorf("keys %d (want %d), healthy %v", rep.Keys, nBulk, rep.Healthy())
		}
		for i, m := range rep.Masters {
			// COUNT is a hint: pages hold about count keys each.
			if !m.Complete || m.Scanned < nBulk || m.Pages < nBulk/(2*count) {
				t.Errorf("master %d: %+v", i, m)
			}
		}
	})

	t.Run("Exclude", func(t *testing.T) {
		rep := run(t, addrs, inspect.Options{Exclude: []string{"lock:leaked", "no:such:key"}})
		checkFindings(t, rep, without(want, "lock:leaked"))
		if rep.Keys != total-1 || rep.Excluded != 3 {
			t.Errorf("keys %d excluded %d", rep.Keys, rep.Excluded)
		}
		rep = run(t, addrs, inspect.Options{InspectFenceKey: true, Match: "redlock:*"})
		checkFindings(t, rep, map[string][]inspect.Kind{engine.DefaultFenceKey: {inspect.NoTTL}, engine.DefaultFenceKey + "{lock:x}": {inspect.NoTTL}})
	})

	t.Run("MaxKeys", func(t *testing.T) {
		rep := run(t, addrs, inspect.Options{MaxKeys: 1000, Count: 100})
		if !rep.Truncated || rep.Keys != 1000 || rep.Healthy() || rep.Masters[0].Complete {
			t.Errorf("truncated %v keys %d healthy %v master 0 %+v", rep.Truncated, rep.Keys, rep.Healthy(), rep.Masters[0])
		}
		// Exactly the number of keys: not truncated.
		rep = run(t, addrs, inspect.Options{Match: "lock:*", MaxKeys: lockKeys})
		if rep.Truncated || rep.Keys != lockKeys {
			t.Errorf("at the bound: truncated %v keys %d", rep.Truncated, rep.Keys)
		}
		rep = run(t, addrs, inspect.Options{Match: "lock:*", MaxKeys: lockKeys - 1})
		if !rep.Truncated || rep.Keys != lockKeys-1 {
			t.Errorf("one over: truncated %v keys %d", rep.Truncated, rep.Keys)
		}
	})

	t.Run("TextAndJSON", func(t *testing.T) {
		rep := run(t, addrs, inspect.Options{})
		var buf bytes.Buffer
		if err := rep.WriteText(&buf); err != nil {
			t.Fatal(err)
		}
		text := buf.String()
		for _, s := range []string{
			`"lock:leaked"  no_ttl`, `"lock:minority"  minority`, `"lock:mismatch"  mismatch`,
			`"other:leaked"  no_ttl,minority`, `"tokA"`, `"lock:hash"`, "keys with anomalies: 4",
			fmt.Sprintf("... (%d bytes)", len(binToken)), `\x00\xff`, addrs[4], "complete",
		} {
			if !strings.Contains(text, s) {
				t.Errorf("text lacks %q:\n%s", s, text)
			}
		}
		if strings.Contains(text, "lock:healthy") || strings.Contains(text, "bulk:") || strings.ContainsRune(text, 0) {
			t.Errorf("text shows healthy keys or raw bytes:\n%s", text)
		}
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		var back inspect.Report
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&back, rep) {
			t.Errorf("JSON round trip differs:\n%s\n%+v\n%+v", b, back, *rep)
		}
		for _, s := range []string{`"kinds":["no_ttl","minority"]`, `"pttl_ms":-1`, `"not_locks":["lock:hash"]`, `"quoted":true`} {
			if !bytes.Contains(b, []byte(s)) {
				t.Errorf("JSON lacks %s: %s", s, b)
			}
		}
		// An empty report has [] rather than null lists.
		rep = run(t, addrs, inspect.Options{Match: "nothing:*"})
		b, _ = json.Marshal(rep)
		if !bytes.Contains(b, []byte(`"not_locks":[]`)) || !bytes.Contains(b, []byte(`"findings":[]`)) {
			t.Errorf("empty report JSON: %s", b)
		}
		buf.Reset()
		rep.WriteText(&buf)
		if !strings.Contains(buf.String(), "no anomalies found") {
			t.Errorf("empty report text:\n%s", buf.String())
		}
	})

	t.Run("Errors", func(t *testing.T) {
		ctx := t.Context()
		if _, err := inspect.Run(ctx, nil, conn.Config{}, inspect.Options{}); !errors.Is(err, inspect.ErrNoMasters) {
			t.Errorf("no masters: %v", err)
		}
		if _, err := inspect.Run(ctx, addrs, conn.Config{}, inspect.Options{Count: -1}); !errors.Is(err, inspect.ErrBadOption) {
			t.Errorf("bad count: %v", err)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := inspect.Run(cctx, addrs, conn.Config{}, inspect.Options{}); !errors.Is(err, context.Canceled) {
			t.Errorf("canceled: %v", err)
		}
	})

	t.Run("MasterPaused", func(t *testing.T) {
		m := s.Masters()[2]
		if err := m.Pause(); err != nil {
			t.Fatal(err)
		}
		defer m.Resume()
		start := time.Now()
		rep, err := inspect.Run(t.Context(), addrs, conn.Config{DialTimeout: 300 * time.Millisecond}, inspect.Options{Timeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Run took %v with a paused master", d)
		}
		if !rep.Masters[2].Failed() || rep.Masters[2].Complete {
			t.Errorf("paused master: %+v", rep.Masters[2])
		}
		// lock:minority (masters 3, 4) might be held on 3 with the unknown
		// master: not reported. lock:healthy3 (masters 0-2) is held on 2
		// known masters, maybe 3: not reported either.
		checkFindings(t, rep, without(want, "lock:minority"))
	})

	// Last: it kills a master.
	t.Run("MasterDown", func(t *testing.T) {
		if err := s.Masters()[4].Kill(); err != nil {
			t.Fatal(err)
		}
		rep := run(t, addrs, inspect.Options{})
		// lock:minority is on masters 3 and 4: with 4 unknown it is held on
		// 1, at most 2 < quorum: still a minority. Healthy keys on 0-2 and
		// on all five are not findings.
		checkFindings(t, rep, want)
		if rep.Keys != total {
			t.Errorf("keys %d, want %d", rep.Keys, total)
		}
		for i, m := range rep.Masters {
			if i == 4 {
				if !m.Failed() || m.Complete || m.Pages != 0 {
					t.Errorf("killed master: %+v", m)
				}
				continue
			}
			if m.Failed() || !m.Complete {
				t.Errorf("master %d: %+v", i, m)
			}
		}
		for _, f := range rep.Findings {
			if st := f.Masters[4]; st.Error == "" || st.Present {
				t.Errorf("%s on the killed master: %+v", f.Key, st)
			}
		}
		if rep.Healthy() {
			t.Error("Healthy with a master down")
		}
		var buf bytes.Buffer
		rep.WriteText(&buf)
		if !strings.Contains(buf.String(), "FAILED: ") {
			t.Errorf("text does not show the failed master:\n%s", buf.String())
		}

		// A minority that could be a quorum with the unknown master is not
		// reported: a key on masters 0 and 1 is held on 2 of the 4 known
		// masters, and with the killed one it might be held on 3.
		p.on([]int{0, 1}, "SET", "lock:maybe", "tok", "PX", "600000")
		rep = run(t, addrs, inspect.Options{Match: "lock:maybe"})
		checkFindings(t, rep, map[string][]inspect.Kind{})

		_, err := inspect.Run(t.Context(), addrs[4:], conn.Config{}, inspect.Options{})
		if !errors.Is(err, inspect.ErrAllMastersFailed) || !strings.Contains(err.Error(), addrs[4]) {
			t.Errorf("all masters down: %v", err)
		}
	})

	p.close()
	checkNoConns(t)
}

// checkNoConns fails t if a connection goroutine outlives the Runs and the
// planter (Run closes what it dials).
func checkNoConns(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "redlock/conn.(*Conn)") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("connection goroutines left:\n%s", stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRefusedCommand: a master whose user may not run GETRANGE (or may
// not read the keys) fails, naming the refusal, and no master counts as
// read whole: "no finding" must not speak for keys nobody read. A run
// that read everything says so (FullyRead, Complete).
func TestRefusedCommand(t *testing.T) {
	if !localmaster.Available() {
		if os.Getenv("REDLOCK_REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server not on PATH and REDLOCK_REQUIRE_REDIS=1")
		}
		t.Skip("redis-server not on PATH")
	}
	rules := []string{"on", ">pw", "&*", "+scan", "+pttl", "+getrange", "+info", "+command|info", "+command|docs", "+ping"}
	users := slices.Concat([]string{"--user", "all", "~*"}, rules,
		[]string{"--user", "nogetrange", "~*"}, slices.DeleteFunc(slices.Clone(rules), func(r string) bool { return r == "+getrange" }),
		[]string{"--user", "fewkeys", "~lock:a*"}, rules)
	s, err := localmaster.Start(t.Context(), localmaster.Options{N: 3, RequireReal: true, Notice: io.Discard, ExtraArgs: users})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addrs := s.Addrs()
	p := newPlanter(t, addrs)
	defer p.close()
	p.on([]int{0}, "SET", "lock:a", "tok") // no TTL: a finding for whoever can read it
	p.on([]int{0, 1, 2}, "SET", "lock:b", "tok", "PX", "60000")

	rep, err := inspect.Run(t.Context(), addrs, conn.Config{Username: "all", Password: "pw"}, inspect.Options{})
	if err != nil || !rep.Complete() || rep.Incomplete() != "" || len(rep.Findings) != 1 {
		t.Fatalf("as a user that may read it all: %v, complete %v, findings %d", err, rep != nil && rep.Complete(), len(rep.Findings))
	}
	for _, m := range rep.Masters {
		if !m.FullyRead {
			t.Errorf("master %d not fully read: %+v", m.Index, m)
		}
	}
	for _, tt := range []struct{ user, want string }{
		{"nogetrange", "GETRANGE refused: NOPERM"},
		{"fewkeys", "GETRANGE refused: NOPERM this user has no permissions to access one of the keys"},
	} {
		t.Run(tt.user, func(t *testing.T) {
			rep, err := inspect.Run(t.Context(), addrs, conn.Config{Username: tt.user, Password: "pw"}, inspect.Options{})
			if rep == nil {
				t.Fatalf("no report: %v", err)
			}
			if rep.Complete() || !strings.Contains(rep.Incomplete(), tt.want) || rep.Healthy() {
				t.Errorf("complete %v, healthy %v, incomplete %q; want not complete, naming %q", rep.Complete(), rep.Healthy(), rep.Incomplete(), tt.want)
			}
			for _, m := range rep.Masters {
				if m.FullyRead || !strings.Contains(m.Error, tt.want) {
					t.Errorf("master %d: fully read %v, error %q", m.Index, m.FullyRead, m.Error)
				}
			}
			var buf bytes.Buffer
			rep.WriteText(&buf)
			if strings.Contains(buf.String(), "no anomalies found") || !strings.Contains(buf.String(), "INCOMPLETE") {
				t.Errorf("text:\n%s", buf.String())
			}
		})
	}
}
