package mastertest

import (
	"errors"
	"io"
	"os"
	"testing"

	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/testcerts"
)

// StartWith starts masters with o for t and closes them when t finishes.
// It silences the embedded notice unless o.Notice is set and, like
// [Start], fails instead of falling back to embedded masters when
// REDLOCK_REQUIRE_REDIS is "1". Masters that only redis-server can give
// (o.Password, o.TLS) skip t when redis-server is missing, or fail it
// under REDLOCK_REQUIRE_REDIS=1.
func StartWith(t testing.TB, o localmaster.Options) *localmaster.Set {
	t.Helper()
	required := os.Getenv("REDLOCK_REQUIRE_REDIS") == "1"
	o.RequireReal = o.RequireReal || required
	if o.Notice == nil {
		o.Notice = io.Discard
	}
	s, err := localmaster.Start(t.Context(), o)
	if errors.Is(err, localmaster.ErrNoRedisServer) && !required {
		t.Skipf("mastertest: %v", err)
	}
	if err != nil {
		t.Fatalf("mastertest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("mastertest: %v", err)
		}
	})
	return s
}

// TLSFiles returns the [localmaster.TLSFiles] of certificates written by
// [testcerts.Generate]: the server certificate for the masters, the
// client certificate for the readiness probe.
func TLSFiles(f testcerts.Files) *localmaster.TLSFiles {
	return &localmaster.TLSFiles{
		CertFile:       f.ServerCert,
		KeyFile:        f.ServerKey,
		CAFile:         f.CA,
		ClientCertFile: f.ClientCert,
		ClientKeyFile:  f.ClientKey,
	}
}
