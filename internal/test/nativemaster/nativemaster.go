// Package nativemaster is a test master with the native compare-and-delete
// commands of newer servers, for a machine whose Redis (Debian bookworm's
// 7.0) has none of them: a RESP front, in process, for a real redis-server
// that adds what the chosen server version documents:
//
//   - Redis 8.4: "DELEX key [IFEQ v | IFNE v]" and "SET … IFEQ v".
//   - Valkey 9.0: "DELIFEQ key v" and "SET … IFEQ v".
//   - Valkey 8.1: "SET … IFEQ v" only.
//
// Each added command runs as one Lua script on the redis-server behind, so
// it is atomic there, with the documented replies: 1 or 0 for the deletes
// (0 for a missing key, WRONGTYPE for a key of another type), OK or nil for
// SET IFEQ (a missing key is not created). COMMAND INFO and COMMAND DOCS SET
// answer as that version would for these commands, so that a client
// detects them the way it would on the real server. Every other command is
// relayed as it is. The front counts the commands it receives by name, so
// a test can tell which form a client used. It does not relay pub/sub.
//
// This is not the real server: it shows that a client uses the commands
// as documented and falls back where they are missing; what they cost a
// real server is measured only where one is installed.
package nativemaster

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/redlock-dev/redlock/resp"
)

// Version is the server version whose commands a Master adds.
type Version int

const (
	Redis84  Version = iota // DELEX, SET IFEQ
	Valkey90                // DELIFEQ, SET IFEQ
	Valkey81                // SET IFEQ
	Plain                   // none: every command is relayed as it is
	// Liar claims Redis 8.4's commands in COMMAND INFO and COMMAND DOCS
	// but relays them as they are, so Redis 7.0 refuses them (ERR
	// unknown command, syntax error): a server whose answers to the
	// probes are wrong, or an ACL that hides what the user may run.
	Liar
)

// Master is one front. Close it when done (Start does, at the test's end).
type Master struct {
	ln      net.Listener
	backend string
	v       Version
	wg      sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	counts map[string]int
	closed bool
}

// Start returns a front for the redis-server at backend that adds v's
// commands, listening on a free loopback port, closed when t ends.
func Start(t testing.TB, backend string, v Version) *Master {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &Master{ln: ln, backend: backend, v: v, conns: map[net.Conn]struct{}{}, counts: map[string]int{}}
	m.wg.Add(1)
	go m.accept()
	t.Cleanup(m.Close)
	return m
}

// Mixed is the five versions StartMixed puts in front of five masters:
// two with DELEX, one with DELIFEQ, one with SET IFEQ only, one plain.
var Mixed = []Version{Redis84, Redis84, Valkey90, Valkey81, Plain}

// StartMixed starts a front of version Mixed[i] for backends[i] (five of
// them) and returns the fronts and their addresses.
func StartMixed(t testing.TB, backends []string) ([]*Master, []string) {
	t.Helper()
	if len(backends) != len(Mixed) {
		t.Fatalf("nativemaster: StartMixed needs %d backends, got %d", len(Mixed), len(backends))
	}
	fronts := make([]*Master, len(Mixed))
	addrs := make([]string, len(Mixed))
	for i, v := range Mixed {
		fronts[i] = Start(t, backends[i], v)
		addrs[i] = fronts[i].Addr()
	}
	return fronts, addrs
}

// Addr returns the front's address.
func (m *Master) Addr() string { return m.ln.Addr().String() }

// Count returns how many commands named name (case-insensitive) the front
// received.
func (m *Master) Count(name string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[strings.ToUpper(name)]
}

// Close stops the front and closes its connections.
func (m *Master) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	for c := range m.conns {
		c.Close()
	}
	m.mu.Unlock()
	m.ln.Close()
	m.wg.Wait()
}

func (m *Master) accept() {
	defer m.wg.Done()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			return
		}
		be, err := net.Dial("tcp", m.backend)
		if err != nil {
			c.Close()
			continue
		}
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			c.Close()
			be.Close()
			return
		}
		m.conns[c], m.conns[be] = struct{}{}, struct{}{}
		m.mu.Unlock()
		m.wg.Add(1)
		go m.serve(c, be)
	}
}

// serve answers one client's commands in order, one at a time.
func (m *Master) serve(c, be net.Conn) {
	defer m.wg.Done()
	defer func() {
		m.mu.Lock()
		delete(m.conns, c)
		delete(m.conns, be)
		m.mu.Unlock()
		c.Close()
		be.Close()
	}()
	cr := resp.NewCommandReader(c, 64<<10)
	br := resp.NewReaderSize(be, 64<<10)
	w := bufio.NewWriter(c)
	var out []byte
	for {
		cmd, err := cr.ReadCommand()
		if err != nil {
			return
		}
		if len(cmd.Args) == 0 {
			continue
		}
		name := strings.ToUpper(string(cmd.Args[0]))
		m.mu.Lock()
		m.counts[name]++
		m.mu.Unlock()
		do := func(args ...[]byte) (resp.Reply, error) {
			if _, err := be.Write(resp.AppendCommand(out[:0], args...)); err != nil {
				return resp.Reply{}, err
			}
			return br.ReadReply()
		}
		rep, err := m.answer(name, cmd.Args, do)
		if err != nil {
			return
		}
		if _, err := w.Write(rep); err != nil {
			return
		}
		if cr.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}

// answer returns the encoded reply to args, asking the backend with do.
func (m *Master) answer(name string, args [][]byte, do func(...[]byte) (resp.Reply, error)) ([]byte, error) {
	relay := func(args ...[]byte) ([]byte, error) {
		r, err := do(args...)
		if err != nil {
			return nil, err
		}
		return resp.AppendReply(nil, r), nil
	}
	sub := ""
	if len(args) > 1 {
		sub = strings.ToUpper(string(args[1]))
	}
	switch {
	case m.v == Liar && (name == "DELEX" || name == "SET"):
		return relay(args...)
	case name == "DELEX" && m.v == Redis84:
		return m.delex(args, relay)
	case name == "DELIFEQ" && m.v == Valkey90:
		if len(args) != 3 {
			return errReply("ERR wrong number of arguments for 'delifeq' command"), nil
		}
		return relay(bs("EVAL"), bs(delScript), bs("1"), args[1], bs("IFEQ"), args[2])
	case name == "SET" && m.v != Plain && hasIFEQ(args):
		return m.setIfEq(args, relay)
	case name == "COMMAND" && sub == "INFO":
		return m.commandInfo(args[2:], do)
	case name == "COMMAND" && sub == "DOCS" && len(args) == 3 && strings.EqualFold(string(args[2]), "set") && m.v != Plain:
		return []byte(setDocs), nil
	}
	return relay(args...)
}

// delScript deletes KEYS[1] if its value is (ARGV[1] IFEQ) or is not
// (IFNE) ARGV[2]: 1 deleted, 0 not (or missing), WRONGTYPE for a key
// that is not a string.
const delScript = `local t = redis.call('type', KEYS[1]).ok
if t == 'none' then return 0 end
if t ~= 'string' then return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value') end
if (redis.call('get', KEYS[1]) == ARGV[2]) == (ARGV[1] == 'IFEQ') then return redis.call('del', KEYS[1]) end
return 0`

// setScript sets KEYS[1] to ARGV[1] if its value is ARGV[2], with the
// expiry options ARGV[3…]: OK, or nil when it differs or is missing.
const setScript = `local t = redis.call('type', KEYS[1]).ok
if t == 'none' then return false end
if t ~= 'string' then return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value') end
if redis.call('get', KEYS[1]) ~= ARGV[2] then return false end
return redis.call('set', KEYS[1], ARGV[1], unpack(ARGV, 3))`

func (m *Master) delex(args [][]byte, relay func(...[]byte) ([]byte, error)) ([]byte, error) {
	switch len(args) {
	case 2:
		return relay(bs("DEL"), args[1])
	case 4:
		cond := strings.ToUpper(string(args[2]))
		if cond != "IFEQ" && cond != "IFNE" {
			return errReply("ERR Invalid condition. Use IFEQ, IFNE, IFDEQ, or IFDNE"), nil
		}
		return relay(bs("EVAL"), bs(delScript), bs("1"), args[1], bs(cond), args[3])
	}
	return errReply("ERR wrong number of arguments for 'delex' command"), nil
}

func hasIFEQ(args [][]byte) bool {
	for _, a := range args[3:] {
		if strings.EqualFold(string(a), "IFEQ") {
			return true
		}
	}
	return false
}

// setIfEq serves "SET key value IFEQ cmp [PX ms | EX s | KEEPTTL]"; NX, XX
// or GET with IFEQ are answered with a syntax error, as this front does
// not implement them.
func (m *Master) setIfEq(args [][]byte, relay func(...[]byte) ([]byte, error)) ([]byte, error) {
	if len(args) < 5 {
		return errReply("ERR syntax error"), nil
	}
	var cmp []byte
	var opts [][]byte
	for i := 3; i < len(args); i++ {
		switch strings.ToUpper(string(args[i])) {
		case "IFEQ":
			if cmp != nil || i+1 >= len(args) {
				return errReply("ERR syntax error"), nil
			}
			cmp = args[i+1]
			i++
		case "PX", "EX", "PXAT", "EXAT":
			if i+1 >= len(args) {
				return errReply("ERR syntax error"), nil
			}
			opts = append(opts, args[i], args[i+1])
			i++
		case "KEEPTTL":
			opts = append(opts, args[i])
		default:
			return errReply("ERR syntax error"), nil
		}
	}
	call := append([][]byte{bs("EVAL"), bs(setScript), bs("1"), args[1], args[2], cmp}, opts...)
	return relay(call...)
}

// commandInfo answers COMMAND INFO: the added commands' entries, the
// backend's for the others.
func (m *Master) commandInfo(names [][]byte, do func(...[]byte) (resp.Reply, error)) ([]byte, error) {
	out := resp.AppendArrayHeader(nil, len(names))
	for _, n := range names {
		name := strings.ToLower(string(n))
		if (name == "delex" && (m.v == Redis84 || m.v == Liar)) || (name == "delifeq" && m.v == Valkey90) {
			out = append(out, "*10\r\n"...)
			out = resp.AppendBulkString(out, name)
			out = append(out, ":-2\r\n*2\r\n+write\r\n+fast\r\n:1\r\n:1\r\n:1\r\n*2\r\n+@write\r\n+@string\r\n*0\r\n*0\r\n*0\r\n"...)
			continue
		}
		r, err := do(bs("COMMAND"), bs("INFO"), n)
		if err != nil {
			return nil, err
		}
		if r.Type != resp.TypeArray || len(r.Elems) != 1 {
			return nil, errors.New("nativemaster: unexpected COMMAND INFO reply " + r.String())
		}
		out = resp.AppendReply(out, r.Elems[0])
	}
	return out, nil
}

// setDocs is COMMAND DOCS SET as a server with SET IFEQ answers it, cut
// to the summary and the condition argument.
var setDocs = func() string {
	token := func(dst []byte, name, tok string) []byte {
		dst = resp.AppendArrayHeader(dst, 4)
		dst = resp.AppendBulkString(resp.AppendBulkString(dst, "name"), name)
		return resp.AppendBulkString(resp.AppendBulkString(dst, "token"), tok)
	}
	b := resp.AppendArrayHeader(nil, 2)
	b = resp.AppendBulkString(b, "set")
	b = resp.AppendArrayHeader(b, 4)
	b = resp.AppendBulkString(resp.AppendBulkString(b, "summary"), "Sets the string value of a key.")
	b = resp.AppendBulkString(b, "arguments")
	b = resp.AppendArrayHeader(b, 1)
	b = resp.AppendArrayHeader(b, 6)
	b = resp.AppendBulkString(resp.AppendBulkString(b, "name"), "condition")
	b = resp.AppendBulkString(resp.AppendBulkString(b, "type"), "oneof")
	b = resp.AppendBulkString(b, "arguments")
	b = resp.AppendArrayHeader(b, 3)
	b = token(b, "nx", "NX")
	b = token(b, "xx", "XX")
	b = token(b, "comparison-value", "IFEQ")
	return string(b)
}()

func bs(s string) []byte { return []byte(s) }

func errReply(s string) []byte { return append(append([]byte{'-'}, s...), '\r', '\n') }
