package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// logRecord is one record a recorder kept.
type logRecord struct {
	time  time.Time
	msg   string
	attrs map[string]slog.Value
}

// recorder is a slog.Handler that keeps every record, in order.
type recorder struct {
	mu   sync.Mutex
	recs []logRecord
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	lr := logRecord{time: rec.Time, msg: rec.Message, attrs: map[string]slog.Value{}}
	rec.Attrs(func(a slog.Attr) bool {
		lr.attrs[a.Key] = a.Value
		return true
	})
	r.mu.Lock()
	r.recs = append(r.recs, lr)
	r.mu.Unlock()
	return nil
}

func (r logRecord) String() string {
	var b strings.Builder
	b.WriteString(r.msg)
	for k, v := range r.attrs {
		fmt.Fprintf(&b, " %s=%v", k, v)
	}
	return b.String()
}

func (r *recorder) records() []logRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]logRecord(nil), r.recs...)
}

// find returns the indexes of the records whose message starts with
// prefix and, when master ≥ 0, whose "master" attribute is master.
func find(recs []logRecord, prefix string, master int) []int {
	var out []int
	for i, r := range recs {
		if !strings.HasPrefix(r.msg, prefix) {
			continue
		}
		if m, ok := r.attrs["master"]; master >= 0 && (!ok || m.Int64() != int64(master)) {
			continue
		}
		out = append(out, i)
	}
	return out
}

// TestQuarantineLog: two of three masters come back empty and quarantined.
// "quorum regained" is not logged while they are up but quarantined (they
// do not vote: a lock is refused then), only once one's quarantine ended;
// the end of each master's quarantine is logged, not before the end the
// quarantine line announced. Before, "quorum regained" came as soon as
// the masters were up, and the end of a quarantine was never logged.
func TestQuarantineLog(t *testing.T) {
	const maxTTL = 2 * time.Second
	set := mastertest.Start(t, 3)
	mastertest.RequireReal(t, set)
	var rec recorder
	v := newEnvOn(t, set, engine.Config{FreshMasters: true, MaxTTL: maxTTL, MasterTimeout: 500 * time.Millisecond, Logger: slog.New(&rec),
		Conn: conn.Config{ReconnectMin: time.Millisecond, ReconnectMax: 20 * time.Millisecond}})
	ms := set.Masters()
	for _, i := range []int{0, 1} {
		if err := ms[i].Kill(); err != nil {
			t.Fatal(err)
		}
	}
	v.waitDown(0, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, i := range []int{0, 1} {
		if err := ms[i].Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, ok func([]logRecord) bool) []logRecord {
		t.Helper()
		for {
			recs := rec.records()
			if ok(recs) {
				return recs
			}
			if ctx.Err() != nil {
				t.Fatalf("no %s in the log: %v", what, recs)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("quarantine of masters 0 and 1", func(recs []logRecord) bool {
		return len(find(recs, "engine: master quarantined", 0)) > 0 && len(find(recs, "engine: master quarantined", 1)) > 0
	})
	if _, err := v.e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	// Up, quarantined: no quorum of votes, and no "regained" either.
	if _, err := v.e.TryLock(ctx, keyName(t), time.Second); !errors.Is(err, engine.ErrQuarantined) {
		t.Fatalf("TryLock with two of three masters quarantined: %v; want a refusal naming the quarantine", err)
	}
	if got := find(rec.records(), "engine: quorum regained", -1); len(got) > 0 {
		t.Fatalf("quorum regained logged while two of three masters are quarantined: %v", rec.records())
	}
	recs := waitFor("end of both quarantines and the quorum regained", func(recs []logRecord) bool {
		return len(find(recs, "engine: master quarantine ended", 0)) > 0 && len(find(recs, "engine: master quarantine ended", 1)) > 0 &&
			len(find(recs, "engine: quorum regained", -1)) > 0
	})
	if _, err := v.e.TryLock(ctx, keyName(t), time.Second); err != nil {
		t.Fatalf("TryLock after the quorum was regained: %v", err)
	}
	lost, regained := find(recs, "engine: quorum lost", -1), find(recs, "engine: quorum regained", -1)
	if len(lost) != 1 || len(regained) != 1 {
		t.Fatalf("quorum lost logged %d times, regained %d; want 1 each: %v", len(lost), len(regained), recs)
	}
	firstEnd := len(recs)
	for _, i := range []int{0, 1} {
		q, end := find(recs, "engine: master quarantined", i), find(recs, "engine: master quarantine ended", i)
		if len(end) != 1 {
			t.Errorf("master %d: quarantine end logged %d times, want once", i, len(end))
			continue
		}
		last := recs[q[len(q)-1]]
		until, err := time.Parse(time.RFC3339Nano, last.attrs["until"].String())
		if err != nil {
			t.Fatal(err)
		}
		if e := recs[end[0]]; end[0] < q[len(q)-1] || e.time.Before(until) {
			t.Errorf("master %d: quarantine end logged at %v (record %d), before its quarantine (record %d) until %v",
				i, e.time.Format(time.RFC3339Nano), end[0], q[len(q)-1], until.Format(time.RFC3339Nano))
		}
		firstEnd = min(firstEnd, end[0])
	}
	if regained[0] < lost[0] || regained[0] < firstEnd {
		t.Errorf("quorum regained (record %d) before the quorum was lost (%d) or a quarantine ended (%d): %v", regained[0], lost[0], firstEnd, recs)
	}
	if voting := recs[regained[0]].attrs["voting"].Int64(); voting < 2 {
		t.Errorf("quorum regained with %d masters voting", voting)
	}
	if got := find(recs, "engine: master quarantine", 2); len(got) > 0 {
		t.Errorf("master 2, never restarted, was quarantined: %v", recs[got[0]])
	}
}
