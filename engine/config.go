package engine

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redlock-dev/redlock/conn"
)

// Defaults of [Config]; a zero field selects them.
const (
	// DefaultDriftFactor is the share of the TTL assumed lost to clock drift.
	DefaultDriftFactor = 0.01
	// DefaultDriftMin is added to the drift allowance (2ms).
	DefaultDriftMin = 2 * time.Millisecond
	// DefaultRetryDelay is the base delay between Lock attempts; each wait
	// is uniform in [base, 2*base).
	DefaultRetryDelay = 20 * time.Millisecond
	// DefaultCleanupTimeout bounds the release sent after a failed or
	// cancelled acquisition.
	DefaultCleanupTimeout = 100 * time.Millisecond
	// DefaultMaxExtensions bounds successful extensions per lock.
	DefaultMaxExtensions = 1 << 20
	// MinMasterTimeout and MaxMasterTimeout clamp the default per-master
	// timeout ttl/100.
	MinMasterTimeout = 5 * time.Millisecond
	MaxMasterTimeout = 50 * time.Millisecond
	// MaxMasters bounds the number of members (Config.Addrs and
	// Config.Clusters together).
	MaxMasters = 64
	// DefaultMergeMax is the default Config.MergeMax (see
	// docs/benchmarks.md for how it was chosen).
	DefaultMergeMax = 32
	// DefaultMaxTTL is the default Config.MaxTTL: the longest TTL a lock
	// may have, and the restart quarantine period (60s).
	DefaultMaxTTL = 60 * time.Second
	// DefaultFenceKey is the key of each master's fencing counter.
	DefaultFenceKey = "redlock:fence"
)

// Names name the settings that errors point to: how the user of the
// program changes them (see Config.Names). An empty field selects the
// Config field's name.
type Names struct {
	MaxTTL        string // Config.MaxTTL
	FreshMasters  string // Config.FreshMasters
	MasterTimeout string // Config.MasterTimeout
}

// Config configures an [Engine].
type Config struct {
	// Addrs are the standalone masters' host:port addresses. Addrs and
	// Clusters together are the members (at least one); the quorum is a
	// majority of members. Use an odd number: N=2k+1 tolerates k failed
	// members. Members are numbered Addrs first, in order, then Clusters
	// ([MasterError.Master], [MasterStatus.Index], metrics labels).
	Addrs []string
	// Clusters are members that are each a whole Redis Cluster, so that
	// lock throughput grows with the clusters' shards
	// (docs/operations.md). Default none.
	Clusters []ClusterMember
	// Conn configures each master connection (AUTH, TLS, timeouts...).
	// The engine adds its scripts to Conn.Scripts.
	Conn conn.Config
	// ConnsPerMaster is the number of pipelined connections per master
	// (default 1; see docs/benchmarks.md for whether more helps).
	ConnsPerMaster int
	// MasterTimeout is how long one operation waits for one master. Zero
	// means max(5ms, min(50ms, ttl/100)) for acquire and extend, and
	// the same formula on the TTL the lock was acquired with for release.
	MasterTimeout time.Duration
	// DriftFactor (default 0.01) and DriftMin (default 2ms) define the
	// clock drift allowance ttl*DriftFactor + DriftMin.
	DriftFactor float64
	DriftMin    time.Duration
	// RetryDelay is the base wait between Lock attempts (default 20ms).
	RetryDelay time.Duration
	// MaxTries bounds Lock attempts (0: until the context ends).
	MaxTries int
	// CleanupTimeout bounds the release after a failed or cancelled
	// acquisition (default 100ms).
	CleanupTimeout time.Duration
	// MaxExtensions bounds successful extensions per lock, by Extend and
	// by the watchdog together (default 1<<20).
	MaxExtensions int
	// DisableQuarantine turns restart quarantine off. With it on (the
	// default), a master that (re)connects with a new run_id or an uptime
	// below the quarantine period does not count as a grant, for acquire
	// and extend, until the period has passed since it started: a master
	// restarted without its data must not vote again while locks it lost
	// may still be held (the delayed-restart rule). Off, such a master
	// votes at once: two clients can hold one key (docs/safety.md).
	DisableQuarantine bool
	// DisableClockCheck turns the masters' clock check off. With it on (the
	// default), every write batch to a master starts with TIME, and a
	// master whose clock advanced more than the engine's monotonic clock
	// plus the drift allowance since the previous reading — a forward
	// jump: its keys expire early, and a second client could win a quorum
	// while a lock is valid — has the votes of that batch discarded and
	// is quarantined for the quarantine period, like a restarted master;
	// a backward jump is logged and counted. What it cannot see (a jump
	// before the engine's first reading of a master, a jump inside one
	// batch) is in docs/safety.md.
	DisableClockCheck bool
	// MaxTTL is the longest TTL any client of these masters uses, for
	// acquire and extend alike: a longer TTL is refused with an error
	// matching [ErrBadArgument], and a master that (re)started less than
	// the quarantine period — the larger of MaxTTL and QuarantineFor — ago
	// does not vote (see DisableQuarantine). Every process that locks on
	// the same masters must use a MaxTTL at least as long as the longest
	// TTL any of them uses. Default: QuarantineFor when set, else
	// [DefaultMaxTTL] (60s).
	MaxTTL time.Duration
	// QuarantineFor, when longer than MaxTTL, is the quarantine period
	// instead (an operator's margin). Default 0.
	QuarantineFor time.Duration
	// FreshMasters declares that the masters hold no lock of any process
	// when this engine first reaches them: the caller has just started them
	// empty (tests, redlock bench's local masters). The server this engine
	// first meets at each address (by run_id) then votes at once; a server
	// with another run_id at that address later (a restart) is quarantined
	// as usual. Default false: a master (or cluster node) whose uptime is
	// below the quarantine period at first contact is quarantined until its
	// start plus the period, because it may have lost locks that other
	// processes still hold. Never set it for masters other processes use.
	FreshMasters bool
	// Names are how the engine's errors name the settings that change
	// what they report. Default: the fields of Config ("Config.MaxTTL");
	// a command-line program names its flags instead ("--max-ttl").
	Names Names
	// FenceKey is the key of the fencing counter on every master (default
	// [DefaultFenceKey]): one counter per master, for every lock key (see
	// [WithFencing]). Nothing else may write it.
	FenceKey string
	// ReleaseChannel, when set, turns on release notifications: every
	// release (Unlock, and the cleanup of a failed acquisition) publishes
	// the key on this channel of each master, and the engine subscribes to
	// it on every master, so that a Lock call waiting for a key held by
	// another process tries as soon as it was released there. It costs the
	// masters a PUBLISH per release and one subscriber connection per
	// engine; every engine of a deployment should set the same channel.
	// Default "": off (waiters of other processes' locks poll; see
	// [Engine.Lock]).
	ReleaseChannel string
	// KeyPrefix is prepended to every key on the masters: engines (or
	// tenants) with different prefixes share masters without seeing each
	// other's locks. [Lock.Key] returns the key without it. The fencing
	// counter ([Config.FenceKey]) is not prefixed: one counter per master
	// serves every tenant, and its tokens still increase per key.
	KeyPrefix string
	// MergeMax bounds how many releases (and, separately, extensions)
	// for one master are merged into one script call when they are
	// queued for the same write (conn.Merge): the master then runs one
	// EVALSHA of scripts.ReleaseMulti over their keys instead of one
	// EVALSHA each, and each lock still gets its own answer. Only what is
	// already queued is merged; a lone release goes out as before.
	// Default 0: [DefaultMergeMax]; negative: never merge.
	MergeMax int
	// Observer, if set, receives the engine's measurements (acquisitions
	// by result, latencies, per-master round trips and errors, quorum
	// margins, extensions, losses, commands per write): the metrics
	// package exports them to Prometheus. Its methods run on hot paths
	// and must not block (see [Observer]). Nil: nothing is measured.
	Observer Observer
	// Logger receives master state changes (down, up, restarted) and quorum
	// lost / regained; nil discards them (the library is quiet by default).
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	n := len(c.Addrs) + len(c.Clusters)
	if n == 0 {
		return c, fmt.Errorf("%w: no masters", ErrBadArgument)
	}
	if n > MaxMasters {
		return c, fmt.Errorf("%w: %d members, at most %d", ErrBadArgument, n, MaxMasters)
	}
	seen := map[string]bool{}
	node := func(a string) error {
		switch {
		case a == "":
			return fmt.Errorf("%w: empty master address", ErrBadArgument)
		case strings.HasPrefix(a, ClusterPrefix):
			return fmt.Errorf("%w: %q: a Redis Cluster member goes in Config.Clusters", ErrBadArgument, a)
		case seen[a]:
			return fmt.Errorf("%w: master %s listed twice", ErrBadArgument, a)
		}
		seen[a] = true
		return nil
	}
	for _, a := range c.Addrs {
		if err := node(a); err != nil {
			return c, err
		}
	}
	for _, m := range c.Clusters {
		if len(m.Seeds) == 0 {
			return c, fmt.Errorf("%w: a cluster member has no seed nodes", ErrBadArgument)
		}
		for _, a := range m.Seeds {
			if err := node(a); err != nil {
				return c, err
			}
		}
	}
	if c.ConnsPerMaster <= 0 {
		c.ConnsPerMaster = 1
	}
	if c.QuarantineFor < 0 || c.MaxTTL < 0 || c.MasterTimeout < 0 || !(c.DriftFactor >= 0 && c.DriftFactor < 1) || c.DriftMin < 0 || // NaN: out of range too
		c.RetryDelay < 0 || c.MaxTries < 0 || c.CleanupTimeout < 0 || c.MaxExtensions < 0 {
		return c, fmt.Errorf("%w: negative or out-of-range config value", ErrBadArgument)
	}
	if c.MaxTTL == 0 {
		c.MaxTTL = c.QuarantineFor
		if c.MaxTTL == 0 {
			c.MaxTTL = DefaultMaxTTL
		}
	}
	if c.DriftFactor == 0 {
		c.DriftFactor = DefaultDriftFactor
	}
	if c.DriftMin == 0 {
		c.DriftMin = DefaultDriftMin
	}
	if c.RetryDelay == 0 {
		c.RetryDelay = DefaultRetryDelay
	}
	if c.CleanupTimeout == 0 {
		c.CleanupTimeout = DefaultCleanupTimeout
	}
	if c.MaxExtensions == 0 {
		c.MaxExtensions = DefaultMaxExtensions
	}
	if c.FenceKey == "" {
		c.FenceKey = DefaultFenceKey
	}
	for _, n := range []struct {
		f   *string
		def string
	}{{&c.Names.MaxTTL, "Config.MaxTTL"}, {&c.Names.FreshMasters, "Config.FreshMasters"}, {&c.Names.MasterTimeout, "Config.MasterTimeout"}} {
		if *n.f == "" {
			*n.f = n.def
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// members returns every member's name (see [ClusterMember.String]) and,
// for a cluster member, its seeds: Addrs first, then Clusters.
func (c *Config) members() (names []string, seeds [][]string) {
	for _, a := range c.Addrs {
		names, seeds = append(names, a), append(seeds, nil)
	}
	for _, m := range c.Clusters {
		names, seeds = append(names, m.String()), append(seeds, m.Seeds)
	}
	return names, seeds
}

// masterTimeout returns the per-master timeout for an operation on a ttl.
func (c *Config) masterTimeout(ttl time.Duration) time.Duration {
	if c.MasterTimeout > 0 {
		return c.MasterTimeout
	}
	return max(MinMasterTimeout, min(MaxMasterTimeout, ttl/100))
}

// drift returns the clock drift allowance for ttl.
func (c *Config) drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*c.DriftFactor) + c.DriftMin
}

// Option is a per-call setting for Lock and TryLock, built by the With
// functions (the zero Option changes nothing). Options that only make
// sense while waiting ([WithRetryDelay], [WithMaxTries]) are refused by
// TryLock with an error matching [ErrBadArgument]. An Option is a plain
// value: passing options allocates nothing.
type Option struct {
	kind optKind
	s    string
	d    time.Duration
	n    int
}

type optKind uint8

const (
	optNone optKind = iota
	optToken
	optRetryDelay
	optMaxTries
	optAutoExtend
	optMasterTimeout
	optFencing
	optTokenPrefix // Reentrant's owner prefix (internal)
)

// apply sets what op says in o.
func (op Option) apply(o *callOpts) {
	switch op.kind {
	case optToken:
		o.token = op.s
	case optRetryDelay:
		o.retryDelay = op.d
		o.waitOption("WithRetryDelay")
	case optMaxTries:
		o.maxTries = op.n
		o.waitOption("WithMaxTries")
	case optAutoExtend:
		o.autoExtend, o.maxHold = true, max(op.d, 0)
	case optMasterTimeout:
		o.masterTimeout = op.d
	case optFencing:
		o.fencing = true
	case optTokenPrefix:
		o.tokenPrefix = op.s
	}
}

type callOpts struct {
	token         string
	tokenPrefix   string      // each attempt's token is tokenPrefix + a random one (Reentrant's owner)
	rw            rwMode      // an RWLock's read or write acquisition
	waiterID      string      // a waiting writer's id for the intent key ("" for TryLock)
	fair          *fairWaiter // a FairLock's try (its waiter: id "" for TryLock)
	retryDelay    time.Duration
	maxTries      int
	masterTimeout time.Duration
	fencing       bool
	autoExtend    bool
	maxHold       time.Duration
	waitOnly      string // the first wait-only option given, for TryLock's error
}

func (o *callOpts) waitOption(name string) {
	if o.waitOnly == "" {
		o.waitOnly = name
	}
}

// WithToken makes TryLock's acquisition use token instead of a random one
// (the proxy passes the client's value). The token may be the value of a
// lock the caller already holds: a failed attempt then releases only the
// masters whose SET NX answered that it created the key, and leaves a
// master that did not answer as it is (what this attempt may have set
// there expires at its TTL), so it never removes the earlier lock. The
// caller may also send the token again while the attempt is under way (a
// client that gave up on it, released its value and retried): the
// acquisition sets the key with a script that also writes a mark beside
// it holding a nonce of this attempt (same TTL, the key's slot), and its
// cleanup deletes the key only where the mark is still this attempt's, so
// it never removes the retry's grant either (docs/safety.md, "Cleanup
// after a failed acquisition"). Lock,
// which makes one attempt after another, refuses it with an error
// matching [ErrBadArgument] (each of its attempts gets a new random token).
func WithToken(token string) Option { return Option{kind: optToken, s: token} }

// WithRetryDelay sets Lock's base wait between attempts (zero or negative:
// Config.RetryDelay).
// It applies to Lock only.
func WithRetryDelay(d time.Duration) Option { return Option{kind: optRetryDelay, d: d} }

// WithMaxTries bounds Lock's attempts (0: until ctx ends). It applies to
// Lock only.
func WithMaxTries(n int) Option { return Option{kind: optMaxTries, n: n} }

// WithAutoExtend makes the engine's watchdog keep the lock: it extends the
// lock to its TTL again about every third of the TTL until [Lock.Unlock],
// for at most maxHold after the acquisition (0: no bound; the last
// extension is shortened so that the validity ends by maxHold). One
// scheduler goroutine and one timer serve every lock of the engine; the
// extensions travel on the masters' pipelines with the other traffic. When
// an extension fails or the validity runs out, [Lock.Done] closes and
// [Lock.Err] says why (docs/algorithm.md, "Holding").
func WithAutoExtend(maxHold time.Duration) Option { return Option{kind: optAutoExtend, d: maxHold} }

// WithMasterTimeout overrides the per-master timeout for this call.
func WithMasterTimeout(d time.Duration) Option { return Option{kind: optMasterTimeout, d: d} }

// WithFencing makes the acquisition return a fencing token
// ([Lock.FencingToken]): a number strictly greater than every fencing
// token issued before for the same key, by this or any other process,
// across different quorums and master restarts (docs/safety.md states the
// assumptions). Pass it to the storage the lock protects, which rejects a
// write carrying a token lower than one it has seen: a holder paused past
// its validity can then do no harm. It costs one more round trip to the
// masters per acquisition: the token is written back to every master, and
// the lock is returned once a quorum of masters (not in restart
// quarantine) stored it while the key still held this acquisition's token.
// Otherwise the acquisition fails, released: an error matching
// [ErrNotAcquired] when a quorum answered (the key was no longer this
// token's on too many of them), [ErrUnavailable] when too few answered.
// With [WithToken], tokens must be unique per acquisition (docs/safety.md).
func WithFencing() Option { return Option{kind: optFencing} }
