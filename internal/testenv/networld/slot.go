package networld

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/scratchrun/scratchrun/internal/netpolicy"
	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// What a backend's suite needs to show that its sandboxes' egress goes
// through a slot of the network policy, below the engine: the slot, and a
// job that tries the world's hosts.

// EgressSlot is the network of one sandbox with egress in the world: a slot
// of a network policy that resolves with the world's resolver (its engines'
// lock file in lockDir). The slot is released and the policy closed when t
// ends; either failing fails t.
func EgressSlot(t *testing.T, lockDir string) *sandbox.Network {
	t.Helper()
	cfg := netpolicy.DefaultConfig()
	cfg.DNS = []netip.Addr{Resolver}
	cfg.LockDir = lockDir
	mgr, err := netpolicy.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := mgr.Close(); err != nil {
			t.Errorf("close network policy: %v", err)
		}
	})
	slot, err := mgr.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := mgr.Release(slot); err != nil {
			t.Error(err)
		}
	})
	return &sandbox.Network{NetNSFD: slot.FD(), DNS: []string{Resolver.String()}}
}

// SlotProbe is a Python 3.13 job that prints its resolver, its interfaces,
// how IPv6 fails, and what the internet, private and metadata hosts each
// answer on port 80 (the body, or the errno's name), a line each.
var SlotProbe = []string{"/usr/bin/python3.13", "-c", fmt.Sprintf(`import errno, socket
print(open('/etc/resolv.conf').read().split()[1])
print(sorted(n for _, n in socket.if_nameindex()))
try:
    s6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s6.connect(('2001:db8::1', 80)); print('ipv6 route', s6.getsockname()[0])
except OSError as e: print('ipv6', errno.errorcode.get(e.errno, str(e)))
for name, host in (('internet', %q), ('private', %q), ('metadata', %q)):
    try:
        s = socket.create_connection((host, 80), timeout=10)
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        print(name, s.recv(4096).decode().split("\r\n\r\n", 1)[-1])
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, str(e)))
`, Internet, Private, Metadata)}

// SlotProbeWant is what SlotProbe prints in a sandbox on an egress slot: the
// world's resolver, one interface besides loopback, IPv6 failing with the
// errno named ipv6 (sandboxes have no IPv6 at all), the internet host's
// answer, and the private and metadata hosts refused at once.
func SlotProbeWant(ipv6 string) string {
	return fmt.Sprintf("%s\n['eth0', 'lo']\nipv6 %s\ninternet %s\nprivate ECONNREFUSED\nmetadata ECONNREFUSED\n", Resolver, ipv6, InternetBody)
}
