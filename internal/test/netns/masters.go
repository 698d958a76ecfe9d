package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// Masters are real redis-server masters, each in an endpoint of its own
// behind its own link, for partition tests.
type Masters struct {
	*localmaster.Set
	Net   *Net
	Links []*Endpoint // Links[i] carries master i's traffic
}

// StartMasters starts o.N (default localmaster.DefaultN) redis-server
// masters for t, master i inside endpoint i of a new [Net], and stops them
// when t ends. Reach them through [Masters.DialContext] (the engine's
// conn.Config.Dialer). It skips t as [Require] does, and as
// mastertest.StartWith does without redis-server.
func StartMasters(t testing.TB, o localmaster.Options) *Masters {
	t.Helper()
	n := New(t) // its cleanup runs after the masters' (t.Cleanup is LIFO)
	if o.N == 0 {
		o.N = localmaster.DefaultN
	}
	m := &Masters{Net: n}
	for range o.N {
		m.Links = append(m.Links, n.Add())
	}
	o.Net = placement{m}
	m.Set = mastertest.StartWith(t, o)
	return m
}

// DialContext dials a master's address from the client namespace: the
// Dialer for conn.Config and go-redis.
func (m *Masters) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return m.Net.DialContext(ctx, network, addr)
}

// Cut drops every packet to and from the masters listed (LinkDown).
func (m *Masters) Cut(masters ...int) error {
	var errs []error
	for _, i := range masters {
		if i < 0 || i >= len(m.Links) {
			errs = append(errs, fmt.Errorf("netns: no master %d", i))
			continue
		}
		errs = append(errs, m.Links[i].LinkDown())
	}
	return errors.Join(errs...)
}

// Heal restores every master's link.
func (m *Masters) Heal() error { return m.Net.Heal() }

// placement puts master i in endpoint i (localmaster.Network).
type placement struct{ m *Masters }

func (p placement) Host(i int) string { return p.m.Links[i].Addr().String() }

func (p placement) Command(i int) []string {
	return []string{"ip", "netns", "exec", p.m.Links[i].Name()}
}

func (p placement) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return p.m.Net.DialContext(ctx, network, addr)
}

var _ localmaster.Network = placement{}
