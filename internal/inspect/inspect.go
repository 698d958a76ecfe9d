package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/resp"
)

// Defaults of [Options]; a zero field selects them.
const (
	DefaultMatch       = "*"             // SCAN MATCH pattern
	DefaultCount       = 1000            // SCAN COUNT hint, keys per page
	DefaultMaxKeys     = 1_000_000       // distinct keys looked up before Run stops
	DefaultTimeout     = 2 * time.Second // one request (a SCAN page or a page's look-ups) to one master
	DefaultMaxValueLen = 64              // bytes of a value kept in a finding
)

// ErrNoMasters is returned by [Run] when it is given no address.
var ErrNoMasters = errors.New("inspect: no masters")

// ErrAllMastersFailed is matched by the error [Run] returns when not one
// master could be inspected; it joins each master's error.
var ErrAllMastersFailed = errors.New("inspect: no master could be inspected")

// ErrBadOption is matched by the error [Run] returns for an invalid [Options]
// field.
var ErrBadOption = errors.New("inspect: invalid option")

// Options configures [Run]. The zero value inspects every key but the
// fencing counter.
type Options struct {
	// Match is the SCAN MATCH glob pattern (default [DefaultMatch]: all keys).
	Match string
	// Count is the SCAN COUNT hint: keys a master examines per page
	// (default [DefaultCount]). Larger pages mean fewer round trips but a
	// longer pause of the master per SCAN call.
	Count int
	// Exclude lists exact key names to skip, besides the fencing counter.
	Exclude []string
	// InspectFenceKey inspects [engine.DefaultFenceKey] too. By default it
	// is skipped: the fencing counter has no TTL on purpose.
	InspectFenceKey bool
	// MaxKeys bounds the distinct keys looked up (default [DefaultMaxKeys];
	// negative: no bound). Past it Run stops and sets [Report.Truncated].
	MaxKeys int
	// Timeout bounds each request to one master: a SCAN page, or the
	// pipelined look-ups of one page's keys (default [DefaultTimeout]). A
	// master that misses it is marked failed and not asked again.
	Timeout time.Duration
	// MaxValueLen is how many bytes of a value a finding keeps (default
	// [DefaultMaxValueLen]); [MasterState.ValueLen] has the full length.
	MaxValueLen int
}

func (o Options) withDefaults() (Options, error) {
	if o.Match == "" {
		o.Match = DefaultMatch
	}
	switch {
	case o.Count < 0:
		return o, fmt.Errorf("%w: Count %d", ErrBadOption, o.Count)
	case o.Timeout < 0:
		return o, fmt.Errorf("%w: Timeout %v", ErrBadOption, o.Timeout)
	case o.MaxValueLen < 0:
		return o, fmt.Errorf("%w: MaxValueLen %d", ErrBadOption, o.MaxValueLen)
	}
	if o.Count == 0 {
		o.Count = DefaultCount
	}
	if o.MaxKeys == 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxValueLen == 0 {
		o.MaxValueLen = DefaultMaxValueLen
	}
	return o, nil
}

// Run dials the masters at addrs with cfg (AUTH, TLS, DB...; its Scripts
// are ignored), scans each
// one for the keys matching o.Match, looks every key up on every master,
// and returns the anomalies it found (see the package documentation).
// Masters that cannot be dialled or fail are reported in
// [Report.Masters]; Run fails only when every master failed (an error
// matching [ErrAllMastersFailed], returned with the report that says
// why each one failed), when o is invalid, or with ctx.Err() when ctx
// ends first.
func Run(ctx context.Context, addrs []string, cfg conn.Config, o Options) (*Report, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, ErrNoMasters
	}
	if len(addrs) > engine.MaxMasters {
		return nil, fmt.Errorf("%w: %d masters (at most %d)", ErrBadOption, len(addrs), engine.MaxMasters)
	}
	cfg.Scripts = nil // read-only: no SCRIPT LOAD on connect
	r := &run{
		o:       o,
		ms:      make([]*master, len(addrs)),
		seen:    make(map[string]struct{}),
		exclude: make(map[string]bool, len(o.Exclude)+1),
		rep: &Report{
			Masters:  make([]MasterReport, len(addrs)),
			Quorum:   len(addrs)/2 + 1,
			Match:    o.Match,
			NotLocks: []string{},
			Findings: []Finding{},
		},
	}
	for _, k := range o.Exclude {
		r.exclude[k] = true
	}
	if !o.InspectFenceKey {
		r.exclude[engine.DefaultFenceKey] = true
	}

	var wg sync.WaitGroup
	for i, addr := range addrs {
		r.rep.Masters[i] = MasterReport{Index: i, Addr: addr}
		m := &master{rep: &r.rep.Masters[i]}
		r.ms[i] = m
		wg.Go(func() {
			c, err := conn.Dial(ctx, addr, cfg)
			if err != nil {
				m.fail(err)
				return
			}
			m.c = c
		})
	}
	wg.Wait()
	defer r.close()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Closing the connections when ctx ends fails the look-ups in flight at
	// once, instead of at their deadline.
	stop := context.AfterFunc(ctx, r.close)
	defer stop()

	if err := r.scanAll(ctx); err != nil {
		return nil, err
	}
	var errs []error
	for _, m := range r.ms {
		if m.err != nil {
			errs = append(errs, fmt.Errorf("master %s: %w", m.rep.Addr, m.err))
		}
	}
	if len(errs) == len(r.ms) {
		return r.rep, fmt.Errorf("%w: %w", ErrAllMastersFailed, errors.Join(errs...))
	}
	r.rep.Keys = len(r.seen)
	for i := range r.rep.Masters {
		m := &r.rep.Masters[i]
		m.FullyRead = m.Complete && !m.Failed() && !r.rep.Truncated
	}
	slices.SortFunc(r.rep.Findings, func(a, b Finding) int { return strings.Compare(a.Key, b.Key) })
	slices.Sort(r.rep.NotLocks)
	return r.rep, nil
}

// run is the state of one Run.
type run struct {
	o       Options
	ms      []*master
	seen    map[string]struct{} // keys looked up (or being), at most o.MaxKeys
	exclude map[string]bool
	skipped map[string]bool // excluded keys met, counted once
	rep     *Report
}

// master is one master's connection and outcome.
type master struct {
	c   *conn.Conn    // nil if the dial failed
	err error         // first failure; set, the master is not asked again
	rep *MasterReport // its entry in Report.Masters
}

func (m *master) fail(err error) {
	if m.err == nil {
		m.err = err
		m.rep.Error = err.Error()
	}
}

func (r *run) close() {
	for _, m := range r.ms {
		if m.c != nil {
			m.c.Close()
		}
	}
}

// scanAll scans the masters one after the other, looking each page's new
// keys up on every master before asking for the next page.
func (r *run) scanAll(ctx context.Context) error {
	for _, m := range r.ms {
		cursor := "0"
		for m.err == nil {
			keys, next, err := r.scan(ctx, m, cursor)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				m.fail(err)
				break
			}
			m.rep.Pages++
			m.rep.Scanned += len(keys)
			fresh, full := r.admit(keys)
			if err := r.lookup(ctx, fresh); err != nil {
				return err
			}
			if full {
				r.rep.Truncated = true
				return nil
			}
			if next == "0" {
				m.rep.Complete = true
				break
			}
			cursor = next
		}
	}
	return nil
}

// scan sends one SCAN call to m and returns the keys of the page and the
// next cursor.
func (r *run) scan(ctx context.Context, m *master, cursor string) (keys []string, next string, err error) {
	cctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	rep, err := m.c.Exec(cctx, "SCAN", cursor, "MATCH", r.o.Match, "COUNT", strconv.Itoa(r.o.Count))
	if re := (*resp.Error)(nil); errors.As(err, &re) && strings.HasPrefix(re.Msg, "NOPERM") {
		return nil, "", fmt.Errorf("SCAN refused: %w (the inspecting user needs SCAN, GETRANGE and PTTL: docs/operations.md#security)", err)
	}
	if err != nil {
		return nil, "", fmt.Errorf("SCAN: %w", err)
	}
	if rep.Type != resp.TypeArray || len(rep.Elems) != 2 || rep.Elems[1].Type != resp.TypeArray {
		return nil, "", fmt.Errorf("SCAN: unexpected reply %v", rep)
	}
	next = rep.Elems[0].Text()
	if _, err := strconv.ParseUint(next, 10, 64); err != nil {
		return nil, "", fmt.Errorf("SCAN: bad cursor %q", next)
	}
	keys = make([]string, len(rep.Elems[1].Elems))
	for i, e := range rep.Elems[1].Elems {
		keys[i] = e.Text()
	}
	return keys, next, nil
}

// excluded reports whether k is excluded: listed, or a per-key fencing
// counter F{tag} of a listed F (engines with Redis Cluster members keep
// one counter per key beside it).
func (r *run) excluded(k string) bool {
	if r.exclude[k] {
		return true
	}
	i := strings.IndexByte(k, '{')
	return i > 0 && strings.HasSuffix(k, "}") && r.exclude[k[:i]]
}

// admit returns the keys of a page that are neither excluded nor seen
// before, and marks them seen. full reports that a new key was left out
// because MaxKeys keys were seen already.
func (r *run) admit(keys []string) (fresh []string, full bool) {
	for _, k := range keys {
		if _, ok := r.seen[k]; ok {
			continue
		}
		if r.excluded(k) {
			if !r.skipped[k] {
				if r.skipped == nil {
					r.skipped = make(map[string]bool)
				}
				r.skipped[k] = true
				r.rep.Excluded++
			}
			continue
		}
		if r.o.MaxKeys >= 0 && len(r.seen) >= r.o.MaxKeys {
			return fresh, true
		}
		r.seen[k] = struct{}{}
		fresh = append(fresh, k)
	}
	return fresh, false
}

// maxLockValue bounds the bytes of a value read per key: lock tokens are at
// most 512 bytes (the engine's limit), so a longer value is not a lock.
const (
	maxLockValue    = 1024
	maxLockValueArg = "1024" // GETRANGE 0 1024: one byte more than a lock can have
)

// cell is one key's state on one master, filled by the replies to GETRANGE and
// PTTL. The two replies write disjoint fields.
type cell struct {
	getErr  error  // transport error of GETRANGE, or an error reply
	val     string // GET's value
	got     bool   // GET returned a value
	wrong   bool   // GET said WRONGTYPE: not a string, not a lock
	pttlErr error
	pttl    int64
}

// batch receives one master's replies for one page of keys. Tag 2j is
// key j's GETRANGE, 2j+1 its PTTL.
type batch struct {
	cells []cell
	wg    *sync.WaitGroup
}

var _ conn.Callback = (*batch)(nil)

func (b *batch) Complete(tag uint64, rep resp.Reply, err error) {
	defer b.wg.Done()
	c := &b.cells[tag/2]
	if tag%2 == 0 {
		switch {
		case err != nil:
			c.getErr = err
		case rep.HasErrorPrefix("WRONGTYPE"):
			c.wrong = true
		case rep.IsError():
			c.getErr = rep.Err()
		case rep.Type == resp.TypeBulkString && len(rep.Str) > maxLockValue:
			c.wrong = true // longer than any lock token: not a lock
		case rep.Type == resp.TypeBulkString && len(rep.Str) > 0:
			c.val, c.got = string(rep.Str), true
		case rep.Type == resp.TypeBulkString:
			// GETRANGE of a missing key (or an empty value: no token)
		case !rep.IsNull():
			c.getErr = fmt.Errorf("GETRANGE: unexpected reply %v", rep)
		}
		return
	}
	switch {
	case err != nil:
		c.pttlErr = err
	case rep.IsError():
		c.pttlErr = rep.Err()
	case rep.Type == resp.TypeInteger:
		c.pttl = rep.Int
	default:
		c.pttlErr = fmt.Errorf("PTTL: unexpected reply %v", rep)
	}
}

// masterErr returns the first error of c: the master's failure
// (timeout, broken connection...) or an error reply (a refused command or
// key, a master loading its data...). Either way the master's state of
// the key is unknown, and so is the rest of what it would answer: a
// master that refuses GETRANGE for one key refuses it for all (a WRONGTYPE
// reply is not an error here: the key is not a lock).
func (c *cell) masterErr() error {
	for i, err := range [2]error{c.getErr, c.pttlErr} {
		if err == nil {
			continue
		}
		cmd := [2]string{"GETRANGE", "PTTL"}[i]
		var re *resp.Error
		if errors.As(err, &re) && strings.HasPrefix(re.Msg, "NOPERM") {
			return fmt.Errorf("%s refused: %w (the inspecting user needs SCAN, GETRANGE and PTTL on the keys it inspects: docs/operations.md#security)", cmd, err)
		}
		return fmt.Errorf("%s: %w", cmd, err)
	}
	return nil
}

// lookup sends GETRANGE and PTTL for every key to every live master at once,
// waits for all the replies (each is bounded by the Timeout deadline) and
// records the keys' findings.
func (r *run) lookup(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	var wg sync.WaitGroup
	batches := make([]*batch, len(r.ms))
	deadline := time.Now().Add(r.o.Timeout)
	var cmd []byte
	for i, m := range r.ms {
		if m.err != nil {
			continue
		}
		b := &batch{cells: make([]cell, len(keys)), wg: &wg}
		batches[i] = b
	send:
		for j, k := range keys {
			for op := range 2 {
				if op == 0 {
					// The value's first bytes only: a big value of some
					// other use of the masters must not be read whole.
					cmd = resp.AppendCommandStrings(cmd[:0], "GETRANGE", k, "0", maxLockValueArg)
				} else {
					cmd = resp.AppendCommandStrings(cmd[:0], "PTTL", k)
				} // Do copies cmd
				wg.Add(1)
				if err := m.c.Do(conn.Request{Cmd: cmd, Deadline: deadline, Callback: b, Tag: uint64(2*j + op)}); err != nil {
					wg.Done()
					m.fail(err)
					batches[i] = nil
					break send
				}
			}
		}
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	for i, b := range batches {
		if b == nil {
			continue
		}
		for j := range b.cells {
			if err := b.cells[j].masterErr(); err != nil {
				r.ms[i].fail(err)
				batches[i] = nil // a failed master's answers are all unknown
				break
			}
		}
	}
	for j, k := range keys {
		r.classify(k, j, batches)
	}
	return nil
}

// classify records key k's finding, if it has one, from its cells (index j)
// in each master's batch (nil: the master's answer is unknown).
func (r *run) classify(k string, j int, batches []*batch) {
	held, unknown, noTTL := 0, 0, false
	var first string
	mismatch := false
	for _, b := range batches {
		if b == nil {
			unknown++
			continue
		}
		c := &b.cells[j]
		switch {
		case c.wrong:
			safe, _ := jsonSafe(k)
			r.rep.NotLocks = append(r.rep.NotLocks, safe)
			return
		case c.getErr != nil || c.pttlErr != nil:
			unknown++
		case c.got && c.pttl != -2:
			if held == 0 {
				first = c.val
			} else if c.val != first {
				mismatch = true
			}
			held++
			noTTL = noTTL || c.pttl == -1
		}
	}
	var kinds []Kind
	if noTTL {
		kinds = append(kinds, NoTTL)
	}
	if held > 0 && held+unknown < r.rep.Quorum {
		kinds = append(kinds, Minority)
	}
	if mismatch {
		kinds = append(kinds, Mismatch)
	}
	if len(kinds) == 0 {
		return
	}
	f := Finding{Kinds: kinds, Held: held, Masters: make([]MasterState, len(batches))}
	f.Key, f.KeyQuoted = jsonSafe(k)
	for i, b := range batches {
		s := MasterState{Master: i}
		switch {
		case b == nil:
			s.Error = "master failed: " + r.ms[i].rep.Error
		case b.cells[j].getErr != nil:
			s.Error = b.cells[j].getErr.Error()
		case b.cells[j].pttlErr != nil:
			s.Error = b.cells[j].pttlErr.Error()
		case b.cells[j].got && b.cells[j].pttl != -2:
			c := &b.cells[j]
			s.Present, s.PTTL = true, c.pttl
			s.Value, s.Quoted = jsonSafe(truncate(c.val, r.o.MaxValueLen))
			s.ValueLen = len(c.val)
		default:
			s.PTTL = -2
		}
		f.Masters[i] = s
	}
	r.rep.Findings = append(r.rep.Findings, f)
}

// truncate returns at most n bytes of s, cut at a UTF-8 rune start.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for k := 0; k < utf8.UTFMax && i > 0 && !utf8.RuneStart(s[i]); k++ {
		i--
	}
	return s[:i]
}
