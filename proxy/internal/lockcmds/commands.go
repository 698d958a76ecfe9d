package lockcmds

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/internal/enginex"
	"github.com/redlock-dev/redlock/proxy/internal/redisson"
	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// Config is what the lock commands are given: the engines, and the
// proxy's settings that change what they answer (proxy.Config documents
// each).
type Config struct {
	// Engine is the lock traffic's engine (required).
	Engine *engine.Engine
	// Scripts is the opted-in scripts' own engine (AllowScripts; nil
	// otherwise): their replies, stalls and timeouts stay on connections
	// of their own.
	Scripts              *engine.Engine
	AllowScripts         bool
	AllowTokenlessWrites bool
	ScriptTimeout        time.Duration
	MaxScripts           int
	KeyPrefix            string
	WakeChannel          string
	LocalWakeups         bool
}

// Server is what the lock commands use of the RESP server that serves
// them (respserver.Server): its publication, its log budgets and whether
// it is closing — not its connections.
type Server interface {
	// Publish sends msg on ch to the server's subscribers (wake-ups).
	Publish(ch, msg string) int
	// LogClient and LogBackend log, rate-limited, what a client caused
	// and a backend's failure behind a client's error reply.
	LogClient(msg string, attrs ...any)
	LogBackend(msg string, attrs ...any)
	// Closing is true from the start of Shutdown or Close.
	Closing() *atomic.Bool
}

// Commands are the lock commands over the engine: the RESP server's
// handler. Create them with [New], hand [Commands.Table] and the hooks
// to the server, then [Commands.Start] them with it.
type Commands struct {
	cfg      Config
	srv      Server
	eng      *engine.Engine
	obs      engine.Observer   // eng's Observer (nil: none): library scripts report to it
	tr       enginex.Transport // eng's broadcasts and attached locks
	pass     *engine.Engine    // opted-in scripts' own master connections (nil unless AllowScripts)
	passTr   enginex.Transport // pass's broadcasts
	redisson *redisson.Locks   // the Redisson room (redisson.go)
	scripts  scriptCache
	fenceKey string // the masters' fencing counter: no client command may name it

	locks   lockCounts // lock events the proxy reports itself, for INFO
	refused *refusals  // recently refused acquisitions: their releases are cleanups
}

// New returns the lock commands of cfg; they serve once started.
func New(cfg Config) *Commands {
	h := &Commands{cfg: cfg, eng: cfg.Engine, refused: newRefusals(), pass: cfg.Scripts}
	h.scripts = scriptCache{max: cfg.MaxScripts, m: map[string]*conn.Script{}}
	h.tr = enginex.Open(h.eng)
	h.obs = h.eng.Config().Observer
	h.fenceKey = h.eng.Config().FenceKey
	if h.pass != nil {
		h.passTr = enginex.Open(h.pass)
	}
	return h
}

// Start makes the commands serve through srv: it starts the Redisson
// room, which publishes through it.
func (h *Commands) Start(srv Server) {
	h.srv = srv
	h.startRedisson()
}

// Close stops what Start started (the Redisson room's wake-up relay).
func (h *Commands) Close() {
	if h.redisson != nil {
		h.redisson.Close()
	}
}

// A master connection is what an event loop holds back.
var _ respserver.Cork = (*conn.Conn)(nil)

// Corks returns the master connections of the lock traffic: an event
// loop holds them back during a turn (respserver.Config.Corks).
func (h *Commands) Corks() []respserver.Cork {
	var corks []respserver.Cork
	for i := range h.eng.Masters() {
		for _, mc := range h.tr.Conns(i) {
			corks = append(corks, mc)
		}
	}
	return corks
}

// LatencyTarget is the admission's target for a command's time on the
// masters: half the per-master timeout of a 30s lock (the usual client
// TTL; at most MaxMasterTimeout/2 with the defaults).
func (h *Commands) LatencyTarget() time.Duration { return h.tr.MasterTimeout(30*time.Second) / 2 }

// CloseWait is how long the server's Close waits for commands in flight:
// a per-master timeout of the longest lock and a cleanup. It is for the
// grant rule's (d): a failed library acquisition's cleanup deletes by the
// client's value where the attempt created the key; a client that saw
// its connection close before that cleanup ran could retry the same value
// through another proxy, and the late cleanup would delete the retry's
// grant.
func (h *Commands) CloseWait() time.Duration {
	ec := h.eng.Config()
	return h.tr.MasterTimeout(ec.MaxTTL) + ec.CleanupTimeout + 100*time.Millisecond
}

// EngineErr is the error reply of an engine error (engineErr): also the
// reply to a command caught by the server's Close.
func (h *Commands) EngineErr(err error) []byte { return h.engineErr(err) }

// Redisson returns the Redisson room the commands hand Redisson's scripts
// to (nil before Start).
func (h *Commands) Redisson() *redisson.Locks { return h.redisson }

// CheckKey refuses a key that is a fencing counter or one of the side
// keys kept beside a lock (nil: a client's key).
func (h *Commands) CheckKey(k []byte) *respserver.Call { return h.reservedKey(k) }

// Subscribable reports whether clients may subscribe to ch: the Redisson
// locks' wake-up channels; SubscribableWhat names them.
func Subscribable(ch string) bool { return redisson.Channel(ch) }

// SubscribableWhat names the channels of [Subscribable] in a refusal.
const SubscribableWhat = "the lock wake-up channels " + redisson.ChannelPrefix + ":{name} and " + redisson.RWChannelPrefix + ":{name}"

// InfoSections are the lock commands' own INFO sections.
var InfoSections = []string{"masters"}

// DefaultWakeChannel is the masters' channel over which proxies tell each
// other that a Redisson hold ended.
const DefaultWakeChannel = redisson.DefaultWakeChannel

// Table is the lock commands' part of the server's command table (the
// server room adds connection plumbing and pub/sub).
func (h *Commands) Table() []*respserver.Command {
	return []*respserver.Command{
		// Lock commands (lockcmds.go).
		{Name: "set", Arity: -3, First: 1, Last: 1, Step: 1, Flags: []string{"write"}, Run: h.cmdSet},
		{Name: "setnx", Arity: 3, First: 1, Last: 1, Step: 1, Flags: []string{"write"}, Run: func(*client, [][]byte) *call { return respserver.ErrCall(msgSetNoTTL) }},
		{Name: "get", Arity: 2, First: 1, Last: 1, Step: 1, Flags: []string{"readonly"}, Run: h.cmdGet},
		{Name: "pttl", Arity: 2, First: 1, Last: 1, Step: 1, Flags: []string{"readonly"}, Run: h.cmdPTTL},
		{Name: "ttl", Arity: 2, First: 1, Last: 1, Step: 1, Flags: []string{"readonly"}, Run: h.cmdTTL},
		{Name: "exists", Arity: -2, First: 1, Last: -1, Step: 1, Flags: []string{"readonly"}, Run: h.cmdCountKeys},
		{Name: "del", Arity: -2, First: 1, Last: -1, Step: 1, Flags: []string{"write"}, Run: h.cmdCountKeys},
		{Name: "delex", Arity: -2, First: 1, Last: 1, Step: 1, Flags: []string{"write", "fast"}, Run: h.cmdDelIfEq},
		{Name: "delifeq", Arity: 3, First: 1, Last: 1, Step: 1, Flags: []string{"write", "fast"}, Run: h.cmdDelIfEq},
		{Name: "hexists", Arity: 3, First: 1, Last: 1, Step: 1, Flags: []string{"readonly", "fast"}, Run: h.cmdHExists},
		{Name: "hget", Arity: 3, First: 1, Last: 1, Step: 1, Flags: []string{"readonly", "fast"}, Run: h.cmdHGet},
		{Name: "redlock.lock", Arity: 4, First: 1, Last: 1, Step: 1, Flags: []string{"write"}, Run: h.cmdRedlockLock},
		{Name: "pexpire", Arity: 3, First: 1, Last: 1, Step: 1, Flags: []string{"write"}, Run: h.cmdPExpire},
		{Name: "eval", Arity: -3, Flags: []string{"noscript", "movablekeys"}, Run: h.cmdEval},
		{Name: "evalsha", Arity: -3, Flags: []string{"noscript", "movablekeys"}, Run: h.cmdEval},
		{Name: "script", Arity: -2, Flags: []string{"noscript"}, Run: h.cmdScript},
		// Opted-in passthrough only (passthrough.go).
		{Name: "fcall", Arity: -3, Flags: []string{"noscript", "movablekeys"}, Run: h.cmdFcall},
		{Name: "fcall_ro", Arity: -3, Flags: []string{"noscript", "movablekeys"}, Run: h.cmdFcall},
	}
}

func init() {
	// The lock commands' names, options and subcommands: compared
	// without an allocation (respserver.Lower).
	respserver.Intern("set", "setnx", "get", "pttl", "ttl", "exists", "del", "delex", "delifeq", "hexists", "hget",
		"redlock.lock", "pexpire", "eval", "evalsha", "script", "fcall", "fcall_ro",
		"nx", "px", "ex", "ifeq", "load", "flush", "sync", "async")
	respserver.Intern(InfoSections...)
}

// Info appends the lock commands' INFO lines of section: the lock
// counters and the drift allowance to the proxy section, and the masters
// section.
func (h *Commands) Info(b []byte, section string) []byte {
	switch section {
	case "proxy":
		// The lock counters are the engine's plus the events the proxy
		// reports itself (lockCounts): those the engine's Observer is
		// told of.
		st, lc := h.eng.Stats(), &h.locks
		b = fmt.Appendf(b, "allow_scripts:%d\r\nallow_tokenless_writes:%d\r\n", b2i(h.cfg.AllowScripts), b2i(h.cfg.AllowTokenlessWrites))
		b = fmt.Appendf(b, "acquisitions_acquired:%d\r\nacquisitions_taken:%d\r\nacquisitions_no_quorum:%d\r\nextensions_extended:%d\r\nextensions_failed:%d\r\n",
			st.Acquired+lc.acquired.Load(), st.Failed+lc.taken.Load(), st.Unavailable+lc.noQuorum.Load(),
			st.Extended+lc.extended.Load(), st.ExtendFailed+lc.extendFailed.Load())
		b = fmt.Appendf(b, "releases_released:%d\r\nreleases_lost:%d\r\nreleases_cleanup:%d\r\nreleases_unavailable:%d\r\nlocks_lost:%d\r\nquorum:%d\r\n",
			st.Released+lc.releases[engine.ReleaseReleased].Load(), st.Lost+lc.releases[engine.ReleaseLost].Load(),
			lc.releases[engine.ReleaseCleanup].Load(), st.ReleaseUnavailable+lc.releases[engine.ReleaseUnavailable].Load(),
			st.LocksLost+lc.locksLost.Load(), h.eng.Quorum())
		// The drift allowance (ttl·factor + min) that a lock's validity
		// leaves out: `redlock lock --proxy` computes its validity with it.
		ec := h.eng.Config()
		b = fmt.Appendf(b, "drift_factor:%s\r\ndrift_min_us:%d\r\n",
			strconv.FormatFloat(ec.DriftFactor, 'g', -1, 64), ec.DriftMin.Microseconds())
	case "masters":
		st := h.eng.Stats()
		b = append(b, "# Masters\r\n"...)
		up, quarantined := 0, 0
		for i, m := range h.eng.Status() {
			state := "down"
			if m.Up {
				state = "up"
				up++
			}
			q := "0"
			if until := st.QuarantinedUntil[i]; !until.IsZero() {
				q = fmt.Sprintf("%.3fs", time.Until(until).Seconds()) // time left
				quarantined++
			}
			b = fmt.Appendf(b, "master%d:addr=%s,state=%s,run_id=%s,version=%s,errors=%d,quarantine_left=%s,native=%s\r\n",
				i, m.Addr, state, m.Info.RunID, m.Info.Version, st.MasterErrors[i], q, nativeOf(m.Info))
		}
		b = fmt.Appendf(b, "masters_up:%d\r\nmasters_total:%d\r\nmasters_quarantined:%d\r\n", up, len(h.eng.Masters()), quarantined)
	}
	return b
}

// nativeOf names the native commands a master's connection found at its
// latest connect (conn.ServerInfo): "DELEX+SETIFEQ", "SETIFEQ", "none".
func nativeOf(in conn.ServerInfo) string {
	var parts []string
	if in.DeleteIfEqual != "" {
		parts = append(parts, in.DeleteIfEqual)
	}
	if in.SetIfEqual {
		parts = append(parts, "SETIFEQ")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
