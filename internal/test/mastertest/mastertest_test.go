package mastertest

import (
	"net"
	"testing"
	"time"
)

func TestStart(t *testing.T) {
	s := Start(t, 2)
	if len(s.Addrs()) != 2 {
		t.Fatalf("addrs = %v", s.Addrs())
	}
	for _, addr := range s.Addrs() {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	t.Run("RequireReal", func(t *testing.T) {
		RequireReal(t, s)
		if err := s.Masters()[0].Pause(); err != nil {
			t.Fatal(err)
		}
		if err := s.Masters()[0].Resume(); err != nil {
			t.Fatal(err)
		}
	})
}
