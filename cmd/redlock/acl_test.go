//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
	"github.com/redlock-dev/redlock/internal/test/redissonwire"
	"github.com/redlock-dev/redlock/proxy"
	"github.com/redlock-dev/redlock/resp"
)

// The documented ACL user is the tested ACL user: TestDocumentedACL reads
// the line of docs/operations.md#security, creates that user on real
// masters and runs every kind, proxy command and subcommand as it.

const (
	aclDoc     = "../../docs/operations.md"
	aclAdminPW = "acl-Adm1n-Secret-5e0c" // the masters' default user (the test's own checks)
	aclUserPW  = "acl-Us3r-Secret-b27d"  // the documented user's >PASSWORD
	// aclMasterTimeout is generous: a busy 2-core host must not turn a
	// slow answer into a refusal this test would misread.
	aclMasterTimeout = 300 * time.Millisecond
)

// docACLLine returns the ACL user line of docs/operations.md's Security
// section (the only line of a code block that starts with "user "), split
// into its words.
func docACLLine(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(aclDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n## Security\n")
	if i < 0 {
		t.Fatalf("%s has no ## Security section", aclDoc)
	}
	section := doc[i+1:]
	if j := strings.Index(section[3:], "\n## "); j >= 0 {
		section = section[:j+3]
	}
	lines := regexp.MustCompile("(?m)^```\\n(user [^\\n]*)\\n```$").FindAllStringSubmatch(section, -1)
	if len(lines) != 1 {
		t.Fatalf("%s#security: %d code blocks holding one `user …` line, want 1", aclDoc, len(lines))
	}
	return strings.Fields(lines[0][1])
}

// aclMasters are real masters whose default user needs aclAdminPW and
// which have the documented ACL user with the password aclUserPW.
type aclMasters struct {
	set   *localmaster.Set
	user  string
	cc    conn.Config  // the documented user
	admin []*conn.Conn // the default user, for the test's own reads and writes
}

// aclUserArgs returns the redis-server arguments that create the user of
// line (as docACLLine returns it), with the password aclUserPW.
func aclUserArgs(t *testing.T, line []string) []string {
	t.Helper()
	if len(line) < 3 || line[0] != "user" {
		t.Fatalf("ACL line %q: want user NAME RULES…", line)
	}
	args := []string{"--user"}
	pw := 0
	for _, w := range line[1:] {
		if w == ">PASSWORD" {
			w = ">" + aclUserPW
			pw++
		}
		args = append(args, w)
	}
	if pw != 1 {
		t.Fatalf("ACL line %q: want one >PASSWORD rule", line)
	}
	return args
}

// startACLMasters starts n masters with the user of line (as docACLLine
// returns it), and the users of more.
func startACLMasters(t *testing.T, n int, line []string, more ...[]string) *aclMasters {
	t.Helper()
	args := aclUserArgs(t, line)
	for _, l := range more {
		args = append(args, aclUserArgs(t, l)...)
	}
	set := mastertest.StartWith(t, localmaster.Options{N: n, RequireReal: true, Password: aclAdminPW, ExtraArgs: args})
	m := &aclMasters{set: set, user: line[1], cc: conn.Config{Username: line[1], Password: aclUserPW}}
	for _, a := range set.Addrs() {
		c := conn.New(a, conn.Config{Password: aclAdminPW})
		t.Cleanup(func() { c.Close() })
		m.admin = append(m.admin, c)
	}
	return m
}

func (m *aclMasters) addrs() string { return strings.Join(m.set.Addrs(), ",") }

// exec runs a command on master i as the default user.
func (m *aclMasters) exec(t *testing.T, i int, args ...string) resp.Reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	r, err := m.admin[i].Exec(ctx, args...)
	var re *resp.Error
	if err != nil && !errors.As(err, &re) {
		t.Fatalf("master %d: %q: %v", i, args, err)
	}
	return r.Clone() // an error reply too
}

// refusals returns what the masters refused the documented user since the
// last call (their ACL LOG, one line per entry), and resets the logs.
func (m *aclMasters) refusals(t *testing.T) []string {
	t.Helper()
	var out []string
	for i := range m.admin {
		log := m.exec(t, i, "ACL", "LOG")
		for _, e := range log.Elems {
			f := map[string]string{}
			for j := 0; j+1 < len(e.Elems); j += 2 {
				f[e.Elems[j].Text()] = e.Elems[j+1].Text()
			}
			out = append(out, fmt.Sprintf("master %d: user %q refused %s %q in %s (%s times)", i, f["username"], f["reason"], f["object"], f["context"], f["count"]))
		}
		m.exec(t, i, "ACL", "LOG", "RESET")
	}
	return out
}

// checkRefusals fails t if the masters refused the documented user
// anything since the last check.
func (m *aclMasters) checkRefusals(t *testing.T, what string) {
	t.Helper()
	if r := m.refusals(t); len(r) > 0 {
		t.Errorf("%s: the masters refused the documented ACL user (docs/operations.md#security needs these):\n  %s", what, strings.Join(r, "\n  "))
	}
}

// TestDocumentedACL: the minimal ACL user of docs/operations.md#security,
// read from the doc and created on three real masters, runs every script
// the engine and the proxy send (ACL DRYRUN of each command they call),
// every engine kind, the proxy's lock commands, client libraries' scripts
// and Redisson's kinds through two `redlock proxy` processes (the wake-ups
// between them on the masters' pub/sub), and every subcommand — with no
// refusal in the masters' ACL LOG.
func TestDocumentedACL(t *testing.T) {
	m := startACLMasters(t, 3, docACLLine(t))
	t.Run("scripts", func(t *testing.T) { aclScripts(t, m) })
	t.Run("engine", func(t *testing.T) { aclEngine(t, m) })
	m.checkRefusals(t, "engine")
	t.Setenv(envMasterUser, m.user)
	t.Setenv(envPassword, aclUserPW)
	t.Setenv(envProxyPassword, "")
	p1 := aclProxy(t, m)
	p2 := aclProxy(t, m)
	m.subscribers(t, proxy.DefaultWakeChannel, 2) // SUBSCRIBE: each proxy on every master
	m.checkRefusals(t, "redlock proxy start")
	t.Run("proxy", func(t *testing.T) { aclProxyCommands(t, m, p1, p2) })
	m.checkRefusals(t, "proxy")
	t.Run("cli", func(t *testing.T) { aclCLI(t, m, p1) })
	m.checkRefusals(t, "cli")
}

// luaCall finds the commands a script calls.
var luaCall = regexp.MustCompile(`redis\.p?call\(\s*['"]([A-Za-z]+)['"]`)

// aclScripts checks, with ACL DRYRUN, that the user may run every command
// any script sent to the masters calls — the engine's and the proxy's own
// (internal/scripts/engine, internal/scripts/proxy) and the client
// libraries' scripts the proxy sends as they are (proxy.MasterScripts):
// the scripts' rarer paths are then covered too.
func aclScripts(t *testing.T, m *aclMasters) {
	cmds := map[string][]string{}
	add := func(src, name string) {
		for _, c := range luaCall.FindAllStringSubmatch(src, -1) {
			cmd := strings.ToUpper(c[1])
			cmds[cmd] = append(cmds[cmd], name)
		}
	}
	files := map[string]bool{} // SHA1s of the files read
	for _, dir := range []string{"engine", "proxy"} {
		paths, err := filepath.Glob(filepath.Join("../../internal/scripts", dir, "*.lua"))
		if err != nil || len(paths) == 0 {
			t.Fatalf("no scripts in %s: %v", dir, err)
		}
		for _, f := range paths {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			add(string(b), dir+"/"+filepath.Base(f))
			files[conn.NewScript(strings.TrimSuffix(string(b), "\n")).SHA()] = true
		}
	}
	names := map[string]string{}
	for _, ls := range proxy.LibraryScripts() {
		names[ls.SHA] = ls.Name
	}
	for _, sc := range proxy.MasterScripts() {
		if files[sc.SHA()] {
			continue // read above
		}
		name, ok := names[sc.SHA()]
		if !ok {
			name = "the proxy's script " + sc.SHA()
		}
		add(sc.Source(), name)
	}
	sorted := make([]string, 0, len(cmds))
	for c := range cmds {
		sorted = append(sorted, c)
	}
	sort.Strings(sorted)
	for _, c := range sorted {
		// DRYRUN checks the arity first: add arguments until it does not
		// complain about it.
		var r resp.Reply
		for n := 0; n < 8; n++ {
			args := []string{"ACL", "DRYRUN", m.user, c}
			for range n {
				args = append(args, "k")
			}
			r = m.exec(t, 0, args...)
			if !r.IsError() || !strings.Contains(r.Text(), "wrong number of arguments") {
				break
			}
		}
		if !r.IsOK() {
			slices.Sort(cmds[c])
			t.Errorf("the ACL user may not run %s (called by %s): %s", c, strings.Join(slices.Compact(cmds[c]), ", "), r.Text())
		}
	}
}

// aclReleaseChannel is the engines' release channel.
const aclReleaseChannel = "redlock:release"

// aclEngineConfig is an engine over m as the documented user. Its idle
// connections read the masters' clocks (TIME, then PING) every 100 ms.
func aclEngineConfig(m *aclMasters) engine.Config {
	cc := m.cc
	cc.ClockRefresh = 100 * time.Millisecond
	return engine.Config{Addrs: m.set.Addrs(), Conn: cc, FreshMasters: true, MasterTimeout: aclMasterTimeout,
		ReleaseChannel: aclReleaseChannel}
}

// infoField returns the integer field name of the INFO section text, -1
// when absent.
func infoField(text, name string) int64 {
	for _, l := range strings.Split(text, "\r\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// pingCalls returns, per master, how many PINGs it ran (INFO
// commandstats).
func (m *aclMasters) pingCalls(t *testing.T) []int64 {
	t.Helper()
	out := make([]int64, len(m.admin))
	for i := range m.admin {
		text := m.exec(t, i, "INFO", "commandstats").Text()
		if _, rest, ok := strings.Cut(text, "cmdstat_ping:calls="); ok {
			out[i], _ = strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		}
	}
	return out
}

// subscribers waits until every master has at least n subscribers of
// channel (PUBSUB NUMSUB).
func (m *aclMasters) subscribers(t *testing.T, channel string, n int64) {
	t.Helper()
	aclWait(t, fmt.Sprintf("%d subscribers of %s on every master", n, channel), 10*time.Second, func() bool {
		for i := range m.admin {
			if r := m.exec(t, i, "PUBSUB", "NUMSUB", channel); len(r.Elems) != 2 || r.Elems[1].Int < n {
				return false
			}
		}
		return true
	})
}

func aclNewEngine(t *testing.T, m *aclMasters) *engine.Engine {
	t.Helper()
	e, err := engine.New(aclEngineConfig(m))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return e
}

// aclWait waits until cond holds, failing t after d.
func aclWait(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// aclAwait returns what ch delivers, failing t after d.
func aclAwait[T any](t *testing.T, what string, d time.Duration, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s: not within %v", what, d)
		panic("unreachable")
	}
}

type lockResult struct {
	l   *engine.Lock
	err error
}

// aclEngine runs every engine kind as the documented user: two engines,
// so that waits are woken by the other's release (ReleaseChannel).
func aclEngine(t *testing.T, m *aclMasters) {
	pings := m.pingCalls(t)
	a, b := aclNewEngine(t, m), aclNewEngine(t, m)
	m.subscribers(t, aclReleaseChannel, 2) // SUBSCRIBE: each engine on every master
	defer t.Run("idle connections PING", func(t *testing.T) {
		aclWait(t, "a PING on every master", 10*time.Second, func() bool {
			now := m.pingCalls(t)
			for i := range now {
				if now[i] <= pings[i] {
					return false
				}
			}
			return true
		})
	})
	// wokeWithin bounds a wait that only a wake-up can end this soon: the
	// waiters' retry delay and the holders' TTL are far longer.
	const wokeWithin, long = 5 * time.Second, 30 * time.Second
	ctxFor := func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	must := func(t *testing.T, what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	t.Run("TryLock Extend Holder Unlock", func(t *testing.T) {
		ctx := ctxFor(t)
		l, err := a.TryLock(ctx, "acl:plain", 5*time.Second)
		must(t, "TryLock", err)
		must(t, "Extend", l.Extend(ctx, 10*time.Second))
		h, err := b.Holder(ctx, "acl:plain")
		if err != nil || h.Token != l.Token() {
			t.Fatalf("Holder = %+v, %v; want the token %s", h, err, l.Token())
		}
		must(t, "Unlock", l.Unlock(ctx))
	})
	t.Run("Lock woken by a release", func(t *testing.T) {
		ctx := ctxFor(t)
		h, err := a.TryLock(ctx, "acl:wait", long)
		must(t, "TryLock", err)
		failed := b.Stats().Failed
		got := make(chan lockResult, 1)
		go func() {
			l, err := b.Lock(ctx, "acl:wait", 5*time.Second, engine.WithRetryDelay(long))
			got <- lockResult{l, err}
		}()
		aclWait(t, "the waiter's first try", 10*time.Second, func() bool { return b.Stats().Failed > failed })
		must(t, "Unlock", h.Unlock(ctx))
		r := aclAwait(t, "Lock woken by the release", wokeWithin, got)
		must(t, "Lock", r.err)
		must(t, "Unlock", r.l.Unlock(ctx))
	})
	t.Run("Do", func(t *testing.T) {
		ctx := ctxFor(t)
		must(t, "Do", a.Do(ctx, "acl:do", 5*time.Second, func(ctx context.Context) error {
			if engine.LockFrom(ctx) == nil {
				return errors.New("no lock in the context")
			}
			return nil
		}))
	})
	t.Run("WithFencing WithAutoExtend", func(t *testing.T) {
		ctx := ctxFor(t)
		var last int64
		for range 2 {
			l, err := a.TryLock(ctx, "acl:fence", 5*time.Second, engine.WithFencing())
			must(t, "TryLock WithFencing", err)
			if l.FencingToken() <= last {
				t.Fatalf("fencing token %d after %d", l.FencingToken(), last)
			}
			last = l.FencingToken()
			must(t, "Unlock", l.Unlock(ctx))
		}
		ext := a.Stats().Extended
		l, err := a.TryLock(ctx, "acl:auto", time.Second, engine.WithAutoExtend(0))
		must(t, "TryLock WithAutoExtend", err)
		aclWait(t, "an extension by the watchdog", 5*time.Second, func() bool { return a.Stats().Extended > ext })
		must(t, "Unlock", l.Unlock(ctx))
	})
	t.Run("Reentrant", func(t *testing.T) {
		ctx := ctxFor(t)
		r, err := a.NewReentrant("acl:re", "owner")
		must(t, "NewReentrant", err)
		must(t, "Lock", r.Lock(ctx, 5*time.Second))
		must(t, "TryLock (re-entered)", r.TryLock(ctx, 5*time.Second))
		other, _ := b.NewReentrant("acl:re", "other")
		if err := other.TryLock(ctx, time.Second); !errors.Is(err, engine.ErrNotAcquired) {
			t.Fatalf("another owner's TryLock: %v, want ErrNotAcquired", err)
		}
		must(t, "Unlock", r.Unlock(ctx))
		must(t, "Unlock", r.Unlock(ctx))
		if r.Count() != 0 {
			t.Fatalf("count %d after two unlocks", r.Count())
		}
	})
	t.Run("RWLock", func(t *testing.T) {
		ctx := ctxFor(t)
		rw, _ := a.NewRWLock("acl:rw")
		rwb, _ := b.NewRWLock("acl:rw")
		r1, err := rw.TryRLock(ctx, long)
		must(t, "TryRLock", err)
		r2, err := rwb.RLock(ctx, 5*time.Second)
		must(t, "RLock", err)
		must(t, "a read lock's Extend", r2.Extend(ctx, 10*time.Second))
		if _, err := rwb.TryLock(ctx, time.Second); !errors.Is(err, engine.ErrNotAcquired) {
			t.Fatalf("TryLock while read: %v, want ErrNotAcquired", err)
		}
		if h, err := b.Holder(ctx, "acl:rw"); err != nil || h.Readers != 2 {
			t.Fatalf("Holder while read = %+v, %v; want 2 readers", h, err)
		}
		must(t, "RUnlock", r2.Unlock(ctx))
		got := make(chan lockResult, 1)
		go func() {
			l, err := rwb.Lock(ctx, 5*time.Second)
			got <- lockResult{l, err}
		}()
		must(t, "RUnlock", r1.Unlock(ctx))
		r := aclAwait(t, "the writer after the readers", wokeWithin, got)
		must(t, "Lock", r.err)
		must(t, "Unlock", r.l.Unlock(ctx))
	})
	t.Run("Semaphore", func(t *testing.T) {
		ctx := ctxFor(t)
		s, _ := a.NewSemaphore("acl:sem", 2)
		p1, err := s.TryAcquire(ctx, 5*time.Second)
		must(t, "TryAcquire", err)
		p2, err := s.Acquire(ctx, 5*time.Second)
		must(t, "Acquire", err)
		if _, err := s.TryAcquire(ctx, 5*time.Second); !errors.Is(err, engine.ErrNotAcquired) {
			t.Fatalf("a third permit: %v, want ErrNotAcquired", err)
		}
		must(t, "Unlock", p1.Unlock(ctx))
		must(t, "Unlock", p2.Unlock(ctx))
	})
	t.Run("LockAll", func(t *testing.T) {
		ctx := ctxFor(t)
		s, err := a.LockAll(ctx, []string{"acl:all:b", "acl:all:a"}, 5*time.Second)
		must(t, "LockAll", err)
		if _, err := b.TryLockAll(ctx, []string{"acl:all:c", "acl:all:a"}, 5*time.Second); !errors.Is(err, engine.ErrNotAcquired) {
			t.Fatalf("an overlapping TryLockAll: %v, want ErrNotAcquired", err)
		}
		must(t, "Unlock", s.Unlock(ctx))
		s, err = b.TryLockAll(ctx, []string{"acl:all:c", "acl:all:a"}, 5*time.Second)
		must(t, "TryLockAll", err)
		must(t, "Unlock", s.Unlock(ctx))
	})
	t.Run("FairLock", func(t *testing.T) {
		ctx := ctxFor(t)
		fa, _ := a.NewFairLock("acl:fair", 5*time.Second)
		fb, _ := b.NewFairLock("acl:fair", 5*time.Second)
		h, err := fa.TryLock(ctx, long)
		must(t, "TryLock", err)
		got := make(chan lockResult, 1)
		go func() {
			l, err := fb.Lock(ctx, 5*time.Second)
			got <- lockResult{l, err}
		}()
		queue := "redlock:fair:{acl:fair}:acl:fair:queue"
		aclWait(t, "the waiter queued on every master", 10*time.Second, func() bool {
			for i := range m.admin {
				if m.exec(t, i, "ZCARD", queue).Int == 0 {
					return false
				}
			}
			return true
		})
		must(t, "Unlock", h.Unlock(ctx))
		r := aclAwait(t, "the queued waiter", wokeWithin, got)
		must(t, "Lock", r.err)
		must(t, "Unlock", r.l.Unlock(ctx))
	})
	t.Run("Election", func(t *testing.T) {
		ctx := ctxFor(t)
		ea, _ := a.NewElection("acl:el", 5*time.Second)
		eb, _ := b.NewElection("acl:el", 5*time.Second)
		octx, stop := context.WithCancel(ctx)
		defer stop()
		seen := eb.Observe(octx)
		observe := func(value string) {
			t.Helper()
			for {
				select {
				case l, ok := <-seen:
					if !ok {
						t.Fatalf("Observe ended before %q led", value)
					}
					if l.Value == value {
						return
					}
				case <-time.After(wokeWithin):
					t.Fatalf("Observe did not see %q lead within %v", value, wokeWithin)
				}
			}
		}
		ld, err := ea.Campaign(ctx, "node-a")
		must(t, "Campaign", err)
		if l, err := eb.Leader(ctx); err != nil || l.Value != "node-a" || l.Term != ld.Term() {
			t.Fatalf("Leader = %+v, %v; want node-a, term %d", l, err, ld.Term())
		}
		observe("node-a")
		if _, err := eb.TryCampaign(ctx, "node-b"); !errors.Is(err, engine.ErrNotAcquired) {
			t.Fatalf("TryCampaign while another leads: %v, want ErrNotAcquired", err)
		}
		must(t, "Proclaim", ld.Proclaim(ctx, "node-a2"))
		observe("node-a2")
		must(t, "Resign", ld.Resign(ctx))
		ld, err = eb.TryCampaign(ctx, "node-b")
		must(t, "TryCampaign", err)
		observe("node-b")
		must(t, "Resign", ld.Resign(ctx))
		must(t, "Lead", ea.Lead(ctx, "node-c", func(ctx context.Context, ld *engine.Leadership) error {
			if ld.Value() != "node-c" {
				return fmt.Errorf("leading as %q", ld.Value())
			}
			return nil
		}))
	})
}

// aclProxy runs `redlock proxy` over m as the documented user (from
// $REDLOCK_USER and $REDLOCK_PASSWORD) and returns its address.
func aclProxy(t *testing.T, m *aclMasters) string {
	t.Helper()
	out := startProxyCmd(t, "--fresh-masters", "--masters", m.addrs(), "--master-timeout", aclMasterTimeout.String())
	return field(t, out.String(), "listening on ")
}

// aclClient is a go-redis client of the proxy at addr.
func aclClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIndentity: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// aclProxyCommands runs the proxy's lock commands, the client libraries'
// scripts and Redisson's kinds through the proxies at p1 and p2.
func aclProxyCommands(t *testing.T, m *aclMasters, p1, p2 string) {
	ctxFor := func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	c := aclClient(t, p1)
	eval := func(ctx context.Context, lib string, keys []string, args ...any) *redis.Cmd {
		return c.Eval(ctx, scripts.Lib(lib), keys, args...)
	}
	wantInt := func(t *testing.T, what string, cmd *redis.Cmd, want int64) {
		t.Helper()
		if v, err := cmd.Int64(); err != nil || v != want {
			t.Fatalf("%s: %v %v, want %d", what, v, err, want)
		}
	}
	t.Run("SET NX PX and the quorum reads", func(t *testing.T) {
		ctx := ctxFor(t)
		if ok, err := c.SetNX(ctx, "acl:p:set", "tok-1", 10*time.Second).Result(); err != nil || !ok {
			t.Fatalf("SET NX PX: %v %v", ok, err)
		}
		if v, err := c.Get(ctx, "acl:p:set").Result(); err != nil || v != "tok-1" {
			t.Fatalf("GET: %q %v", v, err)
		}
		if d, err := c.PTTL(ctx, "acl:p:set").Result(); err != nil || d <= 0 {
			t.Fatalf("PTTL: %v %v", d, err)
		}
		if n, err := c.Exists(ctx, "acl:p:set").Result(); err != nil || n != 1 {
			t.Fatalf("EXISTS: %v %v", n, err)
		}
		wantInt(t, "compare-and-pexpire", eval(ctx, "redis.io-compare-and-pexpire", []string{"acl:p:set"}, "tok-1", 20000), 1)
		wantInt(t, "compare-and-delete", eval(ctx, "redis.io-compare-and-delete", []string{"acl:p:set"}, "tok-1"), 1)
	})
	t.Run("REDLOCK.LOCK", func(t *testing.T) {
		ctx := ctxFor(t)
		var last int64
		for range 2 {
			tok, err := c.Do(ctx, "REDLOCK.LOCK", "acl:p:fenced", "tok-f", 10000).Int64()
			if err != nil || tok <= last {
				t.Fatalf("REDLOCK.LOCK: %v %v after %d", tok, err, last)
			}
			last = tok
			wantInt(t, "release", eval(ctx, "redis.io-compare-and-delete", []string{"acl:p:fenced"}, "tok-f"), 1)
		}
	})
	t.Run("redis-py", func(t *testing.T) {
		ctx := ctxFor(t)
		if ok, err := c.SetNX(ctx, "acl:p:py", "tok-py", 10*time.Second).Result(); err != nil || !ok {
			t.Fatalf("SET NX PX: %v %v", ok, err)
		}
		wantInt(t, "extend (adding)", eval(ctx, "redis-py-extend", []string{"acl:p:py"}, "tok-py", 5000, "0"), 1)
		wantInt(t, "extend (replacing)", eval(ctx, "redis-py-extend", []string{"acl:p:py"}, "tok-py", 20000, "1"), 1)
		wantInt(t, "reacquire", eval(ctx, "redis-py-reacquire", []string{"acl:p:py"}, "tok-py", 20000), 1)
		wantInt(t, "release", eval(ctx, "redis-py-release", []string{"acl:p:py"}, "tok-py"), 1)
	})
	t.Run("node-redlock", func(t *testing.T) {
		ctx := ctxFor(t)
		keys := []string{"acl:p:node:a", "acl:p:node:b"}
		wantInt(t, "acquire", eval(ctx, "node-redlock5-acquire", keys, "tok-node", 10000), 2)
		wantInt(t, "extend", eval(ctx, "node-redlock5-extend", keys, "tok-node", 20000), 2)
		wantInt(t, "release", eval(ctx, "node-redlock5-release", keys, "tok-node"), 2)
	})
	t.Run("bsm/redislock", func(t *testing.T) {
		ctx := ctxFor(t)
		l, err := redislock.New(c).Obtain(ctx, "acl:p:bsm", 10*time.Second, nil)
		if err != nil {
			t.Fatalf("Obtain: %v", err)
		}
		if err := l.Refresh(ctx, 20*time.Second, nil); err != nil {
			t.Fatalf("Refresh: %v", err)
		}
		if ttl, err := l.TTL(ctx); err != nil || ttl <= 0 {
			t.Fatalf("TTL: %v %v", ttl, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		obtain := redis.NewScript(scripts.Lib("bsm-redislock-v0.10.0-obtain"))
		release := redis.NewScript(scripts.Lib("bsm-redislock-v0.10.0-release"))
		keys, token := []string{"acl:p:bsm10:a", "acl:p:bsm10:b"}, "tokentokentokentokent"
		if err := obtain.Run(ctx, c, keys, token, len(token), "10000").Err(); err != nil {
			t.Fatalf("v0.10 obtain: %v", err)
		}
		if err := obtain.Run(ctx, c, []string{"acl:p:bsm10:z", "acl:p:bsm10:b"}, "other-token-other-token", 23, "10000").Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("v0.10 overlapping obtain: %v, want nil", err)
		}
		if err := release.Run(ctx, c, keys, token).Err(); err != nil {
			t.Fatalf("v0.10 release: %v", err)
		}
	})
	t.Run("redsync", func(t *testing.T) {
		ctx := ctxFor(t)
		rs := redsync.New(goredis.NewPool(c))
		for _, mu := range []*redsync.Mutex{
			rs.NewMutex("acl:p:rs", redsync.WithExpiry(8*time.Second), redsync.WithTries(1)),
			rs.NewMutex("acl:p:rs", redsync.WithExpiry(8*time.Second), redsync.WithTries(1), redsync.WithSetNXOnExtend()),
		} {
			if err := mu.LockContext(ctx); err != nil {
				t.Fatalf("Lock: %v", err)
			}
			if ok, err := mu.ExtendContext(ctx); err != nil || !ok {
				t.Fatalf("Extend: %v %v", ok, err)
			}
			if ok, err := mu.UnlockContext(ctx); err != nil || !ok {
				t.Fatalf("Unlock: %v %v", ok, err)
			}
		}
	})
	prof := redissonwire.Profiles[0]
	dial := func(t *testing.T, addr string) *redissonwire.Client {
		t.Helper()
		rc, err := redissonwire.Dial(t.Context(), addr, prof)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rc.Close)
		return rc
	}
	const lease, wokeWithin = 30 * time.Second, 5 * time.Second
	info := aclClient(t, p2)
	// sent returns how many commands p2 read (INFO proxy), less the INFO
	// commands that asked.
	asked := int64(0)
	sent := func(t *testing.T) int64 {
		t.Helper()
		text, err := info.Info(t.Context(), "proxy").Result()
		if err != nil {
			t.Fatal(err)
		}
		asked++
		return infoField(text, "commands") - asked
	}
	// woken runs lock (a Redisson client of p2 waiting while a client of
	// p1 holds) and, once the waiter sent its n commands (its tries and
	// its SUBSCRIBE), release (p1's unlock): the wait must end by the
	// wake-up p1 publishes on the masters, long before the lease.
	woken := func(t *testing.T, n int64, lock func(ctx context.Context) error, release func(ctx context.Context) error) {
		t.Helper()
		ctx := ctxFor(t)
		got := make(chan error, 1)
		before := sent(t)
		go func() { got <- lock(ctx) }()
		aclWait(t, "the waiter's tries and SUBSCRIBE", 10*time.Second, func() bool { return sent(t) >= before+n })
		if err := release(ctx); err != nil {
			t.Fatalf("release: %v", err)
		}
		if err := aclAwait(t, "the waiter woken through the masters' pub/sub", wokeWithin, got); err != nil {
			t.Fatalf("lock: %v", err)
		}
	}
	t.Run("Redisson RLock", func(t *testing.T) {
		ctx := ctxFor(t)
		r1, r2 := dial(t, p1), dial(t, p2)
		if err := r1.Lock(ctx, "acl:r:lock", 1, lease); err != nil {
			t.Fatalf("lock: %v", err)
		}
		if ok, _, err := r1.TryLock(ctx, "acl:r:lock", 1, lease); err != nil || !ok {
			t.Fatalf("re-entry: %v %v", ok, err)
		}
		if _, err := r1.Renew(ctx, lease, []string{"acl:r:lock"}, []int64{1}); err != nil {
			t.Fatalf("renew: %v", err)
		}
		if n, err := r1.Unlock(ctx, "acl:r:lock", 1); err != nil || n != 0 {
			t.Fatalf("nested unlock: %v %v", n, err)
		}
		woken(t, 3, func(ctx context.Context) error { return r2.Lock(ctx, "acl:r:lock", 2, lease) },
			func(ctx context.Context) error { _, err := r1.Unlock(ctx, "acl:r:lock", 1); return err })
		if n, err := r2.Unlock(ctx, "acl:r:lock", 2); err != nil || n != 1 {
			t.Fatalf("unlock: %v %v", n, err)
		}
		if tok, _, err := r1.FencedLock(ctx, "acl:r:fenced", 1, lease); err != nil || tok <= 0 {
			t.Fatalf("fenced lock: %v %v", tok, err)
		}
		if n, err := r1.Unlock(ctx, "acl:r:fenced", 1); err != nil || n != 1 {
			t.Fatalf("unlock: %v %v", n, err)
		}
	})
	t.Run("Redisson RReadWriteLock", func(t *testing.T) {
		ctx := ctxFor(t)
		r1, r2 := dial(t, p1), dial(t, p2)
		if _, err := r1.RWLockAt(ctx, "acl:r:rw", 1, lease, false); err != nil {
			t.Fatalf("read lock: %v", err)
		}
		if _, err := r1.ReadRenew(ctx, "acl:r:rw", 1, lease); err != nil {
			t.Fatalf("read renew: %v", err)
		}
		woken(t, 3, func(ctx context.Context) error { _, err := r2.RWLockAt(ctx, "acl:r:rw", 2, lease, true); return err },
			func(ctx context.Context) error { _, err := r1.ReadUnlock(ctx, "acl:r:rw", 1); return err })
		if _, err := r2.WriteRenew(ctx, "acl:r:rw", 2, lease); err != nil {
			t.Fatalf("write renew: %v", err)
		}
		if n, err := r2.WriteUnlock(ctx, "acl:r:rw", 2, lease); err != nil || n != 1 {
			t.Fatalf("write unlock: %v %v", n, err)
		}
	})
	t.Run("Redisson RFairLock", func(t *testing.T) {
		ctx := ctxFor(t)
		r1, r2 := dial(t, p1), dial(t, p2)
		if ok, err := r1.FairTryLock(ctx, "acl:r:fair", 1, lease); err != nil || !ok {
			t.Fatalf("tryLock: %v %v", ok, err)
		}
		woken(t, 2, func(ctx context.Context) error { _, err := r2.FairLockAt(ctx, "acl:r:fair", 2, lease, 0); return err },
			func(ctx context.Context) error { _, err := r1.FairUnlock(ctx, "acl:r:fair", 1, lease); return err })
		if n, err := r2.FairUnlock(ctx, "acl:r:fair", 2, lease); err != nil || n != 1 {
			t.Fatalf("unlock: %v %v", n, err)
		}
	})
}

// aclCLI runs every subcommand over m as the documented user
// ($REDLOCK_USER, $REDLOCK_PASSWORD; the bench's flags): lock, lock
// --leader, lock -n, lock --proxy (through proxy, itself a `redlock
// proxy` as that user), inspect finding planted anomalies, bench --plan.
func aclCLI(t *testing.T, m *aclMasters, proxy string) {
	masters := []string{"--masters", m.addrs(), "--fresh-masters", "--master-timeout", aclMasterTimeout.String()}
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"lock", slices.Concat(masters, []string{"acl:cli:lock", "--", "true"})},
		{"lock --leader", slices.Concat(masters, []string{"--leader", "acl:cli:leader", "--", "true"})},
		{"lock -n 2", slices.Concat(masters, []string{"-n", "2", "acl:cli:sem", "--", "true"})},
		{"lock --proxy", []string{"--proxy", proxy, "acl:cli:proxy", "--", "true"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if code, stderr := runLock(tt.args...); code != 0 {
				t.Fatalf("redlock %s: exit %d\n%s", tt.name, code, stderr)
			}
		})
	}
	t.Run("inspect", func(t *testing.T) {
		m.exec(t, 0, "SET", "acl:inspect:nottl", "tok")
		m.exec(t, 0, "SET", "acl:inspect:minority", "tok", "PX", "60000")
		for i := range m.admin {
			m.exec(t, i, "SET", "acl:inspect:mismatch", fmt.Sprint("tok-", i), "PX", "60000")
		}
		var stdout, stderr bytes.Buffer
		code := run([]string{"inspect", "--masters", m.addrs(), "--match", "acl:inspect:*", "--json"}, &stdout, &stderr)
		if code != exitFindings {
			t.Fatalf("redlock inspect: exit %d, want %d (anomalies found)\n%s%s", code, exitFindings, stdout.String(), stderr.String())
		}
		var rep struct {
			Findings []struct {
				Key   string   `json:"key"`
				Kinds []string `json:"kinds"`
			} `json:"findings"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
			t.Fatalf("JSON: %v\n%s", err, stdout.String())
		}
		var got []string
		for _, f := range rep.Findings {
			got = append(got, f.Key+" "+strings.Join(f.Kinds, ","))
		}
		want := []string{"acl:inspect:minority minority", "acl:inspect:mismatch mismatch", "acl:inspect:nottl no_ttl,minority"}
		if !slices.Equal(got, want) {
			t.Fatalf("findings %q, want %q\n%s", got, want, stdout.String())
		}
	})
	t.Run("holder", func(t *testing.T) {
		m.exec(t, 0, "SET", "acl:holder", "tok-holder", "PX", "60000")
		m.exec(t, 1, "SET", "acl:holder", "tok-holder", "PX", "60000")
		for _, args := range [][]string{{"acl:holder"}, {"-n", "3", "acl:holder"}, {"--leader", "acl:cli:leader"}} {
			var stdout, stderr bytes.Buffer
			code := run(slices.Concat([]string{"holder", "--masters", m.addrs(), "--fresh-masters"}, args), &stdout, &stderr)
			if code != 0 {
				t.Fatalf("redlock holder %q: exit %d\n%s\n%s", args, code, stdout.String(), stderr.String())
			}
		}
	})
	t.Run("bench --plan", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		code := run([]string{"bench", "--fresh-masters", "--masters", m.addrs(), "--master-user", m.user, "--master-password", aclUserPW,
			"--master-timeout", aclMasterTimeout.String(), "--duration", "500ms", "--concurrency", "4", "--quiet", "--json", "--plan", "10000"}, &stdout, &stderr)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		var obj struct {
			Plan *struct {
				MasterCores float64 `json:"masters_cores"`
			} `json:"plan"`
		}
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &obj); err != nil || obj.Plan == nil {
			t.Fatalf("JSON: %v %s", err, lines[len(lines)-1])
		}
		if obj.Plan.MasterCores <= 0 {
			t.Fatalf("the plan read no master CPU (INFO cpu): %v cores\n%s\n%s", obj.Plan.MasterCores, stdout.String(), stderr.String())
		}
	})
}
