package pprofsrv

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/redlock-dev/redlock/internal/test/check"
)

// TestServe: the index and a goroutine profile are served; after Close the
// address refuses connections and the server's goroutines are gone.
func TestServe(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.Addr().String() + "/debug/pprof/"
	for _, u := range []string{base, base + "goroutine?debug=1"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "goroutine") {
			t.Fatalf("GET %s: %d %.200q", u, resp.StatusCode, body)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(base); err == nil {
		t.Fatal("still serving after Close")
	}
	check.NoLeak(t, before, 0)
}
