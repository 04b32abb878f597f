package netpolicy_test

import (
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
	"golang.org/x/net/dns/dnsmessage"
)

// The egress tests run in a network namespace of their own with no route off
// the machine. Inside it they build a small world: this process's namespace
// plays the engine's host, and an "outside" namespace behind its uplink holds
// an internet host (198.51.100.10, HTTP, and a resolver on 198.51.100.53), a
// private host (10.1.2.3), a metadata service (169.254.169.254) and an SMTP
// port. Every packet of these tests stays in namespaces the test made.

const isolatedEnv = "SCRATCHRUN_NETTEST_ISOLATED"

func TestMain(m *testing.M) {
	if os.Getenv(isolatedEnv) == "" {
		os.Exit(reexecIsolated())
	}
	if os.Getenv(holderEnv) != "" {
		holdEgress()
	}
	os.Exit(m.Run())
}

// reexecIsolated runs this test binary again in a new, empty network
// namespace and returns its exit status.
func reexecIsolated() int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "find own executable:", err)
		return 1
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Env = append(os.Environ(), isolatedEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "run isolated tests:", err)
		return 1
	}
	return 0
}

// Addresses of the world.
var (
	hostUplink   = netip.MustParseAddr("192.0.2.2")
	outsideAddr  = netip.MustParseAddr("192.0.2.1")
	internetHost = netip.MustParseAddr("198.51.100.10")
	resolver     = netip.MustParseAddr("198.51.100.53")
	privateHost  = netip.MustParseAddr("10.1.2.3")
	metadataHost = netip.MustParseAddr("169.254.169.254")
)

type world struct {
	outside   netns.NsHandle
	listeners []net.Listener
	dns       net.PacketConn
}

// buildWorld wires the outside namespace to ours and starts its services.
func buildWorld(t *testing.T) *world {
	t.Helper()
	if os.Getenv(isolatedEnv) == "" {
		t.Fatal("egress tests must run in their isolated network namespace")
	}
	w := &world{}
	lo, _ := netlink.LinkByName("lo")
	must(t, netlink.LinkSetUp(lo))

	runtime.LockOSThread()
	home, err := netns.Get()
	must(t, err)
	w.outside, err = netns.New()
	must(t, err)
	must(t, netns.Set(home))
	runtime.UnlockOSThread()
	home.Close()

	must(t, netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "wan0"}, PeerName: "wan1", PeerNamespace: netlink.NsFd(int(w.outside))}))
	wan0, err := netlink.LinkByName("wan0")
	must(t, err)
	must(t, netlink.AddrAdd(wan0, prefixAddr(hostUplink, 24)))
	must(t, netlink.LinkSetUp(wan0))
	must(t, netlink.RouteAdd(&netlink.Route{LinkIndex: wan0.Attrs().Index, Gw: net.IP(outsideAddr.AsSlice())}))

	h, err := netlink.NewHandleAt(w.outside)
	must(t, err)
	defer h.Close()
	olo, _ := h.LinkByName("lo")
	must(t, h.LinkSetUp(olo))
	wan1, err := h.LinkByName("wan1")
	must(t, err)
	must(t, h.AddrAdd(wan1, prefixAddr(outsideAddr, 24)))
	must(t, h.LinkSetUp(wan1))
	// The hosts' addresses live on the outside namespace's loopback (this
	// kernel has no dummy driver); they are reached through wan1 all the same.
	for _, a := range []netip.Addr{internetHost, resolver, privateHost, metadataHost} {
		must(t, h.AddrAdd(olo, prefixAddr(a, 32)))
	}

	for _, svc := range []struct {
		addr netip.Addr
		port int
		body string
	}{{internetHost, 80, "hello from the internet"}, {privateHost, 80, "PRIVATE"}, {metadataHost, 80, "METADATA"}, {internetHost, 25, "SMTP"}} {
		w.serveHTTP(t, w.outside, netip.AddrPortFrom(svc.addr, uint16(svc.port)), svc.body)
	}
	w.serveDNS(t)
	t.Cleanup(w.close)
	return w
}

// listenIn opens a socket in namespace ns (sockets belong to the namespace of
// the thread that creates them).
func listenIn(t *testing.T, ns netns.NsHandle, network, addr string) (net.Listener, net.PacketConn) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	home, err := netns.Get()
	must(t, err)
	defer home.Close()
	if ns.IsOpen() {
		must(t, netns.Set(ns))
		defer netns.Set(home)
	}
	if network == "udp" {
		pc, err := net.ListenPacket(network, addr)
		must(t, err)
		return nil, pc
	}
	l, err := net.Listen(network, addr)
	must(t, err)
	return l, nil
}

func (w *world) serveHTTP(t *testing.T, ns netns.NsHandle, at netip.AddrPort, body string) {
	l, _ := listenIn(t, ns, "tcp", at.String())
	w.listeners = append(w.listeners, l)
	go http.Serve(l, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { fmt.Fprint(rw, body) }))
}

// serveDNS answers A queries for internet.test and private.test.
func (w *world) serveDNS(t *testing.T) {
	_, pc := listenIn(t, w.outside, "udp", netip.AddrPortFrom(resolver, 53).String())
	w.dns = pc
	records := map[string]netip.Addr{"internet.test.": internetHost, "private.test.": privateHost}
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			hdr, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: hdr.ID, Response: true, Authoritative: true})
			b.EnableCompression()
			b.StartQuestions()
			b.Question(q)
			b.StartAnswers()
			if a, ok := records[q.Name.String()]; ok && q.Type == dnsmessage.TypeA {
				b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: a.As4()})
			}
			msg, err := b.Finish()
			if err == nil {
				pc.WriteTo(msg, from)
			}
		}
	}()
}

func (w *world) close() {
	for _, l := range w.listeners {
		l.Close()
	}
	if w.dns != nil {
		w.dns.Close()
	}
	if link, err := netlink.LinkByName("wan0"); err == nil {
		netlink.LinkDel(link)
	}
	w.outside.Close()
}

func prefixAddr(a netip.Addr, bits int) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, 32)}}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
