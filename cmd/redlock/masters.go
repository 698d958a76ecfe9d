//go:build unix

package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/redlock-dev/redlock/conn"
)

// Environment variables read by every command that connects to masters, so
// that addresses and secrets need not appear in the process list or in
// shell history. A flag given on the command line wins over its variable.
const (
	envMasters        = "REDLOCK_MASTERS"         // --masters
	envMasterUser     = "REDLOCK_USER"            // --master-user
	envPassword       = "REDLOCK_PASSWORD"        // --master-password
	envMasterPassword = "REDLOCK_MASTER_PASSWORD" // older name of REDLOCK_PASSWORD, still read
)

// masterFlags are the flags that say how to reach the masters: where, as
// whom, and over what (TLS). proxy, lock and inspect share them.
type masterFlags struct {
	addrs                  string
	user                   string
	password, passwordFile string
	tls                    bool
	tlsCA, tlsCert, tlsKey string
	tlsServerName          string
	noNative               bool
	// flagsOnly: credentials come from the flags only, never from the
	// environment (the bench: a deployment's password exported for
	// `redlock lock` must not be sent to whatever --masters names).
	flagsOnly bool
}

// register defines the flags on fs; what says what --masters are ("the
// Redis masters (required)").
func (m *masterFlags) register(fs *flag.FlagSet, what string) {
	fs.StringVar(&m.addrs, "masters", "", what+": comma-separated `host:port,...` (or $"+envMasters+")")
	m.registerAccess(fs)
}

// registerAccess defines the flags of how to reach the masters (AUTH and
// TLS) without --masters: the bench has a --masters of its own, which
// does not fall back to $REDLOCK_MASTERS (nor its credentials to the
// environment: flagsOnly).
func (m *masterFlags) registerAccess(fs *flag.FlagSet) {
	userEnv, pwEnv := " (or $"+envMasterUser+")", " (or $"+envPassword+", or --master-password-file)"
	if m.flagsOnly {
		userEnv, pwEnv = "", " (or --master-password-file; the environment is not read)"
	}
	fs.StringVar(&m.user, "master-user", "", "ACL `user` name sent to the masters with AUTH"+userEnv)
	fs.StringVar(&m.password, "master-password", "", "`password` sent to the masters with AUTH"+pwEnv)
	fs.StringVar(&m.passwordFile, "master-password-file", "", "read the masters' password from this `file` (trailing newline dropped)")
	fs.BoolVar(&m.tls, "master-tls", false, "connect to the masters over TLS (implied by the --master-tls-* flags)")
	fs.StringVar(&m.tlsCA, "master-tls-ca", "", "PEM `file` of the CA certificates that sign the masters' certificates (default: the system roots)")
	fs.StringVar(&m.tlsCert, "master-tls-cert", "", "PEM `file` of the client certificate presented to the masters (with --master-tls-key)")
	fs.StringVar(&m.tlsKey, "master-tls-key", "", "PEM `file` of the client certificate's private key")
	fs.StringVar(&m.tlsServerName, "master-tls-server-name", "", "`name` the masters' certificates must carry (default: each master's host)")
	fs.BoolVar(&m.noNative, "master-no-native", false, "release and extend with scripts even on masters that have DELEX/DELIFEQ and SET IFEQ")
}

// list returns the master addresses from --masters or $REDLOCK_MASTERS,
// nil when neither is set.
func (m *masterFlags) list() []string {
	if m.addrs == "" {
		return splitList(os.Getenv(envMasters))
	}
	return splitList(m.addrs)
}

// apply fills cfg's AUTH and TLS settings from the flags, the files they
// name and the environment. Its errors are usageErrors; they name flags
// and files, never a secret.
func (m *masterFlags) apply(cfg *conn.Config) error {
	cfg.DisableNative = m.noNative
	getenv := os.Getenv
	if m.flagsOnly {
		getenv = func(string) string { return "" }
	}
	cfg.Username = firstNonEmpty(m.user, getenv(envMasterUser))
	switch {
	case m.password != "" && m.passwordFile != "":
		return usageError{errors.New("--master-password and --master-password-file are exclusive")}
	case m.passwordFile != "":
		pw, err := readSecret(m.passwordFile)
		if err != nil {
			return usageError{fmt.Errorf("--master-password-file: %w", err)}
		}
		cfg.Password = pw
	default:
		cfg.Password = firstNonEmpty(m.password, getenv(envPassword), getenv(envMasterPassword))
	}
	if cfg.Username != "" && cfg.Password == "" {
		return usageError{errors.New("--master-user needs a password (--master-password, --master-password-file or $" + envPassword + ")")}
	}
	if !m.tls && m.tlsCA == "" && m.tlsCert == "" && m.tlsKey == "" && m.tlsServerName == "" {
		return nil
	}
	tc, err := clientTLS("master-tls-ca", m.tlsCA, m.tlsCert, m.tlsKey)
	if err != nil {
		return err
	}
	tc.ServerName = m.tlsServerName
	cfg.TLS = tc
	return nil
}

// clientTLS builds the TLS client config for the masters: roots from caFile
// (system roots when empty), and a client certificate when given.
func clientTLS(caFlag, caFile, certFile, keyFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := loadCAs(caFlag, caFile)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, usageError{errors.New("the client certificate and its key go together (--master-tls-cert/--master-tls-key, --proxy-tls-cert/--proxy-tls-key)")}
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, usageError{fmt.Errorf("client certificate: %w", err)}
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// readSecret reads a password file: the first line, without its newline.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s, _, _ := strings.Cut(string(b), "\n")
	s = strings.TrimSuffix(s, "\r")
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// loadCAs reads the PEM CA certificates of flag name from file.
func loadCAs(name, file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, usageError{fmt.Errorf("--%s: %w", name, err)}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, usageError{fmt.Errorf("--%s: %s holds no PEM certificate", name, file)}
	}
	return pool, nil
}

// redactArgs returns args with the values of the named flags (-f, --f, as
// "--f v" or "--f=v") replaced by "REDACTED": a command line recorded in a
// report must not carry a secret.
func redactArgs(args []string, secret ...string) []string {
	out := append([]string(nil), args...)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || !slices.Contains(secret, name) {
			continue
		}
		if hasValue {
			out[i] = a[:strings.IndexByte(a, '=')+1] + "REDACTED"
		} else if i+1 < len(out) {
			out[i+1] = "REDACTED"
			i++
		}
	}
	return out
}
