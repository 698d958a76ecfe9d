// Package netns gives a test a private network whose links it can cut: the
// network partitions of fault tests (packets dropped, not refused).
//
// # Layout
//
// A [Net] is a client namespace plus endpoints. Each [Endpoint] is a Linux
// network namespace of its own, joined to the client namespace by a veth
// pair; real redis-server masters run inside endpoints ([StartMasters]).
// The test process stays in the host's namespace and reaches endpoints
// only through [Net.DialContext] (for conn.Config.Dialer, or go-redis's
// Options.Dialer), which creates the socket inside the client namespace;
// [Endpoint.Listen] opens a listener inside an endpoint.
//
// # Addresses: loopback, and nothing leaves the host
//
// Endpoint k's link is 127.200.0.0/30 + 4k: the client end is .1, the
// endpoint end .2 (so master addresses read 127.200.0.2:port,
// 127.200.0.6:port, …). Loopback addresses route over the veths because,
// in the package's own namespaces only, route_localnet is set and lo stays
// down (so there is no local 127.0.0.0/8 route to take them). The host's
// namespace gets no device, address or route; the package's namespaces
// have no route but their links' own and nothing bridged to a real
// interface. So no packet can leave the host: a dial to an endpoint's
// address from the host's namespace (without Net.DialContext) reaches the
// host's own loopback and is refused, it never goes out a default route.
//
// # Partitions: black holes, not refusals
//
// [Endpoint.LinkDown] sets the endpoint's end of its veth down. The client
// end keeps its address, its route (flagged linkdown, still used) and a
// permanent neighbour entry for the endpoint, so packets to the endpoint
// are handed to a veth whose peer is down and dropped: a connect hangs
// until its timeout, an established connection's writes go unanswered —
// silence, neither a reset nor "network unreachable" (TestLinkDownBlackHoles
// checks this). [Endpoint.LinkUp] and [Net.Heal] bring links back up; an
// established connection survives a short cut (TCP retransmits). Setting
// the client end down instead would remove its route and fail dials at
// once with "network unreachable": that is an outage, not a partition.
//
// # Views: clients that see different endpoints
//
// [Net.AddView] adds another client namespace with links of its own to
// the Net's endpoints (view v's link to endpoint k is 127.(200+v).0.0/30 +
// 4k). A view's cuts ([View.Cut], [View.Heal]) are its own, and the Net's
// do not reach it: a test can give two clients different majorities of
// the same masters (a bridge). [View.Command] runs a process inside the
// view, [View.DialContext] dials from it.
//
// # Names and cleanup
//
// Namespaces are named redlock-<pid>-<n>. A Net removes its namespaces at
// its test's end (t.Cleanup), killing what still runs inside them (only
// the test put it there). The first Net of a process also deletes the
// namespaces of redlock processes that are no longer alive (a crashed
// run's leftovers), so their links and processes cannot pile up.
//
// # Requirements
//
// Linux, root (network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN) and
// iproute2's ip. [Require] (and [New]) skip a test without them, or fail
// it when REDLOCK_REQUIRE_NETNS is "1" (make test sets it: CI runs as
// root).
package netns
