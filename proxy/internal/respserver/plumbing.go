package respserver

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"os"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-dev/redlock/internal/proccpu"
	"github.com/redlock-dev/redlock/resp"
)

// Connection plumbing: the commands clients send around their locks.

// serverVersion is what HELLO and INFO report: a Redis version whose
// command set the clients expect, tagged as the proxy.
const serverVersion = "7.0.0"

func (c *Conn) cmdPing(args [][]byte) *Call {
	switch len(args) {
	case 1:
		return Reply([]byte("+PONG\r\n"))
	case 2:
		return Reply(redcon.AppendBulk(nil, args[1]))
	}
	return ArityErr("ping")
}

func (c *Conn) cmdEcho(args [][]byte) *Call { return Reply(redcon.AppendBulk(nil, args[1])) }

// cmdAuth answers AUTH [user] pass. The password is compared in constant
// time (of SHA-256 digests, so its length does not leak either); after
// MaxAuthFailures wrong passwords the connection is closed.
func (c *Conn) cmdAuth(args [][]byte) *Call {
	var user, pass []byte
	switch len(args) {
	case 2:
		user, pass = []byte("default"), args[1]
	case 3:
		user, pass = args[1], args[2]
	default:
		return ArityErr("auth")
	}
	if c.s.cfg.RequirePass == "" {
		return ErrCall(msgNoPassword)
	}
	got, want := sha256.Sum256(pass), sha256.Sum256([]byte(c.s.cfg.RequirePass))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 || string(user) != "default" {
		c.s.authFailures.Add(1)
		c.authFails++
		c.s.logLimited("proxy: wrong password", "remote", c.remote, "failures", c.authFails)
		if c.authFails >= c.s.cfg.MaxAuthFailures {
			c.s.logLimited("proxy: too many wrong passwords; closing the client", "remote", c.remote, "failures", c.authFails)
			return ErrReply(msgWrongPass+" Too many failures: closing the connection.", true)
		}
		return ErrCall(msgWrongPass)
	}
	c.authed = true
	return Reply(redcon.AppendOK(nil))
}

// cmdHello answers HELLO [2 [AUTH user pass] [SETNAME name]] in RESP2;
// HELLO 3 gets NOPROTO so clients (go-redis) fall back to RESP2.
func (c *Conn) cmdHello(args [][]byte) *Call {
	proto3 := c.resp3.Load()
	if len(args) >= 2 {
		v, ok := resp.ParseInt(args[1])
		if !ok {
			return ErrCall("ERR Protocol version is not an integer or out of range")
		}
		if v != 2 && v != 3 {
			return ErrCall(msgNoProto)
		}
		proto3 = v == 3
	}
	name, setName := "", false
	for i := 2; i < len(args); i++ {
		switch Lower(args[i]) {
		case "auth":
			if i+2 >= len(args) {
				return ErrCall(MsgSyntax)
			}
			if r := c.cmdAuth([][]byte{args[0], args[i+1], args[i+2]}); r.out[0] == '-' {
				return r
			}
			i += 2
		case "setname":
			if i+1 >= len(args) {
				return ErrCall(MsgSyntax)
			}
			if r := checkClientName(args[i+1]); r != nil {
				return r
			}
			name, setName = string(args[i+1]), true
			i++
		default:
			return ErrCall(MsgSyntax)
		}
	}
	if !c.authed {
		return ErrCall(msgNoAuth)
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
	return Reply(out)
}

// msgNoCaching refuses client-side caching (CLIENT CACHING, and CLIENT
// TRACKING in a mode that tracks every read).
const msgNoCaching = "ERR redlock proxy: client-side caching is not served: a lock's state is what a quorum of masters holds now, and a cached read of it would be stale; turn the client's cache off (rueidis: DisableCache, or use Do, not DoCache)"

// clientTracking answers CLIENT TRACKING. Only OFF and ON OPTIN are
// accepted — rueidis sends ON OPTIN when it connects with RESP3 and drops
// the connection if it is refused: in OPTIN mode nothing is tracked until
// CLIENT CACHING YES, which is refused, so no invalidation is ever owed.
// Any other mode (every read tracked, BCAST, REDIRECT) is refused.
func (c *Conn) clientTracking(args [][]byte) *Call {
	if len(args) < 3 {
		return ArityErr("client|tracking")
	}
	switch Lower(args[2]) {
	case "off":
		if len(args) == 3 {
			return Reply(redcon.AppendOK(nil))
		}
	case "on":
		if len(args) == 4 && Lower(args[3]) == "optin" {
			return Reply(redcon.AppendOK(nil))
		}
		return ErrCall(msgNoCaching)
	}
	return ErrCall(MsgSyntax)
}

// maxClientName bounds a connection's name (CLIENT SETNAME, HELLO …
// SETNAME): it is kept for the connection's life, outside the memory a
// client is charged for. Redis sets no bound; a request may be 1 MiB.
const maxClientName = 256

// checkClientName refuses a name Redis refuses (spaces, newlines, special
// characters), or one over maxClientName bytes (nil: accepted).
func checkClientName(name []byte) *Call {
	if len(name) > maxClientName {
		return ErrCall("ERR redlock proxy: client names are at most 256 bytes")
	}
	for _, ch := range name {
		if ch <= ' ' || ch > '~' {
			return ErrCall("ERR Client names cannot contain spaces, newlines or special characters.")
		}
	}
	return nil
}

func (c *Conn) cmdClient(args [][]byte) *Call {
	switch Lower(args[1]) {
	case "setname":
		if len(args) != 3 {
			return ArityErr("client|setname")
		}
		if r := checkClientName(args[2]); r != nil {
			return r
		}
		c.name = string(args[2])
		return Reply(redcon.AppendOK(nil))
	case "getname":
		if c.name == "" {
			return Reply(redcon.AppendNull(nil))
		}
		return Reply(redcon.AppendBulkString(nil, c.name))
	case "setinfo":
		if len(args) != 4 {
			return ArityErr("client|setinfo")
		}
		switch Lower(args[2]) {
		case "lib-name":
			c.lib = Printable(args[3])
		case "lib-ver":
		default:
			return ErrCall("ERR Unrecognized option '" + Printable(args[2]) + "'")
		}
		return Reply(redcon.AppendOK(nil))
	case "id":
		return Reply(redcon.AppendInt(nil, c.id))
	case "tracking":
		return c.clientTracking(args)
	case "caching":
		return ErrCall(msgNoCaching)
	}
	return ErrCall("ERR unknown or unsupported command 'CLIENT " + Sub(args) + "'")
}

func (c *Conn) cmdSelect(args [][]byte) *Call {
	n, ok := resp.ParseInt(args[1])
	if !ok {
		return ErrCall(MsgNotInteger)
	}
	if n != 0 {
		return ErrCall("ERR DB index is out of range (the redlock proxy has only DB 0)")
	}
	return Reply(redcon.AppendOK(nil))
}

// renderCommands renders COMMAND's reply of list.
func renderCommands(list []*Command) []byte {
	out := redcon.AppendArray(nil, len(list))
	for _, ct := range list {
		out = redcon.AppendArray(out, 6)
		out = redcon.AppendBulkString(out, ct.Name)
		out = redcon.AppendInt(out, int64(ct.Arity))
		out = redcon.AppendArray(out, len(ct.Flags))
		for _, f := range ct.Flags {
			out = redcon.AppendString(out, f)
		}
		out = redcon.AppendInt(out, int64(ct.First))
		out = redcon.AppendInt(out, int64(ct.Last))
		out = redcon.AppendInt(out, int64(ct.Step))
	}
	return out
}

func (c *Conn) cmdCommand(args [][]byte) *Call {
	if len(args) == 1 {
		return Reply(c.s.table.reply)
	}
	switch Lower(args[1]) {
	case "count":
		return Reply(redcon.AppendInt(nil, int64(len(c.s.table.list))))
	case "docs":
		// No documentation is served: an empty reply lets redis-cli and
		// clients proceed without hints (a map in RESP3).
		if c.resp3.Load() {
			return Reply([]byte("%0\r\n"))
		}
		return Reply([]byte("*0\r\n"))
	case "info":
		return Reply([]byte("*0\r\n"))
	}
	return ErrCall("ERR unknown or unsupported command 'COMMAND " + Sub(args) + "'")
}

// cmdConfig: CONFIG GET answers an empty list (benchmarks and clients
// probe it); everything else is unsupported.
func (c *Conn) cmdConfig(args [][]byte) *Call {
	if len(args) >= 3 && Lower(args[1]) == "get" {
		if c.resp3.Load() {
			return Reply([]byte("%0\r\n")) // RESP3's CONFIG GET is a map
		}
		return Reply([]byte("*0\r\n"))
	}
	return ErrCall("ERR unknown or unsupported command 'CONFIG " + Sub(args) + "'")
}

func (c *Conn) cmdQuit(args [][]byte) *Call {
	return &Call{done: closedChan, out: redcon.AppendOK(nil), closeAfter: true}
}

func (c *Conn) cmdReset(args [][]byte) *Call {
	c.unsubscribeAll()
	c.name, c.lib = "", ""
	c.authed = c.s.cfg.RequirePass == ""
	c.resp3.Store(false) // RESET returns to RESP2, as in Redis
	return Reply([]byte("+RESET\r\n"))
}

func (c *Conn) cmdInfo(args [][]byte) *Call {
	return Reply(redcon.AppendBulkString(nil, c.s.info(args[1:])))
}

// infoSections are the server's INFO sections in order (the handler's
// follow: Config.InfoSections).
var infoSections = []string{"server", "clients", "replication", "persistence", "cpu", "proxy"}

// info renders INFO [section ...]: the server's sections, each with the
// handler's lines (Config.Info), then the handler's sections. No section,
// "all", "default" or "everything" select all.
func (s *Server) info(sections [][]byte) string {
	all := append(append([]string(nil), infoSections...), s.cfg.InfoSections...)
	want := map[string]bool{}
	for _, a := range sections {
		switch sec := Lower(a); sec {
		case "all", "default", "everything":
			for _, n := range all {
				want[n] = true
			}
		default:
			want[sec] = true
		}
	}
	if len(sections) == 0 {
		for _, n := range all {
			want[n] = true
		}
	}
	var b []byte
	more := func(section string) {
		if s.cfg.Info != nil {
			b = s.cfg.Info(b, section)
		}
	}
	ps := s.Stats()
	if want["server"] {
		b = fmt.Appendf(b, "# Server\r\nredis_version:%s\r\nredis_mode:standalone\r\nredlock_proxy:1\r\nprocess_id:%d\r\nuptime_in_seconds:%d\r\nloading:0\r\n",
			serverVersion, os.Getpid(), int64(time.Since(s.start).Seconds()))
		more("server")
		b = append(b, "\r\n"...)
	}
	if want["clients"] {
		b = fmt.Appendf(b, "# Clients\r\nconnected_clients:%d\r\nmaxclients:%d\r\nclient_memory_bytes:%d\r\nmax_client_memory:%d\r\n",
			ps.ConnectedClients, s.cfg.MaxClients, s.mem.Load(), s.cfg.MaxClientMemory)
		more("clients")
		b = append(b, "\r\n"...)
	}
	if want["replication"] {
		// Redisson (other than single-server mode) reads connected_slaves
		// to decide whether to send WAIT after its lock scripts: none
		// behind the proxy, whose writes are quorum writes.
		b = append(b, "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n"...)
		more("replication")
		b = append(b, "\r\n"...)
	}
	if want["persistence"] {
		b = append(b, "# Persistence\r\nloading:0\r\naof_enabled:0\r\n"...)
		more("persistence")
		b = append(b, "\r\n"...)
	}
	if want["cpu"] {
		// The proxy process's CPU, as Redis reports its own: redlock bench
		// --target proxy reads it for the proxy's CPU per request.
		t, _ := proccpu.Self()
		sec := func(d time.Duration) (int64, int64) { return int64(d / time.Second), int64(d%time.Second) / 1e3 }
		ss, sus := sec(t.System)
		us, uus := sec(t.User)
		b = fmt.Appendf(b, "# CPU\r\nused_cpu_sys:%d.%06d\r\nused_cpu_user:%d.%06d\r\n", ss, sus, us, uus)
		more("cpu")
		b = append(b, "\r\n"...)
	}
	if want["proxy"] {
		// Each counter named after its /metrics series: the name without
		// redlock_, proxy_ and _total, then _ and the result label's
		// value, summed over other labels (docs/operations.md); the
		// handler's (the locks') follow.
		b = fmt.Appendf(b, "# Proxy\r\nconnections_accepted:%d\r\nconnections_rejected:%d\r\ncommands:%d\r\nprotocol_errors:%d\r\n",
			ps.AcceptedConnections, ps.RejectedConnections, ps.Commands, ps.ProtocolErrors)
		b = fmt.Appendf(b, "panics_recovered:%d\r\nauth_failures:%d\r\nmemory_refusals:%d\r\noverload_refusals:%d\r\n",
			ps.PanicsRecovered, ps.AuthFailures, ps.MemoryRefusals, ps.OverloadRefusals)
		b = fmt.Appendf(b, "event_loops:%d\r\nloop_clients:%d\r\nloop_moves:%d\r\nexpired_replies:%d\r\n", len(s.loops), ps.LoopClients, ps.LoopMoves, ps.ExpiredReplies)
		b = fmt.Appendf(b, "wakeups_sent:%d\r\nwakeups_dropped:%d\r\n", s.wakesSent.Load(), s.wakeDropped.Load())
		more("proxy")
		b = append(b, "\r\n"...)
	}
	for _, sec := range s.cfg.InfoSections {
		if want[sec] {
			more(sec)
		}
	}
	return string(b)
}

// cmdWait answers WAIT numreplicas timeout: 0 at once. Lock writes are
// quorum writes over independent masters; no replica is behind the proxy
// (INFO replication says connected_slaves:0). Redisson probes it.
func (c *Conn) cmdWait(args [][]byte) *Call {
	if _, ok := resp.ParseInt(args[1]); !ok {
		return ErrCall(MsgNotInteger)
	}
	if t, ok := resp.ParseInt(args[2]); !ok || t < 0 {
		return ErrCall("ERR timeout is negative or not an integer")
	}
	return Reply(redcon.AppendInt(nil, 0))
}

// cmdWaitAOF answers WAITAOF numlocal numreplicas timeout: [0, 0], or
// Redis's error for numlocal > 0 (INFO persistence says aof_enabled:0).
func (c *Conn) cmdWaitAOF(args [][]byte) *Call {
	local, ok1 := resp.ParseInt(args[1])
	_, ok2 := resp.ParseInt(args[2])
	t, ok3 := resp.ParseInt(args[3])
	switch {
	case !ok1 || !ok2 || !ok3:
		return ErrCall(MsgNotInteger)
	case t < 0:
		return ErrCall("ERR timeout is negative")
	case local > 0:
		return ErrCall("ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.")
	}
	out := redcon.AppendArray(nil, 2)
	out = redcon.AppendInt(out, 0)
	return Reply(redcon.AppendInt(out, 0))
}
