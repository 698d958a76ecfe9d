package proxy

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/engine"
	"github.com/redlock-dev/redlock/resp"
)

// Connection plumbing: the commands clients send around their locks.

// serverVersion is what HELLO and INFO report: a Redis version whose
// command set the clients expect, tagged as the proxy.
const serverVersion = "7.0.0"

func (c *client) cmdPing(args [][]byte) *call {
	switch len(args) {
	case 1:
		return reply([]byte("+PONG\r\n"))
	case 2:
		return reply(redcon.AppendBulk(nil, args[1]))
	}
	return arityErr("ping")
}

func (c *client) cmdEcho(args [][]byte) *call { return reply(redcon.AppendBulk(nil, args[1])) }

// cmdAuth answers AUTH [user] pass. The password is compared in constant
// time (of SHA-256 digests, so its length does not leak either); after
// MaxAuthFailures wrong passwords the connection is closed.
func (c *client) cmdAuth(args [][]byte) *call {
	var user, pass []byte
	switch len(args) {
	case 2:
		user, pass = []byte("default"), args[1]
	case 3:
		user, pass = args[1], args[2]
	default:
		return arityErr("auth")
	}
	if c.s.cfg.RequirePass == "" {
		return errCall(msgNoPassword)
	}
	got, want := sha256.Sum256(pass), sha256.Sum256([]byte(c.s.cfg.RequirePass))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 || string(user) != "default" {
		c.s.authFailures.Add(1)
		c.authFails++
		c.s.logLimited("proxy: wrong password", "remote", c.remote, "failures", c.authFails)
		if c.authFails >= c.s.cfg.MaxAuthFailures {
			c.s.logLimited("proxy: too many wrong passwords; closing the client", "remote", c.remote, "failures", c.authFails)
			return errReply(msgWrongPass+" Too many failures: closing the connection.", true)
		}
		return errCall(msgWrongPass)
	}
	c.authed = true
	return reply(redcon.AppendOK(nil))
}

// cmdHello answers HELLO [2 [AUTH user pass] [SETNAME name]] in RESP2;
// HELLO 3 gets NOPROTO so clients (go-redis) fall back to RESP2.
func (c *client) cmdHello(args [][]byte) *call {
	proto3 := c.resp3.Load()
	if len(args) >= 2 {
		v, ok := resp.ParseInt(args[1])
		if !ok {
			return errCall("ERR Protocol version is not an integer or out of range")
		}
		if v != 2 && v != 3 {
			return errCall(msgNoProto)
		}
		proto3 = v == 3
	}
	name, setName := "", false
	for i := 2; i < len(args); i++ {
		switch lower(args[i]) {
		case "auth":
			if i+2 >= len(args) {
				return errCall(msgSyntax)
			}
			if r := c.cmdAuth([][]byte{args[0], args[i+1], args[i+2]}); r.out[0] == '-' {
				return r
			}
			i += 2
		case "setname":
			if i+1 >= len(args) {
				return errCall(msgSyntax)
			}
			name, setName = string(args[i+1]), true
			i++
		default:
			return errCall(msgSyntax)
		}
	}
	if !c.authed {
		return errCall(msgNoAuth)
	}
	if setName {
		c.name = name
	}
	// The protocol switches with this reply: RESP3's is a map.
	c.resp3.Store(proto3)
	var out []byte
	proto := int64(2)
	if proto3 {
		out, proto = resp.AppendMapHeader(nil, 7), 3
	} else {
		out = redcon.AppendArray(nil, 14)
	}
	out = redcon.AppendBulkString(out, "server")
	out = redcon.AppendBulkString(out, "redis")
	out = redcon.AppendBulkString(out, "version")
	out = redcon.AppendBulkString(out, serverVersion)
	out = redcon.AppendBulkString(out, "proto")
	out = redcon.AppendInt(out, proto)
	out = redcon.AppendBulkString(out, "id")
	out = redcon.AppendInt(out, c.id)
	out = redcon.AppendBulkString(out, "mode")
	out = redcon.AppendBulkString(out, "standalone")
	out = redcon.AppendBulkString(out, "role")
	out = redcon.AppendBulkString(out, "master")
	out = redcon.AppendBulkString(out, "modules")
	out = redcon.AppendArray(out, 0)
	return reply(out)
}

// msgNoCaching refuses client-side caching (CLIENT CACHING, and CLIENT
// TRACKING in a mode that tracks every read).
const msgNoCaching = "ERR redlock proxy: client-side caching is not served: a lock's state is what a quorum of masters holds now, and a cached read of it would be stale; turn the client's cache off (rueidis: DisableCache, or use Do, not DoCache)"

// clientTracking answers CLIENT TRACKING. Only OFF and ON OPTIN are
// accepted — rueidis sends ON OPTIN when it connects with RESP3 and drops
// the connection if it is refused: in OPTIN mode nothing is tracked until
// CLIENT CACHING YES, which is refused, so no invalidation is ever owed.
// Any other mode (every read tracked, BCAST, REDIRECT) is refused.
func (c *client) clientTracking(args [][]byte) *call {
	if len(args) < 3 {
		return arityErr("client|tracking")
	}
	switch lower(args[2]) {
	case "off":
		if len(args) == 3 {
			return reply(redcon.AppendOK(nil))
		}
	case "on":
		if len(args) == 4 && lower(args[3]) == "optin" {
			return reply(redcon.AppendOK(nil))
		}
		return errCall(msgNoCaching)
	}
	return errCall(msgSyntax)
}

func (c *client) cmdClient(args [][]byte) *call {
	switch lower(args[1]) {
	case "setname":
		if len(args) != 3 {
			return arityErr("client|setname")
		}
		for _, ch := range args[2] {
			if ch <= ' ' || ch > '~' {
				return errCall("ERR Client names cannot contain spaces, newlines or special characters.")
			}
		}
		c.name = string(args[2])
		return reply(redcon.AppendOK(nil))
	case "getname":
		if c.name == "" {
			return reply(redcon.AppendNull(nil))
		}
		return reply(redcon.AppendBulkString(nil, c.name))
	case "setinfo":
		if len(args) != 4 {
			return arityErr("client|setinfo")
		}
		switch lower(args[2]) {
		case "lib-name":
			c.lib = printable(args[3])
		case "lib-ver":
		default:
			return errCall("ERR Unrecognized option '" + printable(args[2]) + "'")
		}
		return reply(redcon.AppendOK(nil))
	case "id":
		return reply(redcon.AppendInt(nil, c.id))
	case "tracking":
		return c.clientTracking(args)
	case "caching":
		return errCall(msgNoCaching)
	}
	return errCall("ERR unknown or unsupported command 'CLIENT " + sub(args) + "'")
}

func (c *client) cmdSelect(args [][]byte) *call {
	n, ok := resp.ParseInt(args[1])
	if !ok {
		return errCall(msgNotInteger)
	}
	if n != 0 {
		return errCall("ERR DB index is out of range (the redlock proxy has only DB 0)")
	}
	return reply(redcon.AppendOK(nil))
}

// commandReply is COMMAND's reply, rendered once from commandTable (in
// init: commandTable's handlers include cmdCommand).
var (
	commandReply []byte
	commandCount int
)

func init() {
	out := redcon.AppendArray(nil, len(commandTable))
	for _, ct := range commandTable {
		out = redcon.AppendArray(out, 6)
		out = redcon.AppendBulkString(out, ct.name)
		out = redcon.AppendInt(out, int64(ct.arity))
		out = redcon.AppendArray(out, len(ct.flags))
		for _, f := range ct.flags {
			out = redcon.AppendString(out, f)
		}
		out = redcon.AppendInt(out, int64(ct.first))
		out = redcon.AppendInt(out, int64(ct.last))
		out = redcon.AppendInt(out, int64(ct.step))
	}
	commandReply, commandCount = out, len(commandTable)
}

func (c *client) cmdCommand(args [][]byte) *call {
	if len(args) == 1 {
		return reply(commandReply)
	}
	switch lower(args[1]) {
	case "count":
		return reply(redcon.AppendInt(nil, int64(commandCount)))
	case "docs":
		// No documentation is served: an empty reply lets redis-cli and
		// clients proceed without hints (a map in RESP3).
		if c.resp3.Load() {
			return reply([]byte("%0\r\n"))
		}
		return reply([]byte("*0\r\n"))
	case "info":
		return reply([]byte("*0\r\n"))
	}
	return errCall("ERR unknown or unsupported command 'COMMAND " + sub(args) + "'")
}

// cmdConfig: CONFIG GET answers an empty list (benchmarks and clients
// probe it); everything else is unsupported.
func (c *client) cmdConfig(args [][]byte) *call {
	if len(args) >= 3 && lower(args[1]) == "get" {
		if c.resp3.Load() {
			return reply([]byte("%0\r\n")) // RESP3's CONFIG GET is a map
		}
		return reply([]byte("*0\r\n"))
	}
	return errCall("ERR unknown or unsupported command 'CONFIG " + sub(args) + "'")
}

func (c *client) cmdQuit(args [][]byte) *call {
	return &call{done: closedChan, out: redcon.AppendOK(nil), closeAfter: true}
}

func (c *client) cmdReset(args [][]byte) *call {
	c.unsubscribeAll()
	c.name, c.lib = "", ""
	c.authed = c.s.cfg.RequirePass == ""
	c.resp3.Store(false) // RESET returns to RESP2, as in Redis
	return reply([]byte("+RESET\r\n"))
}

func (c *client) cmdInfo(args [][]byte) *call {
	return reply(redcon.AppendBulkString(nil, c.s.info(args[1:])))
}

// infoSections are INFO's sections in order.
var infoSections = []string{"server", "clients", "replication", "persistence", "cpu", "proxy", "masters"}

// info renders INFO [section ...]: the proxy's state and every master's
// health. No section, "all", "default" or "everything" select all.
func (s *Server) info(sections [][]byte) string {
	want := map[string]bool{}
	for _, a := range sections {
		switch sec := lower(a); sec {
		case "all", "default", "everything":
			for _, n := range infoSections {
				want[n] = true
			}
		default:
			want[sec] = true
		}
	}
	if len(sections) == 0 {
		for _, n := range infoSections {
			want[n] = true
		}
	}
	var b strings.Builder
	st, ps := s.eng.Stats(), s.Stats()
	if want["server"] {
		fmt.Fprintf(&b, "# Server\r\nredis_version:%s\r\nredis_mode:standalone\r\nredlock_proxy:1\r\nprocess_id:%d\r\nuptime_in_seconds:%d\r\nloading:0\r\n\r\n",
			serverVersion, os.Getpid(), int64(time.Since(s.start).Seconds()))
	}
	if want["clients"] {
		fmt.Fprintf(&b, "# Clients\r\nconnected_clients:%d\r\nmaxclients:%d\r\nclient_memory_bytes:%d\r\nmax_client_memory:%d\r\n\r\n",
			ps.ConnectedClients, s.cfg.MaxClients, s.mem.Load(), s.cfg.MaxClientMemory)
	}
	if want["replication"] {
		// Redisson (other than single-server mode) reads connected_slaves
		// to decide whether to send WAIT after its lock scripts: none
		// behind the proxy, whose writes are quorum writes.
		b.WriteString("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n\r\n")
	}
	if want["persistence"] {
		b.WriteString("# Persistence\r\nloading:0\r\naof_enabled:0\r\n\r\n")
	}
	if want["cpu"] {
		// The proxy process's CPU, as Redis reports its own: redlock bench
		// --target proxy reads it for the proxy's CPU per request.
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		fmt.Fprintf(&b, "# CPU\r\nused_cpu_sys:%d.%06d\r\nused_cpu_user:%d.%06d\r\n\r\n",
			ru.Stime.Sec, ru.Stime.Usec, ru.Utime.Sec, ru.Utime.Usec)
	}
	if want["proxy"] {
		// Each counter named after its /metrics series: the name without
		// redlock_, proxy_ and _total, then _ and the result label's
		// value, summed over other labels (docs/operations.md). The lock
		// counters are the engine's plus the events the proxy reports
		// itself (lockCounts): those the engine's Observer is told of.
		fmt.Fprintf(&b, "# Proxy\r\nconnections_accepted:%d\r\nconnections_rejected:%d\r\ncommands:%d\r\nprotocol_errors:%d\r\n",
			ps.AcceptedConnections, ps.RejectedConnections, ps.Commands, ps.ProtocolErrors)
		fmt.Fprintf(&b, "panics_recovered:%d\r\nauth_failures:%d\r\nmemory_refusals:%d\r\noverload_refusals:%d\r\nallow_scripts:%d\r\nallow_tokenless_writes:%d\r\n",
			ps.PanicsRecovered, ps.AuthFailures, ps.MemoryRefusals, ps.OverloadRefusals, b2i(s.cfg.AllowScripts), b2i(s.cfg.AllowTokenlessWrites))
		fmt.Fprintf(&b, "event_loops:%d\r\nloop_clients:%d\r\nloop_moves:%d\r\n", len(s.loops), ps.LoopClients, ps.LoopMoves)
		lc := &s.locks
		fmt.Fprintf(&b, "acquisitions_acquired:%d\r\nacquisitions_taken:%d\r\nacquisitions_no_quorum:%d\r\nextensions_extended:%d\r\nextensions_failed:%d\r\n",
			st.Acquired+lc.acquired.Load(), st.Failed+lc.taken.Load(), st.Unavailable+lc.noQuorum.Load(),
			st.Extended+lc.extended.Load(), st.ExtendFailed+lc.extendFailed.Load())
		fmt.Fprintf(&b, "releases_released:%d\r\nreleases_lost:%d\r\nreleases_cleanup:%d\r\nreleases_unavailable:%d\r\nlocks_lost:%d\r\nquorum:%d\r\n",
			st.Released+lc.releases[engine.ReleaseReleased].Load(), st.Lost+lc.releases[engine.ReleaseLost].Load(),
			lc.releases[engine.ReleaseCleanup].Load(), st.ReleaseUnavailable+lc.releases[engine.ReleaseUnavailable].Load(),
			st.LocksLost+lc.locksLost.Load(), s.eng.Quorum())
		// The drift allowance (ttl·factor + min) that a lock's validity
		// leaves out: `redlock lock --proxy` computes its validity with it.
		ec := s.eng.Config()
		fmt.Fprintf(&b, "drift_factor:%s\r\ndrift_min_us:%d\r\n",
			strconv.FormatFloat(ec.DriftFactor, 'g', -1, 64), ec.DriftMin.Microseconds())
		fmt.Fprintf(&b, "wakeups_sent:%d\r\nwakeups_dropped:%d\r\n\r\n",
			s.wakesSent.Load(), s.wakeDropped.Load())
	}
	if want["masters"] {
		b.WriteString("# Masters\r\n")
		up, quarantined := 0, 0
		for i, m := range s.eng.Status() {
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
			fmt.Fprintf(&b, "master%d:addr=%s,state=%s,run_id=%s,version=%s,errors=%d,quarantine_left=%s,native=%s\r\n",
				i, m.Addr, state, m.Info.RunID, m.Info.Version, st.MasterErrors[i], q, nativeOf(m.Info))
		}
		fmt.Fprintf(&b, "masters_up:%d\r\nmasters_total:%d\r\nmasters_quarantined:%d\r\n", up, len(s.eng.Masters()), quarantined)
	}
	return b.String()
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

// cmdWait answers WAIT numreplicas timeout: 0 at once. Lock writes are
// quorum writes over independent masters; no replica is behind the proxy
// (INFO replication says connected_slaves:0). Redisson probes it.
func (c *client) cmdWait(args [][]byte) *call {
	if _, ok := resp.ParseInt(args[1]); !ok {
		return errCall(msgNotInteger)
	}
	if t, ok := resp.ParseInt(args[2]); !ok || t < 0 {
		return errCall("ERR timeout is negative or not an integer")
	}
	return reply(redcon.AppendInt(nil, 0))
}

// cmdWaitAOF answers WAITAOF numlocal numreplicas timeout: [0, 0], or
// Redis's error for numlocal > 0 (INFO persistence says aof_enabled:0).
func (c *client) cmdWaitAOF(args [][]byte) *call {
	local, ok1 := resp.ParseInt(args[1])
	_, ok2 := resp.ParseInt(args[2])
	t, ok3 := resp.ParseInt(args[3])
	switch {
	case !ok1 || !ok2 || !ok3:
		return errCall(msgNotInteger)
	case t < 0:
		return errCall("ERR timeout is negative")
	case local > 0:
		return errCall("ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.")
	}
	out := redcon.AppendArray(nil, 2)
	out = redcon.AppendInt(out, 0)
	return reply(redcon.AppendInt(out, 0))
}
