package conn

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-dev/redlock/resp"
)

// connect dials the master and runs the handshake (AUTH, SELECT, SCRIPT
// LOAD, INFO server) as one pipelined batch. A refused authentication
// fails it with an error matching [ErrAuth].
func (c *Conn) connect(ctx context.Context) (net.Conn, *resp.Reader, ServerInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	nc, err := c.dial(ctx)
	if err != nil {
		return nil, nil, ServerInfo{}, err
	}
	rd, info, err := c.handshake(ctx, nc)
	if err != nil {
		nc.Close()
		return nil, nil, ServerInfo{}, err
	}
	return nc, rd, info, nil
}

// attemptErr is the error a failed connect attempt is kept as (the Conn's
// down error, the first attempt's error): err itself, or, when the
// attempt's own deadline ended it, an error matching [ErrConnectTimeout]
// that does not match the deadline (see ErrConnectTimeout). runCtx is the
// Conn's lifetime: an attempt cut short by Close is not a timeout.
func (c *Conn) attemptErr(runCtx context.Context, err error) error {
	var ne net.Error
	timeout := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout()
	if !timeout || runCtx.Err() != nil {
		return err
	}
	return &connectTimeoutError{msg: fmt.Sprintf("connect timed out after %v (%v)", c.cfg.DialTimeout, err)}
}

func (c *Conn) dial(ctx context.Context) (net.Conn, error) {
	var nc net.Conn
	var err error
	if c.cfg.Dialer != nil {
		nc, err = c.cfg.Dialer(ctx, "tcp", c.addr)
	} else {
		d := net.Dialer{KeepAlive: c.cfg.KeepAlive}
		nc, err = d.DialContext(ctx, "tcp", c.addr)
	}
	if err != nil {
		return nil, err
	}
	if c.cfg.TLS == nil {
		return nc, nil
	}
	cfg := c.cfg.TLS
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		if host, _, err := net.SplitHostPort(c.addr); err == nil {
			cfg.ServerName = host
		}
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("tls handshake: %w", err)
	}
	return tc, nil
}

func (c *Conn) handshake(ctx context.Context, nc net.Conn) (*resp.Reader, ServerInfo, error) {
	deadline, _ := ctx.Deadline()
	if err := nc.SetDeadline(deadline); err != nil {
		return nil, ServerInfo{}, err
	}
	// Close the socket if ctx ends (Close) during the handshake.
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	var cmd []byte
	var names []string
	if c.cfg.Password != "" {
		if c.cfg.Username != "" {
			cmd = resp.AppendCommandStrings(cmd, "AUTH", c.cfg.Username, c.cfg.Password)
		} else {
			cmd = resp.AppendCommandStrings(cmd, "AUTH", c.cfg.Password)
		}
		names = append(names, "AUTH")
	}
	if c.cfg.DB != 0 {
		cmd = resp.AppendCommandStrings(cmd, "SELECT", strconv.Itoa(c.cfg.DB))
		names = append(names, "SELECT")
	}
	for _, s := range c.cfg.Scripts {
		cmd = resp.AppendCommandStrings(cmd, "SCRIPT", "LOAD", s.Source())
		names = append(names, "SCRIPT LOAD")
	}
	if !c.cfg.DisableNative {
		cmd = append(cmd, nativeProbe...)
		names = append(names, "COMMAND INFO", "COMMAND DOCS")
	}
	if c.clock != nil {
		// The clock check's first reading of this session: a jump while
		// the connection was down shows before the session serves.
		cmd = append(cmd, timeCmd...)
		names = append(names, "TIME")
	}
	if c.repl != nil {
		// The replication check's first reading of this session: a
		// promotion while the connection was down shows before the
		// session serves.
		cmd = append(cmd, replInfoCmd...)
		names = append(names, "INFO replication")
	}
	cmd = resp.AppendCommandStrings(cmd, "INFO", "server")
	names = append(names, "INFO")
	var clockSent, clockRecv, clockServer int64
	if c.clock != nil {
		clockSent = int64(time.Since(c.clock.epoch))
	}
	if _, err := nc.Write(cmd); err != nil {
		return nil, ServerInfo{}, err
	}
	rd := resp.NewReaderSize(nc, c.cfg.ReadBufferSize)
	info := ServerInfo{ConnectedAt: time.Now()}
	var firstErr error
	var cmdInfo, setDocs resp.Reply // the native probes' replies (none: zero)
	var replText []byte             // INFO replication's (nil: none)
	for i, name := range names {
		rep, err := rd.ReadReply()
		if errors.Is(err, resp.ErrTooLarge) && strings.HasPrefix(name, "COMMAND") {
			continue // dropped whole: no native commands
		}
		if err != nil {
			return nil, ServerInfo{}, fmt.Errorf("handshake %s: %w", name, err)
		}
		if rep.IsError() {
			// A refused AUTH, or NOAUTH when no password was sent, is an
			// authentication failure: the Conn would otherwise come up
			// and fail every command.
			auth := name == "AUTH" || rep.HasErrorPrefix("NOAUTH")
			if name == "TIME" && !auth {
				c.cfg.OnClockJump(ClockJump{Addr: c.addr, Refused: rep.Err()})
			}
			if name == "INFO replication" && !auth {
				c.cfg.OnReplicationID(ReplicationChange{Addr: c.addr, Refused: rep.Err()})
			}
			if (name == "INFO" || name == "INFO replication" || name == "TIME" || name == "COMMAND INFO" || name == "COMMAND DOCS") && !auth {
				continue // identity and native commands are best effort (embedded masters lack them)
			}
			if firstErr == nil {
				if auth {
					firstErr = fmt.Errorf("handshake %s: %w: %w", name, ErrAuth, rep.Err())
				} else {
					firstErr = fmt.Errorf("handshake %s: %w", name, rep.Err())
				}
			}
			continue
		}
		switch name {
		case "TIME":
			if us, ok := parseTime(rep); ok {
				clockServer, clockRecv = us, int64(time.Since(c.clock.epoch))
			}
		case "INFO replication":
			replText = bytes.Clone(rep.Str) // the next read reuses the buffer
		case "COMMAND INFO":
			cmdInfo = rep.Clone() // the next read reuses the buffer
		case "COMMAND DOCS":
			setDocs = rep.Clone()
		}
		if i == len(names)-1 {
			info = parseInfo(rep.Str, info)
			info.ConnectedAt = time.Now() // after the uptime was written: StartedBy is never early
		}
	}
	if firstErr != nil {
		return nil, ServerInfo{}, firstErr
	}
	parseNativeInfo(cmdInfo, setDocs, &info) // either may be missing: each command is read alone
	if clockRecv != 0 {
		c.clock.observe(clockServer, clockSent, clockRecv, info.RunID)
	}
	if replText != nil {
		c.repl.observe(info.RunID, replText)
	}
	// If ctx ended meanwhile, the AfterFunc may be forcing the deadline into
	// the past concurrently; clearing it below would then race with that
	// and could hand the session a socket whose first read times out.
	if !stop() {
		return nil, ServerInfo{}, fmt.Errorf("handshake: %w", ctx.Err())
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		return nil, ServerInfo{}, err
	}
	return rd, info, nil
}

// parseInfo reads run_id, redis_version and uptime_in_seconds from INFO text.
func parseInfo(text []byte, info ServerInfo) ServerInfo {
	for _, line := range bytes.Split(text, []byte("\n")) {
		line = bytes.TrimRight(line, "\r")
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		switch string(k) {
		case "run_id":
			info.RunID = string(v)
		case "redis_version":
			info.Version = string(v)
		case "uptime_in_seconds":
			if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
				info.Uptime = time.Duration(n) * time.Second
			}
		}
	}
	return info
}
