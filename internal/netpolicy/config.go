package netpolicy

import (
	"fmt"
	"net/netip"
	"strings"
)

// Config is the operator's egress policy.
type Config struct {
	// Table names the nftables table (family inet) the policy lives in.
	Table string
	// InterfacePrefix starts the name of every host-side sandbox interface;
	// rules match it, so it must be unique to ScratchRun on the host.
	InterfacePrefix string
	// Subnet is carved into one /30 per slot. It is also blocked as a
	// destination, so sandboxes cannot reach each other.
	Subnet netip.Prefix
	// DNS are the resolvers sandboxes use (and may reach on port 53 even if
	// they sit in a blocked range, as cloud resolvers often do).
	DNS []netip.Addr
	// Allowed are destinations reachable even inside blocked ranges (a proxy
	// on a private address, say).
	Allowed []netip.Prefix
	// Blocked are destinations blocked in addition to BlockedByDefault.
	Blocked []netip.Prefix
	// MaxConnections caps the connections one sandbox may have open at once,
	// as the host's connection tracking counts them: the conntrack table is
	// the whole host's (262,144 entries here), and one sandbox opening
	// connections without end would fill it and stall the host's own.
	MaxConnections int
	// NewConnectionsPerSecond caps how fast one sandbox opens connections
	// (bursts of twice as many pass), so that it cannot churn the table.
	NewConnectionsPerSecond int
	// PoolSize is how many slots are kept ready ahead of demand.
	PoolSize int
	// LockDir holds the lock files through which the engines of one network
	// namespace share egress (one per namespace, while an engine uses it).
	// Every engine on a host must use the same one.
	LockDir string
}

// fingerprint is the policy as engines sharing a namespace must agree on it,
// one setting per line.
func (c Config) fingerprint() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table %s\ninterfaces %s*\nsubnet %s\n", c.Table, c.InterfacePrefix, c.Subnet.Masked())
	fmt.Fprintf(&b, "connections %d, %d new per second\n", c.MaxConnections, c.NewConnectionsPerSecond)
	for _, d := range c.DNS {
		fmt.Fprintf(&b, "dns %s\n", d)
	}
	for _, p := range c.Allowed {
		fmt.Fprintf(&b, "allow %s\n", p)
	}
	for _, p := range c.Blocked {
		fmt.Fprintf(&b, "block %s\n", p)
	}
	return b.String()
}

// BlockedByDefault are the IPv4 destinations no sandbox may reach: private,
// shared (CGNAT), link-local (cloud metadata), loopback, "this network",
// IETF-reserved and documentation-adjacent protocol space, multicast, reserved
// and broadcast.
var BlockedByDefault = mustPrefixes(
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
	"172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15",
	"224.0.0.0/4", "240.0.0.0/4", "255.255.255.255/32",
)

// BlockedPorts are TCP destination ports no sandbox may reach (SMTP: spam).
var BlockedPorts = []uint16{25}

// Defaults of the per-sandbox connection limits: generous for a program that
// downloads in parallel or installs packages, while a hundred sandboxes at
// their limit hold a tenth of a default conntrack table.
const (
	DefaultMaxConnections          = 256
	DefaultNewConnectionsPerSecond = 100
)

// DefaultConfig returns the defaults: table "scratchrun", interfaces "sr-*",
// slots from 10.203.0.0/16, 256 connections and 100 new ones a second per
// sandbox, two slots ready, resolvers from the host.
func DefaultConfig() Config {
	return Config{
		Table:                   "scratchrun",
		InterfacePrefix:         "sr-",
		Subnet:                  netip.MustParsePrefix("10.203.0.0/16"),
		MaxConnections:          DefaultMaxConnections,
		NewConnectionsPerSecond: DefaultNewConnectionsPerSecond,
		PoolSize:                2,
		LockDir:                 "/run/scratchrun",
	}
}

func (c Config) validate() error {
	if c.Table == "" || len(c.InterfacePrefix) < 2 || len(c.InterfacePrefix) > 6 {
		return fmt.Errorf("netpolicy: table %q and interface prefix %q must be set (prefix 2 to 6 characters)", c.Table, c.InterfacePrefix)
	}
	if !c.Subnet.Addr().Is4() || c.Subnet.Bits() > 28 {
		return fmt.Errorf("netpolicy: subnet %s must be IPv4 and hold at least four /30 slots", c.Subnet)
	}
	for _, d := range c.DNS {
		if !d.Is4() {
			return fmt.Errorf("netpolicy: resolver %s: only IPv4 resolvers are supported (sandboxes have no IPv6)", d)
		}
	}
	if c.MaxConnections < 1 || c.NewConnectionsPerSecond < 1 {
		return fmt.Errorf("netpolicy: connection limits %d open and %d new per second must both be positive", c.MaxConnections, c.NewConnectionsPerSecond)
	}
	if len(c.DNS) == 0 {
		return fmt.Errorf("netpolicy: no DNS resolver: set one (SCRATCHRUN_DNS) or give the host a non-loopback nameserver in /etc/resolv.conf")
	}
	return nil
}

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}
