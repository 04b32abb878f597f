package networld

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Addresses of the world. The host's uplink and the outside's end are on
// TEST-NET-1, the internet host and resolver on TEST-NET-2: none of them is
// reached anywhere but here.
var (
	Uplink   = netip.MustParseAddr("192.0.2.2")
	Outside  = netip.MustParseAddr("192.0.2.1")
	Internet = netip.MustParseAddr("198.51.100.10")
	Resolver = netip.MustParseAddr("198.51.100.53")
	Private  = netip.MustParseAddr("10.1.2.3")
	Metadata = netip.MustParseAddr("169.254.169.254")
)

// Bodies the world's HTTP services answer with.
const (
	InternetBody = "hello from the internet"
	PrivateBody  = "PRIVATE"
	MetadataBody = "METADATA"
	SMTPBody     = "SMTP"
)

// World is the outside namespace and its services, removed when the test
// that built it ends.
type World struct {
	// Outside is the namespace behind the uplink.
	Outside   netns.NsHandle
	listeners []net.Listener
	dns       net.PacketConn
}

// Build wires the outside namespace to this (isolated) one and starts its
// services; t fails, before anything is made, in a namespace that is not
// isolated.
func Build(t *testing.T) *World {
	t.Helper()
	if !Isolated() {
		t.Fatal("the egress world is built only in an isolated network namespace (networld.ReexecIsolated or Isolate)")
	}
	w := &World{}
	lo, err := netlink.LinkByName("lo")
	must(t, err)
	must(t, netlink.LinkSetUp(lo))

	runtime.LockOSThread()
	home, err := netns.Get()
	must(t, err)
	w.Outside, err = netns.New()
	must(t, err)
	must(t, netns.Set(home))
	runtime.UnlockOSThread()
	home.Close()
	t.Cleanup(w.close)

	must(t, netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "wan0"}, PeerName: "wan1", PeerNamespace: netlink.NsFd(int(w.Outside))}))
	wan0, err := netlink.LinkByName("wan0")
	must(t, err)
	must(t, netlink.AddrAdd(wan0, prefix(Uplink, 24)))
	must(t, netlink.LinkSetUp(wan0))
	must(t, netlink.RouteAdd(&netlink.Route{LinkIndex: wan0.Attrs().Index, Gw: net.IP(Outside.AsSlice())}))

	h, err := netlink.NewHandleAt(w.Outside)
	must(t, err)
	defer h.Close()
	olo, err := h.LinkByName("lo")
	must(t, err)
	must(t, h.LinkSetUp(olo))
	wan1, err := h.LinkByName("wan1")
	must(t, err)
	must(t, h.AddrAdd(wan1, prefix(Outside, 24)))
	must(t, h.LinkSetUp(wan1))
	// The hosts' addresses live on the outside namespace's loopback (this
	// kernel has no dummy driver); they are reached through wan1 all the same.
	for _, a := range []netip.Addr{Internet, Resolver, Private, Metadata} {
		must(t, h.AddrAdd(olo, prefix(a, 32)))
	}

	for _, svc := range []struct {
		addr netip.Addr
		port uint16
		body string
	}{{Internet, 80, InternetBody}, {Private, 80, PrivateBody}, {Metadata, 80, MetadataBody}, {Internet, 25, SMTPBody}} {
		w.serveHTTP(t, netip.AddrPortFrom(svc.addr, svc.port), svc.body)
	}
	w.serveDNS(t)
	return w
}

// serveHTTP answers every request to at, in the outside namespace, with body.
func (w *World) serveHTTP(t *testing.T, at netip.AddrPort, body string) {
	l, _ := ListenIn(t, w.Outside, "tcp", at.String())
	w.listeners = append(w.listeners, l)
	go http.Serve(l, http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { fmt.Fprint(rw, body) }))
}

// ListenIn opens a socket on addr in namespace ns (a socket belongs to the
// namespace of the thread that creates it; a closed ns means this one): a
// listener for "tcp", a packet connection for "udp".
func ListenIn(t *testing.T, ns netns.NsHandle, network, addr string) (net.Listener, net.PacketConn) {
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

// close stops the services and removes the uplink (its peer, and the
// outside namespace, go with the last reference).
func (w *World) close() {
	for _, l := range w.listeners {
		l.Close()
	}
	if w.dns != nil {
		w.dns.Close()
	}
	if link, err := netlink.LinkByName("wan0"); err == nil {
		netlink.LinkDel(link)
	}
	w.Outside.Close()
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
