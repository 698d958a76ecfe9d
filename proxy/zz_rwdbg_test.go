package proxy

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/internal/test/redissonwire"
	"github.com/redlock-dev/redlock/resp"
)

func (s *Server) dbgRWTryLock(t *testing.T, ctx context.Context, dst []byte, rs *rScript, keys, argv [][]byte) []byte {
	key, lease, owner := string(keys[0]), millis(argv[0]), string(argv[1])
	mode := byte('r')
	if rs.Kind == rRWWrite {
		mode = 'w'
	}
	q := s.eng.Quorum()
	for attempt := range rwAttempts {
		if attempt > 0 && !rwJitter(ctx, attempt) {
			return s.engineErr(ctx.Err())
		}
		v1 := rwState{mode: mode, rand: rRand(), owners: []rwOwner{{name: owner, count: 1}}}.value()
		t1 := time.Now()
		reps, err := s.rGrant(ctx, key, lease, scripts.RedissonAcquire, []string{key}, []string{v1, msArg(lease)}, rCreated)
		if err != nil {
			if !errors.Is(err, engine.ErrBadArgument) {
				s.rBestEffort(key, scripts.RedissonCleanup, []string{key}, []string{v1})
			}
			return s.engineErr(err)
		}
		yes := 0
		held, pttl := map[string]int{}, map[string]int64{}
		for _, r := range reps {
			if replyErr(r) != nil {
				continue
			}
			if rCreated(r.Reply) {
				yes++
			} else if e := r.Reply.Elems; r.Reply.Type == resp.TypeArray && len(e) == 3 {
				held[e[1].Text()]++
				pttl[e[1].Text()] = max(pttl[e[1].Text()], e[2].Int)
			}
		}
		if yes >= q && s.rValid(t1, lease) {
			return redcon.AppendNull(dst)
		}
		s.rBestEffort(key, scripts.RedissonCleanup, []string{key}, []string{v1})
		if r := s.undecided(reps); r != nil {
			return r
		}
		if yes >= q {
			return s.engineErr(engine.ErrGrantedTooLate)
		}
		cur := ""
		for v, n := range held {
			if n >= q {
				cur = v
			}
		}
		if cur == "" {
			continue // a change under way, or masters that differ
		}
		st, ok := parseRW(cur)
		if !ok {
			if _, isHold := parseHold(cur); isHold {
				return redcon.AppendError(dst, msgOneKind)
			}
			t.Logf("other kind: cur=%q pttl=%v held=%v", cur, pttl, held); return redcon.AppendInt(dst, pttl[cur])
		}
		shared := st.mode == 'w' && st.find(owner) >= 0 // the writer re-enters
		if mode == 'r' {
			shared = st.mode == 'r' || st.find(owner+":write") >= 0 // a reader, or the writer's own thread
		}
		if !shared {
			t.Logf("not shared: cur=%q pttl=%v", cur, pttl); return redcon.AppendInt(dst, pttl[cur])
		}
		if st.find(owner) < 0 && len(st.owners) >= maxRWOwners {
			return redcon.AppendError(dst, "ERR redlock proxy: a read-write lock holds at most "+strconv.Itoa(maxRWOwners)+" owners (threads) at once")
		}
		next := st.with(owner, 1)
		ttl, how := lease, ""
		if mode == 'w' {
			// Redisson adds the lease to the TTL left: here at most
			// MaxTTL (the grant rule), and never less than the lease (a
			// lease over MaxTTL is refused).
			ttl, how = min(time.Duration(pttl[cur])*time.Millisecond+lease, max(s.eng.Config().MaxTTL, lease)), "exact"
		}
		t2 := time.Now()
		reps, err = s.rGrant(ctx, key, ttl, scripts.RedissonCAS, []string{key}, []string{cur, next.value(), msArg(ttl), "", "0", how}, isOne)
		if err == nil && countYes(reps, isOne) >= q && s.rValid(t2, lease) {
			return redcon.AppendNull(dst)
		}
		if err == nil || !errors.Is(err, engine.ErrBadArgument) {
			s.rBestEffort(key, scripts.RedissonCAS, []string{key}, []string{next.value(), cur, "0", "", "0"})
		}
		if err != nil {
			return s.engineErr(err)
		}
		if r := s.undecided(reps); r != nil {
			return r
		}
		if countYes(reps, isOne) >= q {
			return s.engineErr(engine.ErrGrantedTooLate)
		}
		// Another change of the lock came first: try again from a fresh read.
	}
	return redcon.AppendInt(dst, rwBusyTTL)
}


func TestZZDbgRefused(t *testing.T) {
	e := startEnv(t, 3, nil)
	prof := redissonwire.Profiles[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := "zzrw-dbg"
	base := dialAs(t, e.addr, "", prof)
	base.ReadTryLock(ctx, name, 99, 30*time.Second)
	var rs *rScript
	for i := range rTable { if rTable[i].File == "redisson-3.20.0-rwReadTryLock" { rs = &rTable[i] } }
	var wg sync.WaitGroup
	stop := time.Now().Add(2 * time.Second)
	for g := range 8 {
		c := dialAs(t, e.addr, "", prof)
		wg.Go(func() {
			for time.Now().Before(stop) {
				own := c.Owner(int64(g))
				got := e.srv.dbgRWTryLock(t, ctx, nil, rs, [][]byte{[]byte(name), []byte("x")}, [][]byte{[]byte("30000"), []byte(own), []byte(own+":write")})
				if string(got) != "$-1\r\n" {
					t.Logf("answered %q", got)
					continue
				}
				c.ReadUnlock(ctx, name, int64(g))
			}
		})
	}
	wg.Wait()
}
