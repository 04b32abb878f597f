package gvisor

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/scratchrun/scratchrun/internal/netpolicy"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// isolatedEnv marks the copy of this test binary that runs in a network
// namespace of its own, where the egress test builds its small world.
const isolatedEnv = "SCRATCHRUN_GVISORTEST_ISOLATED"

// Addresses of the egress test's world; every packet stays in namespaces the
// test made.
var (
	worldUplink   = netip.MustParseAddr("192.0.2.2")
	worldOutside  = netip.MustParseAddr("192.0.2.1")
	worldInternet = netip.MustParseAddr("198.51.100.10")
	worldResolver = netip.MustParseAddr("198.51.100.53")
	worldPrivate  = netip.MustParseAddr("10.1.2.3")
	worldMetadata = netip.MustParseAddr("169.254.169.254")
)

// With egress, a gVisor sandbox uses the slot's network namespace: the
// Sentry's network stack sends through the slot's veth, so the same
// nftables policy applies as to a namespaces sandbox: the internet is
// reachable, private and metadata addresses are refused at once.
func TestEgressThroughSlot(t *testing.T) {
	if os.Getenv(isolatedEnv) == "" {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(self, "-test.run=^TestEgressThroughSlot$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), isolatedEnv+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
		out, err := cmd.CombinedOutput()
		t.Logf("isolated run:\n%s", out)
		if err != nil {
			t.Fatalf("egress test in an isolated network namespace: %v", err)
		}
		return
	}
	buildWorld(t)
	cfg := netpolicy.DefaultConfig()
	cfg.DNS = []netip.Addr{worldResolver}
	cfg.LockDir = testStateDir
	mgr, err := netpolicy.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := mgr.Close(); err != nil {
			t.Errorf("close network policy: %v", err)
		}
	}()
	slot, err := mgr.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	img, _ := env.Image(t, "python3.13")
	c := testenv.SandboxConfig(img)
	c.Network = &sandbox.Network{NetNSFD: slot.FD(), DNS: []string{worldResolver.String()}}
	r := run(t, c, sandbox.Job{Argv: []string{"/usr/bin/python3.13", "-c", fmt.Sprintf(`import errno, socket
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
`, worldInternet, worldPrivate, worldMetadata)}})
	if err := mgr.Release(slot); err != nil {
		t.Error(err)
	}
	// No IPv6 at all: not even a route to try.
	want := fmt.Sprintf("%s\n['eth0', 'lo']\nipv6 ENETUNREACH\ninternet hello from the internet\nprivate ECONNREFUSED\nmetadata ECONNREFUSED\n", worldResolver)
	if r.Stdout != want {
		t.Errorf("stdout %q, want %q (stderr %q)", r.Stdout, want, r.Stderr)
	}
}

// buildWorld wires an "outside" namespace to this (isolated) one: the
// test's internet, private and metadata hosts serve HTTP there.
func buildWorld(t *testing.T) {
	t.Helper()
	lo, err := netlink.LinkByName("lo")
	must(t, err)
	must(t, netlink.LinkSetUp(lo))
	runtime.LockOSThread()
	home, err := netns.Get()
	must(t, err)
	outside, err := netns.New()
	must(t, err)
	must(t, netns.Set(home))
	runtime.UnlockOSThread()
	home.Close()
	must(t, netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "wan0"}, PeerName: "wan1", PeerNamespace: netlink.NsFd(int(outside))}))
	wan0, err := netlink.LinkByName("wan0")
	must(t, err)
	must(t, netlink.AddrAdd(wan0, prefix(worldUplink, 24)))
	must(t, netlink.LinkSetUp(wan0))
	must(t, netlink.RouteAdd(&netlink.Route{LinkIndex: wan0.Attrs().Index, Gw: net.IP(worldOutside.AsSlice())}))
	h, err := netlink.NewHandleAt(outside)
	must(t, err)
	defer h.Close()
	olo, err := h.LinkByName("lo")
	must(t, err)
	must(t, h.LinkSetUp(olo))
	wan1, err := h.LinkByName("wan1")
	must(t, err)
	must(t, h.AddrAdd(wan1, prefix(worldOutside, 24)))
	must(t, h.LinkSetUp(wan1))
	for _, a := range []netip.Addr{worldInternet, worldPrivate, worldMetadata} {
		must(t, h.AddrAdd(olo, prefix(a, 32)))
	}
	var listeners []net.Listener
	for addr, body := range map[netip.Addr]string{worldInternet: "hello from the internet", worldPrivate: "PRIVATE", worldMetadata: "METADATA"} {
		l := listenIn(t, outside, netip.AddrPortFrom(addr, 80).String())
		listeners = append(listeners, l)
		go http.Serve(l, http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { fmt.Fprint(rw, body) }))
	}
	t.Cleanup(func() {
		for _, l := range listeners {
			l.Close()
		}
		if link, err := netlink.LinkByName("wan0"); err == nil {
			netlink.LinkDel(link)
		}
		outside.Close()
	})
}

// listenIn listens on addr in namespace ns (a socket belongs to the
// namespace of the thread that creates it).
func listenIn(t *testing.T, ns netns.NsHandle, addr string) net.Listener {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	home, err := netns.Get()
	must(t, err)
	defer home.Close()
	must(t, netns.Set(ns))
	defer netns.Set(home)
	l, err := net.Listen("tcp", addr)
	must(t, err)
	return l
}

func prefix(a netip.Addr, bits int) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, 32)}}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
