package testcerts_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/testcerts"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		t.Fatalf("%s: no CERTIFICATE block", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGenerate(t *testing.T) {
	f, other := generateTwo(t)
	pool, err := f.CAPool()
	if err != nil {
		t.Fatal(err)
	}
	otherPool, err := other.CAPool()
	if err != nil {
		t.Fatal(err)
	}
	ca, srv, cli := readCert(t, f.CA), readCert(t, f.ServerCert), readCert(t, f.ClientCert)
	if !ca.IsCA || srv.IsCA || cli.IsCA {
		t.Errorf("IsCA: ca %v server %v client %v", ca.IsCA, srv.IsCA, cli.IsCA)
	}
	for _, c := range []*x509.Certificate{ca, srv, cli} {
		if d := c.NotAfter.Sub(c.NotBefore); d > testcerts.Validity+time.Hour || time.Until(c.NotAfter) <= 0 {
			t.Errorf("%s: valid %v .. %v", c.Subject.CommonName, c.NotBefore, c.NotAfter)
		}
	}
	for _, tc := range []struct {
		name  string
		cert  *x509.Certificate
		host  string
		usage x509.ExtKeyUsage
		roots *x509.CertPool
		ok    bool
	}{
		{"server by IP", srv, "127.0.0.1", x509.ExtKeyUsageServerAuth, pool, true},
		{"server by name", srv, "localhost", x509.ExtKeyUsageServerAuth, pool, true},
		{"server wrong name", srv, "example.com", x509.ExtKeyUsageServerAuth, pool, false},
		{"server wrong CA", srv, "127.0.0.1", x509.ExtKeyUsageServerAuth, otherPool, false},
		{"client", cli, "", x509.ExtKeyUsageClientAuth, pool, true},
		{"client as server", cli, "", x509.ExtKeyUsageServerAuth, pool, false},
		{"client wrong CA", cli, "", x509.ExtKeyUsageClientAuth, otherPool, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cert.Verify(x509.VerifyOptions{DNSName: tc.host, Roots: tc.roots, KeyUsages: []x509.ExtKeyUsage{tc.usage}})
			if (err == nil) != tc.ok {
				t.Errorf("Verify: %v, want ok=%v", err, tc.ok)
			}
		})
	}
	for _, p := range []string{f.ServerKey, f.ClientKey} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v", p, st.Mode().Perm())
		}
	}
}

// TestHandshake runs Go TLS handshakes over loopback with the generated
// configurations.
func TestHandshake(t *testing.T) {
	f, other := generateTwo(t)
	good, err := f.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	wrongCA, err := other.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	noCert := good.Clone()
	noCert.Certificates = nil
	for _, tc := range []struct {
		name       string
		requireCli bool
		client     *tls.Config
		serverName string
		ok         bool
	}{
		{"mutual", true, good, "127.0.0.1", true},
		{"mutual by name", true, good, "localhost", true},
		{"no client cert required", false, noCert, "127.0.0.1", true},
		{"no client cert", true, noCert, "127.0.0.1", false},
		{"wrong CA", true, wrongCA, "127.0.0.1", false},
		{"wrong name", true, good, "example.com", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scfg, err := f.ServerTLS(tc.requireCli)
			if err != nil {
				t.Fatal(err)
			}
			l, err := tls.Listen("tcp", "127.0.0.1:0", scfg)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			srvErr := make(chan error, 1)
			go func() {
				c, err := l.Accept()
				if err != nil {
					srvErr <- err
					return
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				if err := c.(*tls.Conn).Handshake(); err != nil {
					srvErr <- err
					return
				}
				_, err = c.Write([]byte("ok"))
				srvErr <- err
			}()
			ccfg := tc.client.Clone()
			ccfg.ServerName = tc.serverName
			d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: ccfg}
			c, err := d.Dial("tcp", l.Addr().String())
			if err == nil {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				buf := make([]byte, 2)
				_, err = c.Read(buf) // TLS 1.3: a refused client cert shows here
			}
			serr := <-srvErr
			if tc.ok && (err != nil || serr != nil) {
				t.Fatalf("client %v, server %v; want success", err, serr)
			}
			if !tc.ok && err == nil && serr == nil {
				t.Fatal("handshake succeeded, want failure")
			}
			if !tc.ok && err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("client timed out instead of failing: %v", err)
			}
		})
	}
}

func TestGenerateMissingDir(t *testing.T) {
	if _, err := testcerts.Generate(t.TempDir() + "/missing"); err == nil {
		t.Fatal("Generate into a missing directory succeeded")
	}
}

// generateTwo generates two unrelated sets of certificates.
func generateTwo(t *testing.T) (testcerts.Files, testcerts.Files) {
	t.Helper()
	var out [2]testcerts.Files
	for i := range out {
		f, err := testcerts.Generate(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		out[i] = f
	}
	return out[0], out[1]
}
