package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Validity is how long generated certificates are valid, from their
// creation (NotBefore is set a minute earlier to tolerate clock steps).
const Validity = 24 * time.Hour

// Names of the files [Generate] writes in its directory.
const (
	CAFile         = "ca.pem"
	ServerCertFile = "server.pem"
	ServerKeyFile  = "server-key.pem"
	ClientCertFile = "client.pem"
	ClientKeyFile  = "client-key.pem"
)

// ServerName is the DNS name in the server certificate (besides the IP
// address 127.0.0.1).
const ServerName = "localhost"

// Files holds the paths of the PEM files written by [Generate].
type Files struct {
	CA         string // CA certificate
	ServerCert string // server certificate (SANs: IP 127.0.0.1, DNS localhost)
	ServerKey  string // server private key (PKCS #8)
	ClientCert string // client certificate (extended key usage: client auth)
	ClientKey  string // client private key (PKCS #8)
}

// Generate creates a new CA and a server and a client certificate signed
// by it, and writes them as PEM files into dir (which must exist), with
// the names [CAFile], [ServerCertFile], ... Keys are written with mode
// 0600. Each call makes an unrelated CA.
func Generate(dir string) (Files, error) {
	f := Files{
		CA:         filepath.Join(dir, CAFile),
		ServerCert: filepath.Join(dir, ServerCertFile),
		ServerKey:  filepath.Join(dir, ServerKeyFile),
		ClientCert: filepath.Join(dir, ClientCertFile),
		ClientKey:  filepath.Join(dir, ClientKeyFile),
	}
	now := time.Now()
	caKey, err := newKey()
	if err != nil {
		return Files{}, err
	}
	caTmpl, err := template(now, "redlock test CA")
	if err != nil {
		return Files{}, err
	}
	caTmpl.IsCA = true
	caTmpl.BasicConstraintsValid = true
	caTmpl.MaxPathLenZero = true
	caTmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return Files{}, fmt.Errorf("testcerts: create CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return Files{}, fmt.Errorf("testcerts: %w", err)
	}
	if err := writePEM(f.CA, "CERTIFICATE", caDER, 0o644); err != nil {
		return Files{}, err
	}

	leaf := func(cn string, usage x509.ExtKeyUsage, certPath, keyPath string, edit func(*x509.Certificate)) error {
		key, err := newKey()
		if err != nil {
			return err
		}
		tmpl, err := template(now, cn)
		if err != nil {
			return err
		}
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
		tmpl.BasicConstraintsValid = true
		if edit != nil {
			edit(tmpl)
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return fmt.Errorf("testcerts: create %s certificate: %w", cn, err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return fmt.Errorf("testcerts: %w", err)
		}
		if err := writePEM(certPath, "CERTIFICATE", der, 0o644); err != nil {
			return err
		}
		return writePEM(keyPath, "PRIVATE KEY", keyDER, 0o600)
	}
	err = leaf("redlock test server", x509.ExtKeyUsageServerAuth, f.ServerCert, f.ServerKey, func(c *x509.Certificate) {
		c.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		c.DNSNames = []string{ServerName}
	})
	if err != nil {
		return Files{}, err
	}
	if err := leaf("redlock test client", x509.ExtKeyUsageClientAuth, f.ClientCert, f.ClientKey, nil); err != nil {
		return Files{}, err
	}
	return f, nil
}

// ClientTLS returns a client configuration that trusts only the CA and
// presents the client certificate. ServerName is left empty: set it, or
// let the dialer derive it from the address (conn does).
func (f Files) ClientTLS() (*tls.Config, error) {
	pool, err := f.CAPool()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
	if err != nil {
		return nil, fmt.Errorf("testcerts: client key pair: %w", err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// ServerTLS returns a server configuration presenting the server
// certificate. With requireClientCert, clients must present a certificate
// signed by the CA; otherwise client certificates are not asked for.
func (f Files) ServerTLS(requireClientCert bool) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		return nil, fmt.Errorf("testcerts: server key pair: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if requireClientCert {
		pool, err := f.CAPool()
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// CAPool returns a pool holding only the CA certificate.
func (f Files) CAPool() (*x509.CertPool, error) {
	b, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("testcerts: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, errors.New("testcerts: no certificate in " + f.CA)
	}
	return pool, nil
}

func newKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("testcerts: generate key: %w", err)
	}
	return k, nil
}

// template returns a certificate template with a random serial number,
// the common name cn and a validity of [Validity] from now.
func template(now time.Time, cn string) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("testcerts: serial number: %w", err)
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"redlock tests"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(Validity),
	}, nil
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	b := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(path, b, mode); err != nil {
		return fmt.Errorf("testcerts: %w", err)
	}
	return nil
}
