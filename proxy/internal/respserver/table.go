package respserver

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/tidwall/redcon"

	"github.com/redlock-dev/redlock/resp"
)

// Command is one entry of the server's command table: what COMMAND
// reports and how dispatch runs it.
type Command struct {
	Name string
	// Arity follows Redis: n means exactly n arguments (name included),
	// -n at least n. dispatch checks it; handlers check subcommands only.
	Arity             int
	First, Last, Step int      // key positions, for COMMAND
	Flags             []string // for COMMAND
	NoAuth            bool     // allowed before AUTH
	// Run serves the command: a reply built at once ([Reply], [ErrCall])
	// is computed as the command is read, before the connection's earlier
	// asynchronous commands completed; a command that must follow them
	// (see their effects) is asynchronous on the same keys ([Conn.Async]).
	// Replies are written in request order either way.
	Run func(c *Conn, args [][]byte) *Call
}

// serverCommands are the server's own commands: connection plumbing
// (plumbing.go) and pub/sub (pubsub.go).
var serverCommands = []*Command{
	{Name: "subscribe", Arity: -2, Flags: []string{"pubsub", "noscript", "loading", "stale"}, Run: (*Conn).cmdSubscribe},
	{Name: "ssubscribe", Arity: -2, Flags: []string{"pubsub", "noscript", "loading", "stale"}, Run: (*Conn).cmdSubscribe},
	{Name: "unsubscribe", Arity: -1, Flags: []string{"pubsub", "noscript", "loading", "stale"}, Run: (*Conn).cmdUnsubscribe},
	{Name: "sunsubscribe", Arity: -1, Flags: []string{"pubsub", "noscript", "loading", "stale"}, Run: (*Conn).cmdUnsubscribe},
	{Name: "ping", Arity: -1, Flags: []string{"fast"}, Run: (*Conn).cmdPing},
	{Name: "echo", Arity: 2, Flags: []string{"fast"}, Run: (*Conn).cmdEcho},
	{Name: "hello", Arity: -1, Flags: []string{"noauth", "fast"}, NoAuth: true, Run: (*Conn).cmdHello},
	{Name: "auth", Arity: -2, Flags: []string{"noauth", "fast"}, NoAuth: true, Run: (*Conn).cmdAuth},
	{Name: "client", Arity: -2, Flags: []string{"fast"}, Run: (*Conn).cmdClient},
	{Name: "select", Arity: 2, Flags: []string{"fast"}, Run: (*Conn).cmdSelect},
	{Name: "command", Arity: -1, Flags: []string{"loading"}, Run: (*Conn).cmdCommand},
	{Name: "wait", Arity: 3, Flags: []string{"noscript"}, Run: (*Conn).cmdWait},
	{Name: "waitaof", Arity: 4, Flags: []string{"noscript"}, Run: (*Conn).cmdWaitAOF},
	{Name: "info", Arity: -1, Flags: []string{"loading"}, Run: (*Conn).cmdInfo},
	{Name: "config", Arity: -2, Flags: []string{"admin"}, Run: (*Conn).cmdConfig},
	{Name: "quit", Arity: -1, Flags: []string{"noauth", "fast"}, NoAuth: true, Run: (*Conn).cmdQuit},
	{Name: "reset", Arity: 1, Flags: []string{"noauth", "fast"}, NoAuth: true, Run: (*Conn).cmdReset},
}

// commandTable is a server's commands: the handler's, then its own.
type commandTable struct {
	list   []*Command
	byName map[string]*Command
	reply  []byte // COMMAND's reply, rendered once
}

// newCommandTable indexes the handler's commands and the server's own.
func newCommandTable(handler []*Command) (*commandTable, error) {
	t := &commandTable{byName: map[string]*Command{}}
	for _, c := range append(append([]*Command(nil), handler...), serverCommands...) {
		if c.Name != strings.ToLower(c.Name) || t.byName[c.Name] != nil {
			return nil, fmt.Errorf("command %q twice, or not in lower case", c.Name)
		}
		t.list = append(t.list, c)
		t.byName[c.Name] = c
	}
	t.reply = renderCommands(t.list)
	return t, nil
}

// testHook, when set by a test, runs at the start of every dispatch
// (where "dispatch", with the command) and of every asynchronous command
// (where "async"): it lets tests make the serving code panic.
var testHook atomic.Pointer[func(where string, args [][]byte)]

// SetTestHook sets (nil: clears) the hook tests use to make serving code
// panic: it runs at the start of every dispatch (where "dispatch", with
// the command) and of every asynchronous command (where "async").
func SetTestHook(f func(where string, args [][]byte)) {
	if f == nil {
		testHook.Store(nil)
		return
	}
	testHook.Store(&f)
}

// dispatch runs one command. Commands that touch the masters run
// asynchronously; connection plumbing runs here, in request order. As in
// Redis: an unknown command or a wrong arity is reported before NOAUTH.
func (c *Conn) dispatch(args [][]byte) *Call {
	if h := testHook.Load(); h != nil {
		(*h)("dispatch", args)
	}
	if c.subscribed() {
		// Subscribed mode: every reply goes behind the frames already
		// queued (messages, earlier replies), in request order.
		cl := c.dispatchOne(args)
		if cl.a != nil || len(cl.out) == 0 {
			cl.resp3 = c.resp3.Load()
			return cl
		}
		out := c.pushFrame(c.encode(cl.out))
		out.closeAfter = out.closeAfter || cl.closeAfter
		out.size = cl.size // what dispatch charged beyond the request
		return out
	}
	cl := c.dispatchOne(args)
	// Replies are built in RESP2; a RESP3 connection gets them rewritten
	// (its nulls), now or when an asynchronous one is done.
	if cl.a != nil {
		cl.resp3 = c.resp3.Load()
	} else {
		cl.out = c.encode(cl.out)
	}
	return cl
}

// encode returns out, built in RESP2, in the connection's protocol.
func (c *Conn) encode(out []byte) []byte {
	if !c.resp3.Load() {
		return out
	}
	return toRESP3(out)
}

// toRESP3 returns out in RESP3: out itself when it holds no RESP2 null,
// else a copy rewritten (out may be shared, as constant replies are; the
// copy is shorter, so what out was charged covers it).
func toRESP3(out []byte) []byte {
	if !bytes.Contains(out, []byte("-1\r\n")) {
		return out
	}
	out, _ = resp.AppendRESP3(nil, out)
	return out
}

func (c *Conn) dispatchOne(args [][]byte) *Call {
	name := Lower(args[0])
	cmd := c.s.table.byName[name]
	if cmd == nil {
		return ErrCall("ERR unknown or unsupported command '" + Printable(args[0]) + "'")
	}
	if n := len(args); (cmd.Arity > 0 && n != cmd.Arity) || (cmd.Arity < 0 && n < -cmd.Arity) {
		return ArityErr(name)
	}
	if !c.authed && !cmd.NoAuth {
		return ErrCall(msgNoAuth)
	}
	if c.sub != nil {
		switch {
		case c.subscribed() && !subscribedAllowed[name]:
			return c.pushFrame(redcon.AppendError(nil, "ERR Can't execute '"+name+"': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"))
		case c.subscribed() && name == "ping":
			return c.pingSubscribed(args)
		case !c.subscribed() && !c.framesWritten():
			return ErrReply(MsgShuttingDown, true)
		}
	}
	var charged int64
	if p := c.s.cfg.KeyPrefix; p != "" {
		// The prefixed keys are copies: charged like the request itself,
		// and given back with it when the reply is written.
		first, last, step := keyRange(cmd, args)
		for i := first; i <= last; i += step {
			charged += int64(len(p) + len(args[i]))
		}
		if !c.hold(charged, true) {
			return ErrCall(MsgMemory)
		}
		prefixKeys(args, p, first, last, step)
	}
	cl := c.runUnlessFence(cmd, args)
	cl.size = charged // whatever the reply, it gives the charge back
	return cl
}

// runUnlessFence refuses a command naming a key Config.CheckKey refuses,
// and runs any other. (Script calls check their KEYS in their handlers.)
func (c *Conn) runUnlessFence(cmd *Command, args [][]byte) *Call {
	if check := c.s.cfg.CheckKey; check != nil && cmd.First > 0 {
		first, last, step := keyRange(cmd, args)
		for i := first; i <= last; i += step {
			if cl := check(args[i]); cl != nil {
				return cl
			}
		}
	}
	return cmd.Run(c, args)
}

// ArityErr is Redis's reply to a command with the wrong number of
// arguments.
func ArityErr(name string) *Call {
	return ErrCall("ERR wrong number of arguments for '" + name + "' command")
}

// Sub returns a command's subcommand, printable, for an error message.
func Sub(args [][]byte) string {
	if len(args) < 2 {
		return ""
	}
	return Printable(args[1])
}

// keyRange returns the positions of a command's key arguments: first to
// last (inclusive, last < first for none) by step — cmd's key positions,
// or the numkeys keys of a script call (EVAL, EVALSHA, FCALL; a bad
// numkeys gives none and is left for the command to refuse).
func keyRange(cmd *Command, args [][]byte) (first, last, step int) {
	first, last = cmd.First, cmd.Last
	step = max(cmd.Step, 1)
	if first == 0 {
		if !slices.Contains(cmd.Flags, "movablekeys") || len(args) < 3 {
			return 1, 0, 1
		}
		n, ok := resp.ParseInt(args[2])
		if !ok || n <= 0 || n > int64(len(args)-3) {
			return 1, 0, 1
		}
		return 3, 2 + int(n), 1
	}
	if last < 0 {
		last += len(args)
	}
	return first, min(last, len(args)-1), step
}

// prefixKeys prepends p to the key arguments first..last by step.
func prefixKeys(args [][]byte, p string, first, last, step int) {
	for i := first; i <= last; i += step {
		args[i] = append([]byte(p), args[i]...)
	}
}
