package conn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-dev/redlock/resp"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// maxRedirects bounds how often one request follows MOVED or ASK.
const maxRedirects = 5

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of the
// key, or of its hash tag (the part between the first '{' and the next
// '}', when not empty), modulo 16384.
func Slot(key string) int {
	key = HashTag(key)
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % Slots
}

// HashTag returns the part of key that Redis Cluster hashes: its hash tag
// (between the first '{' and the next '}', when not empty), or the whole
// key. Keys with the same HashTag are in the same slot.
func HashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// ClusterStats are counters of a Cluster since it was created.
type ClusterStats struct {
	Moved     uint64 // -MOVED replies followed (request re-sent to the new owner)
	Asked     uint64 // -ASK replies followed (ASKING + request on the target)
	Refreshes uint64 // slot map reloads
	Nodes     int    // node connections
}

// Cluster is one Redis Cluster used through per-node auto-pipelined
// Conns: each request goes to the node that serves its key's hash slot
// (Request.Key), following -MOVED (the slot map is updated and reloaded,
// the request re-sent) and -ASK (ASKING and the request, written together
// on the target) at most 5 times within the request's deadline. The map
// is loaded with CLUSTER SLOTS from the seeds at start, and again after a
// MOVED and when a node connection breaks. Merging (Request.Merge) is not
// done across a cluster's keys: a merged call's keys would span slots.
type Cluster struct {
	cfg   Config
	seeds []string
	done  chan struct{}
	wg    sync.WaitGroup
	kick  chan struct{} // asks the refresher to reload the map

	mu     sync.RWMutex
	nodes  map[string]*Conn // guarded by mu
	slots  []*Conn          // per slot, nil while unknown; guarded by mu
	closed bool             // guarded by mu

	moved, asked, refreshes atomic.Uint64
	loaded                  chan struct{} // closed after the first successful load
	loadOnce                sync.Once

	onNewOwner func(addr string)
	// The last map's masters (guarded by mu): a node that starts serving
	// slots and was not a master there is a new owner (so is one taking
	// over slots, takenOver).
	masters map[string]bool
	// askedNew are -ASK targets reported as new owners that no map has
	// listed as a master yet (guarded by mu): reported once, not at every
	// -ASK of a long migration.
	askedNew map[string]bool
	inflight atomic.Int64 // requests accepted by Do whose callback has not run

	// omu guards order, the per-slot order of requests across redirects
	// (cluster_order.go). It is taken before mu, never while mu is held.
	omu   sync.Mutex
	order []*slotOrder // per slot, nil until the slot's first request
}

// ClusterConfig configures a Cluster (NewClusterWith).
type ClusterConfig struct {
	// Seeds are host:port of any of the cluster's nodes.
	Seeds []string
	// Conn configures every node connection.
	Conn Config
	// OnNewOwner, if set, is called (on the Cluster's goroutine) with the
	// address of a node that starts serving slots after the first map
	// load without having served any before — a replica promoted by a
	// failover, a master that was just added — or that a -ASK sends a
	// request to without being a master in the last map (a node importing
	// slots), or that takes over slots whose previous owner could not
	// have handed them over by MIGRATE: it was not connected or is gone
	// from the new map (a dead master's slots assigned to another master,
	// as redis-cli --cluster fix does), or no map since the first had
	// them. It is called before a request reaches that node, and before
	// any other request can be routed to it. It must not block, nor call
	// the Cluster (it may run with the Cluster's lock held).
	//
	// With OnNewOwner set, every node connection also runs the
	// replication check (Config.OnReplicationID, which is called after
	// it when set): a node whose replication id changed between two
	// readings — promoted, demoted, or demoted and promoted again between
	// two map loads, which the maps cannot show — is reported too, on its
	// connection's reader goroutine before the replies of the batch that
	// showed it are delivered.
	OnNewOwner func(addr string)
}

// NewCluster returns a Cluster reached through seeds (host:port of any of
// its nodes); it connects and loads the slot map in the background. cfg
// configures every node connection.
func NewCluster(seeds []string, cfg Config) *Cluster {
	return NewClusterWith(ClusterConfig{Seeds: seeds, Conn: cfg})
}

// NewClusterWith is NewCluster with every option.
func NewClusterWith(cc ClusterConfig) *Cluster {
	cfg, seeds := cc.Conn, cc.Seeds
	cl := &Cluster{cfg: cfg, seeds: append([]string(nil), seeds...), done: make(chan struct{}), kick: make(chan struct{}, 1),
		nodes: map[string]*Conn{}, slots: make([]*Conn, Slots), loaded: make(chan struct{}), onNewOwner: cc.OnNewOwner,
		order: make([]*slotOrder, Slots)}
	user := cfg.OnState
	cl.cfg.OnState = func(sc StateChange) {
		if !sc.Up {
			cl.refresh() // a node went away: its slots may have a new owner
		}
		if user != nil {
			user(sc)
		}
	}
	for _, s := range cl.seeds {
		cl.nodeLocked(s)
	}
	cl.wg.Add(1)
	go cl.refresher()
	cl.refresh()
	return cl
}

// nodeLocked returns the Conn to addr, creating it (mu held for writing,
// or during construction).
func (cl *Cluster) nodeLocked(addr string) *Conn {
	c := cl.nodes[addr]
	if c == nil {
		cfg := cl.cfg
		if cl.onNewOwner != nil {
			// A node whose replication id changed was promoted or demoted
			// since the previous reading, maybe both between two map
			// loads: a new owner, reported before the batch's replies.
			user := cfg.OnReplicationID
			cfg.OnReplicationID = func(ch ReplicationChange) {
				if ch.Refused == nil {
					cl.onNewOwner(addr)
				}
				if user != nil {
					user(ch)
				}
			}
		}
		c = New(addr, cfg)
		cl.nodes[addr] = c
	}
	return c
}

// WaitLoaded waits until the slot map has been loaded once, or ctx ends.
func (cl *Cluster) WaitLoaded(ctx context.Context) error {
	select {
	case <-cl.loaded:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("conn: cluster %v: slot map not loaded: %w", cl.seeds, ctx.Err())
	}
}

// Nodes returns the node connections, by address.
func (cl *Cluster) Nodes() map[string]*Conn {
	cl.mu.RLock()
	defer cl.mu.RUnlock()
	out := make(map[string]*Conn, len(cl.nodes))
	for a, c := range cl.nodes {
		out[a] = c
	}
	return out
}

// NodeFor returns the connection of the node serving key's slot as the
// map has it now (nil while unknown).
func (cl *Cluster) NodeFor(key string) *Conn {
	cl.mu.RLock()
	defer cl.mu.RUnlock()
	return cl.slots[Slot(key)]
}

// Stats returns the Cluster's counters.
func (cl *Cluster) Stats() ClusterStats {
	cl.mu.RLock()
	n := len(cl.nodes)
	cl.mu.RUnlock()
	return ClusterStats{Moved: cl.moved.Load(), Asked: cl.asked.Load(), Refreshes: cl.refreshes.Load(), Nodes: n}
}

// Do sends req to the node serving the slot of req.Key, with the
// guarantees of [Conn.Do] (the callback is called exactly once on a nil
// return). A request without Key goes to any node. Requests with keys of
// one slot reach the node that serves it in the order Do accepted them,
// across -MOVED and -ASK re-sends (a later one may wait for the earlier
// ones' redirects: cluster_order.go), unless the slot's owner changes
// again while one of them is being redirected.
func (cl *Cluster) Do(req Request) error {
	if len(req.Cmd) == 0 || req.Callback == nil {
		return ErrBadCommand
	}
	if req.Merge != nil { // keys of one merged call would span slots
		req.Script, req.Merge = req.Merge.single, nil
	}
	r := &redirect{cl: cl, cb: req.Callback, tag: req.Tag, slot: -1}
	if req.Key != "" {
		r.slot = Slot(req.Key)
	}
	if !req.Stable {
		req.Cmd = append([]byte(nil), req.Cmd...)
		req.Stable = true
	}
	r.req = req
	req.Callback, req.Tag = r, 0
	var c *Conn
	var err error
	if r.slot < 0 {
		c, err = cl.route(r.slot)
	} else {
		c, err = cl.admit(r)
	}
	if err != nil {
		return err
	}
	cl.inflight.Add(1)
	if c == nil {
		return nil // held: sent after the slot's earlier requests (release)
	}
	r.host, _, _ = net.SplitHostPort(c.Addr())
	if err := c.Do(req); err != nil {
		cl.inflight.Add(-1)
		cl.answered(r)
		return err
	}
	return nil
}

// route returns the Conn for slot (any node when unknown or -1).
func (cl *Cluster) route(slot int) (*Conn, error) {
	cl.mu.RLock()
	defer cl.mu.RUnlock()
	if cl.closed {
		return nil, ErrClosed
	}
	if slot >= 0 {
		if c := cl.slots[slot]; c != nil {
			return c, nil
		}
	}
	for _, c := range cl.nodes {
		if c.Connected() {
			return c, nil
		}
	}
	for _, c := range cl.nodes {
		return c, nil
	}
	return nil, fmt.Errorf("%w: cluster %v: no node", ErrDown, cl.seeds)
}

// redirect is the callback of one cluster request: it follows MOVED and
// ASK replies and completes the caller's callback with the final outcome.
type redirect struct {
	cl    *Cluster
	req   Request // the caller's request (Cmd Stable)
	cb    Callback
	tag   uint64
	slot  int
	tries int
	host  string // of the node last asked: a redirect without a host means it
	at    *Conn  // whose queue holds it, while counted in its slot's order (omu)
	err   error  // why a held request could not be sent (releaseLocked)
}

// Complete implements Callback.
func (r *redirect) Complete(_ uint64, rep resp.Reply, err error) {
	if err == nil && rep.IsError() && r.tries < maxRedirects && (r.req.Deadline.IsZero() || time.Now().Before(r.req.Deadline)) {
		if addr, ask, ok := parseRedirect(rep.Str, r.host); ok {
			r.tries++
			if r.follow(addr, ask) {
				return
			}
		}
	}
	r.cl.inflight.Add(-1)
	r.cl.answered(r)
	r.cb.Complete(r.tag, rep, err)
}

// follow re-sends the request to addr (after ASKING when ask); it reports
// false when it could not (the caller gets the redirect reply).
func (r *redirect) follow(addr string, ask bool) bool {
	cl := r.cl
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return false
	}
	c := cl.nodeLocked(addr)
	// A MOVED or an ASK to a node that was not a master in the last map
	// (a promoted replica, a node added to take over slots, one never
	// seen — maybe restarted empty before this client met it), or a MOVED
	// that takes the slot over from an owner that cannot have handed it
	// (takenOver): the member is told before the request is re-sent, so a
	// grant from it cannot be counted before its quarantine exists.
	fresh := cl.masters != nil && (!cl.masters[addr] && !cl.askedNew[addr] ||
		!ask && r.slot >= 0 && takenOver(cl.slots[r.slot], addr, cl.masters))
	if fresh && cl.onNewOwner != nil {
		// Before the node is published as a master: once it is, a
		// concurrent redirect or route sends to it without reporting, and
		// its grant must not be counted before the report took effect.
		cl.onNewOwner(addr)
	}
	switch {
	case fresh && ask:
		if cl.askedNew == nil {
			cl.askedNew = map[string]bool{}
		}
		cl.askedNew[addr] = true
	case fresh:
		cl.masters[addr] = true
	}
	if !ask && r.slot >= 0 {
		cl.slots[r.slot] = c
	}
	cl.mu.Unlock()
	r.host, _, _ = net.SplitHostPort(addr)
	req := r.req
	req.Callback, req.Tag = r, 0
	var err error
	old := cl.resending(r, c)
	if ask {
		cl.asked.Add(1)
		err = c.doAsking(req)
	} else {
		cl.moved.Add(1)
		cl.refresh()
		err = c.Do(req)
	}
	cl.resent(r, old, c, err == nil)
	return err == nil
}

// parseRedirect reads "MOVED slot host:port" or "ASK slot host:port"; a
// redirect without a host (":port") means the host of the node that sent
// it, from.
func parseRedirect(msg []byte, from string) (addr string, ask bool, ok bool) {
	s := string(msg)
	switch {
	case strings.HasPrefix(s, "MOVED "):
		s = s[6:]
	case strings.HasPrefix(s, "ASK "):
		s, ask = s[4:], true
	default:
		return "", false, false
	}
	_, addr, found := strings.Cut(s, " ")
	if !found || addr == "" {
		return "", false, false
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false, false
	}
	if host == "" {
		if from == "" {
			return "", false, false
		}
		addr = net.JoinHostPort(from, port)
	}
	return addr, ask, true
}

// refresh asks the refresher to reload the slot map (coalesced).
func (cl *Cluster) refresh() {
	select {
	case cl.kick <- struct{}{}:
	default:
	}
}

// refresher reloads the slot map when kicked (at most every 10 ms), every
// 100 ms while a load fails or a node serving slots is not connected (a
// failover is under way: the map will name its replica), and every 5 s
// otherwise.
func (cl *Cluster) refresher() {
	defer cl.wg.Done()
	t := time.NewTimer(time.Second)
	defer t.Stop()
	for {
		select {
		case <-cl.done:
			return
		case <-cl.kick:
		case <-t.C:
		}
		if err := cl.load(); err != nil || !cl.ownersUp() {
			t.Reset(100 * time.Millisecond)
		} else {
			t.Reset(5 * time.Second)
		}
		select {
		case <-cl.done:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// ownersUp reports whether every node serving slots is connected.
func (cl *Cluster) ownersUp() bool {
	cl.mu.RLock()
	defer cl.mu.RUnlock()
	var last *Conn
	for _, c := range cl.slots {
		if c != last && c != nil {
			if !c.Connected() {
				return false
			}
			last = c
		}
	}
	return true
}

// load reads CLUSTER SLOTS from the first node that answers and installs
// the map.
func (cl *Cluster) load() error {
	var errs []error
	for addr, c := range cl.Nodes() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		rep, err := c.Exec(ctx, "CLUSTER", "SLOTS")
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		if err := cl.install(addr, rep); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		cl.refreshes.Add(1)
		cl.loadOnce.Do(func() { close(cl.loaded) })
		return nil
	}
	return errors.Join(errs...)
}

// install sets the slot map from a CLUSTER SLOTS reply read from node from.
func (cl *Cluster) install(from string, rep resp.Reply) error {
	if rep.Type != resp.TypeArray {
		return fmt.Errorf("%w: CLUSTER SLOTS answered %s", resp.ErrProtocol, rep)
	}
	fromHost, _, _ := net.SplitHostPort(from)
	type span struct {
		lo, hi int
		addr   string
	}
	var spans []span
	masters := map[string]bool{}
	nodeAddr := func(n resp.Reply) string {
		host := string(n.Elems[0].Str)
		if host == "" || host == "?" {
			host = fromHost
		}
		return net.JoinHostPort(host, strconv.FormatInt(n.Elems[1].Int, 10))
	}
	for _, e := range rep.Elems {
		if len(e.Elems) < 3 || len(e.Elems[2].Elems) < 2 {
			return fmt.Errorf("%w: CLUSTER SLOTS entry %s", resp.ErrProtocol, e)
		}
		lo, hi := int(e.Elems[0].Int), int(e.Elems[1].Int)
		if lo < 0 || hi >= Slots || lo > hi {
			return fmt.Errorf("%w: CLUSTER SLOTS range %d-%d", resp.ErrProtocol, lo, hi)
		}
		a := nodeAddr(e.Elems[2])
		spans = append(spans, span{lo, hi, a})
		masters[a] = true
	}
	// New owners: serving slots now, not a master in the last map (a
	// replica promoted by a failover, or a node not seen), or serving
	// slots taken over from an owner that cannot have handed them
	// (takenOver). The member is told before the new map is used.
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return ErrClosed
	}
	var fresh []string
	if cl.masters != nil {
		for a := range masters {
			if !cl.masters[a] && !cl.askedNew[a] { // an -ASK target was reported already
				fresh = append(fresh, a)
			}
		}
		for _, s := range spans {
			if slices.Contains(fresh, s.addr) {
				continue
			}
			for i := s.lo; i <= s.hi; i++ {
				if takenOver(cl.slots[i], s.addr, masters) {
					fresh = append(fresh, s.addr)
					break
				}
			}
		}
	}
	cl.mu.Unlock()
	if cl.onNewOwner != nil {
		for _, a := range fresh {
			cl.onNewOwner(a)
		}
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.closed {
		return ErrClosed
	}
	for _, s := range spans {
		c := cl.nodeLocked(s.addr)
		for i := s.lo; i <= s.hi; i++ {
			cl.slots[i] = c
		}
	}
	cl.masters = masters
	for a := range cl.askedNew {
		if masters[a] {
			delete(cl.askedNew, a) // a master now: judged by the maps from here on
		}
	}
	return nil
}

// takenOver reports whether a slot that prev served (nil: no map since
// the first had it) and addr serves now was taken over rather than handed
// over. Keys leave a master only by MIGRATE, which needs the previous
// owner running: a slot given to another master while its owner is down
// (CLUSTER FORGET and ADDSLOTS, or SETSLOT NODE, as redis-cli --cluster
// fix does for a master lost without replica) arrives empty, even on a
// node that was a master all along. So the new owner counts as new unless
// prev is connected now and still serves slots in masters (the map being
// installed, or the last one for a MOVED). A connection still
// reconnecting, a node forgotten by the cluster (maybe reachable from
// here, partitioned from the others), or a slot first seen assigned all
// count as taken over; so does moving a node's last slots away by
// MIGRATE (it leaves the map), which only costs a quarantine. Called with
// mu held.
func takenOver(prev *Conn, addr string, masters map[string]bool) bool {
	if prev == nil {
		return true
	}
	if prev.Addr() == addr {
		return false
	}
	return !masters[prev.Addr()] || !prev.Connected()
}

// Up reports whether the slot map is loaded and a node is connected, and
// why not.
func (cl *Cluster) Up() (bool, error) {
	select {
	case <-cl.loaded:
	default:
		return false, fmt.Errorf("%w: cluster %v: slot map not loaded yet", ErrDown, cl.seeds)
	}
	var errs []error
	for _, c := range cl.Nodes() {
		if c.Connected() {
			return true, nil
		}
		errs = append(errs, c.DownErr())
	}
	return false, errors.Join(errs...)
}

// Drain waits until every request accepted by Do has its outcome,
// redirects followed included, or ctx ends. New requests made meanwhile
// are waited for too.
func (cl *Cluster) Drain(ctx context.Context) error {
	wait := 100 * time.Microsecond
	t := time.NewTimer(wait)
	defer t.Stop()
	for cl.inflight.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-cl.done:
			return nil
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Millisecond)
		t.Reset(wait)
	}
	return nil
}

// Close closes every node connection and stops the refresher.
func (cl *Cluster) Close() error {
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return nil
	}
	cl.closed = true
	nodes := cl.nodes
	cl.mu.Unlock()
	close(cl.done)
	cl.wg.Wait()
	for _, c := range nodes {
		c.Close()
	}
	return nil
}

// doAsking queues "ASKING" and req back to back (nothing else between
// them on the wire): the target of an -ASK serves req's slot for the
// command right after ASKING only.
func (c *Conn) doAsking(req Request) error {
	c.mu.Lock()
	if err := c.admitLocked(2); err != nil {
		c.mu.Unlock()
		return err
	}
	c.nreq++
	// ASKING (no key) is written after anything held for merging, so
	// nothing comes between it and req. req's pending entry keeps its
	// KeyHash: a NOSCRIPT answer to it is re-sent only if no later request
	// of its key is queued (resendReordersLocked). Queued as of unknown
	// key, an extension's EVAL went out behind a later extension of the
	// same key on the ASK target, which kept the shorter TTL while the
	// engine counted the longer (found by the review of the cluster
	// redirects, issue #46).
	h := req.KeyHash
	req.KeyHash = 0
	wake := c.pushLocked(&Request{Cmd: askingCmd, Deadline: req.Deadline, Callback: discard{}})
	c.pushLocked(&req)
	p := c.q.at(c.q.end() - 1)
	p.asking, p.keyHash = true, h
	c.mu.Unlock()
	if wake {
		c.wakeWriter()
	}
	return nil
}

var askingCmd = resp.AppendCommandStrings(nil, "ASKING")

// discard is the callback of a request whose reply nobody needs.
type discard struct{}

func (discard) Complete(uint64, resp.Reply, error) {}
