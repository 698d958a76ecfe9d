package localmaster

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	startAttempts = 3               // tries per master when redis-server exits during start-up
	readyTimeout  = 5 * time.Second // per attempt
	stopTimeout   = 5 * time.Second // SIGTERM grace period before SIGKILL
)

// errExited reports that redis-server exited before it became ready, most
// likely because another process took its port.
var errExited = errors.New("redis-server exited during start-up")

// spec is what every redis-server of a Set is started with, besides its
// port and directory.
type spec struct {
	bin      string
	extra    []string
	password string      // --requirepass; the probe AUTHs first
	tls      *TLSFiles   // absolute paths; nil: plain TCP
	probeTLS *tls.Config // the probe's client side of tls
	net      Network     // nil: this host's loopback
}

func newSpec(bin string, o Options) (*spec, error) {
	sp := &spec{bin: bin, extra: o.ExtraArgs, password: o.Password, net: o.Net}
	if o.TLS == nil {
		return sp, nil
	}
	f := *o.TLS
	for _, p := range []*string{&f.CertFile, &f.KeyFile, &f.CAFile, &f.ClientCertFile, &f.ClientKeyFile} {
		if *p == "" {
			return nil, errors.New("localmaster: Options.TLS: CertFile, KeyFile, CAFile, ClientCertFile and ClientKeyFile are all required")
		}
		// redis-server reads them after changing into its --dir.
		abs, err := filepath.Abs(*p)
		if err != nil {
			return nil, fmt.Errorf("localmaster: %w", err)
		}
		*p = abs
	}
	ca, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, fmt.Errorf("localmaster: Options.TLS: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("localmaster: Options.TLS: no certificate in %s", f.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(f.ClientCertFile, f.ClientKeyFile)
	if err != nil {
		return nil, fmt.Errorf("localmaster: Options.TLS: client certificate: %w", err)
	}
	sp.tls = &f
	sp.probeTLS = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, ServerName: "127.0.0.1"}
	return sp, nil
}

// secured reports whether a client needs more than a TCP connection.
func (sp *spec) secured() bool { return sp.tls != nil || sp.password != "" }

// host returns the address master i listens on.
func (sp *spec) host(i int) string {
	if sp.net != nil {
		return sp.net.Host(i)
	}
	return "127.0.0.1"
}

// command returns the command that runs master i's redis-server with args.
func (sp *spec) command(i int, args []string) *exec.Cmd {
	if sp.net != nil {
		if pre := sp.net.Command(i); len(pre) > 0 {
			return exec.Command(pre[0], append(append(pre[1:len(pre):len(pre)], sp.bin), args...)...)
		}
	}
	return exec.Command(sp.bin, args...)
}

// args returns redis-server's arguments for master i on port.
func (sp *spec) args(i, port int, dir, logPath string) []string {
	listen := []string{"--port", strconv.Itoa(port)}
	if sp.tls != nil {
		listen = []string{
			"--port", "0", "--tls-port", strconv.Itoa(port),
			"--tls-cert-file", sp.tls.CertFile, "--tls-key-file", sp.tls.KeyFile,
			"--tls-ca-cert-file", sp.tls.CAFile, "--tls-auth-clients", "yes",
		}
	}
	args := append(listen,
		"--bind", sp.host(i), "--save", "", "--appendonly", "no",
		"--protected-mode", "no", "--daemonize", "no", "--dir", dir, "--logfile", logPath,
	)
	if sp.password != "" {
		args = append(args, "--requirepass", sp.password)
	}
	return append(args, sp.extra...)
}

func startReal(ctx context.Context, n int, sp *spec) (*Set, error) {
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "localmaster-")
	if err != nil {
		return nil, fmt.Errorf("localmaster: %w", err)
	}
	s := &Set{dir: dir, masters: make([]*Master, n)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		m := &Master{index: i, spec: sp, dir: filepath.Join(dir, strconv.Itoa(i))}
		s.masters[i] = m
		wg.Go(func() {
			if err := os.Mkdir(m.dir, 0o700); err != nil {
				errs[i] = fmt.Errorf("localmaster: %w", err)
				return
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			errs[i] = m.spawnRetryLocked(ctx, ports[i], true)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// spawnRetryLocked starts redis-server on port, retrying if it exits during
// start-up: on a fresh port if newPort, else on the same port after a pause.
func (m *Master) spawnRetryLocked(ctx context.Context, port int, newPort bool) error {
	err := m.spawnLocked(ctx, port)
	for range startAttempts - 1 {
		if !errors.Is(err, errExited) {
			break
		}
		if !newPort {
			time.Sleep(100 * time.Millisecond)
		} else if ports, perr := freePorts(1); perr == nil {
			port = ports[0]
		}
		err = m.spawnLocked(ctx, port)
	}
	return err
}

// spawnLocked starts one redis-server on port and waits until it is ready.
func (m *Master) spawnLocked(ctx context.Context, port int) error {
	logPath := filepath.Join(m.dir, "redis.log")
	args := m.spec.args(m.index, port, m.dir, logPath)
	// Configuration errors go to stderr before the log file is opened, so
	// send stdout and stderr to the log as well.
	out, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("localmaster: %w", err)
	}
	defer out.Close()
	cmd := m.spec.command(m.index, args)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("localmaster: master %d: %w", m.index, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	m.cmd, m.exited, m.paused = cmd, exited, false
	addr := net.JoinHostPort(m.spec.host(m.index), strconv.Itoa(port))
	if err := waitReady(ctx, m.spec, addr, cmd.Process.Pid, exited); err != nil {
		_ = m.haltLocked(false)
		return fmt.Errorf("localmaster: master %d on %s: %w%s", m.index, addr, err, logTail(logPath))
	}
	m.port, m.addr = port, addr
	return nil
}

// aliveLocked reports whether the current process has not been reaped yet.
func (m *Master) aliveLocked() bool {
	if m.exited == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// haltLocked stops a running master (SIGTERM if graceful, else SIGKILL) and
// waits until the reaper goroutine has seen it exit.
func (m *Master) haltLocked(graceful bool) error {
	if m.embedded {
		if m.mini != nil {
			m.mini.Close()
			m.mini = nil
		}
		return nil
	}
	paused := m.paused
	m.paused = false
	if !m.aliveLocked() {
		return nil
	}
	p := m.cmd
	if graceful {
		if paused {
			_ = p.Process.Signal(sigCont) // a stopped process would not act on SIGTERM
		}
		if p.Process.Signal(sigTerm) == nil {
			select {
			case <-m.exited:
				return nil
			case <-time.After(stopTimeout):
			}
		}
	}
	if err := p.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("localmaster: kill master %d: %w", m.index, err)
	}
	<-m.exited
	return nil
}

// signalPause sends SIGSTOP (pause) or SIGCONT (resume) to a real master.
func (m *Master) signalPause(pause bool) error {
	if m.embedded {
		return ErrUnsupported
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.aliveLocked() {
		return fmt.Errorf("localmaster: master %d is not running", m.index)
	}
	sig := sigCont
	if pause {
		sig = sigStop
	}
	if sig == nil {
		return fmt.Errorf("localmaster: pause/resume is not supported on this platform")
	}
	if err := m.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("localmaster: signal master %d: %w", m.index, err)
	}
	m.paused = pause
	return nil
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("localmaster: find free port: %w", err)
		}
		defer l.Close() // hold every listener until all ports are picked
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// waitReady polls addr until the redis-server with the given pid answers.
func waitReady(ctx context.Context, sp *spec, addr string, pid int, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := probe(ctx, sp, addr, pid)
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errExited
		case <-ctx.Done():
			if sp.secured() {
				// A TLS or AUTH mismatch never shows in the server's log.
				return fmt.Errorf("redis-server not ready: %w (last probe: %v)", ctx.Err(), err)
			}
			return fmt.Errorf("redis-server not ready: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// probe sends PING and INFO server to addr (after a TLS handshake and AUTH
// for secured masters) and reports whether it got +PONG from the process
// pid, and not from some other server that won the port.
func probe(ctx context.Context, sp *spec, addr string, pid int) error {
	dctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
	defer cancel()
	var c net.Conn
	var err error
	if sp.net != nil {
		c, err = sp.net.DialContext(dctx, "tcp", addr)
	} else {
		var d net.Dialer
		c, err = d.DialContext(dctx, "tcp", addr)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	var rw io.ReadWriter = c
	if sp.probeTLS != nil {
		tc := tls.Client(c, sp.probeTLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("tls handshake: %w", err)
		}
		rw = tc
	}
	req := "PING\r\nINFO server\r\n"
	if sp.password != "" {
		req = fmt.Sprintf("*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(sp.password), sp.password) + req
	}
	if _, err := io.WriteString(rw, req); err != nil {
		return err
	}
	r := bufio.NewReader(rw)
	if sp.password != "" {
		if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
			return fmt.Errorf("AUTH: %q, %v", strings.TrimSpace(line), err)
		}
	}
	if line, err := r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
		return fmt.Errorf("PING: %q, %v", strings.TrimSpace(line), err)
	}
	for { // scan the INFO bulk string for its process_id line
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("INFO server: %w", err)
		}
		if strings.HasPrefix(line, "process_id:") {
			if line != "process_id:"+strconv.Itoa(pid)+"\r\n" {
				return fmt.Errorf("another server answers (%s)", strings.TrimSpace(line))
			}
			return nil
		}
	}
}

// logTail returns the last lines of the log at path, formatted for an error
// message, or "" if there is nothing to show.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	lines = lines[max(0, len(lines)-15):]
	return "; redis-server log tail:\n" + strings.Join(lines, "\n")
}
