package netpolicy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Slot is one ready network namespace for one sandbox: lo and eth0 up, an
// address, a default route through the host. It is owned by the host's user
// namespace, so the sandbox's root cannot reconfigure it.
type Slot struct {
	index    int
	ns       netns.NsHandle
	hostName string
	// Address is the sandbox's address; Gateway the host side's.
	Address, Gateway netip.Addr
	// DNS are the resolvers the sandbox should use.
	DNS []netip.Addr
}

// NetNSPath names the slot's namespace for a process that wants to join it
// (valid while the slot is held by this process).
func (s *Slot) NetNSPath() string { return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), int(s.ns)) }

// FD is the slot's namespace file descriptor.
func (s *Slot) FD() int { return int(s.ns) }

// slotAddrs returns the host and sandbox addresses of slot i: the second and
// third addresses of the i-th /30 of the subnet.
func slotAddrs(subnet netip.Prefix, i int) (host, sandbox netip.Addr) {
	base := subnet.Masked().Addr().As4()
	n := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	n += uint32(i) * 4
	a := func(v uint32) netip.Addr {
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return a(n + 1), a(n + 2)
}

// createSlot builds slot i: a new network namespace, a veth pair with its
// peer inside, addresses, routes and sysctls.
func createSlot(c Config, i int) (*Slot, error) {
	host, sandbox := slotAddrs(c.Subnet, i)
	s := &Slot{index: i, hostName: fmt.Sprintf("%s%d", c.InterfacePrefix, i), Address: sandbox, Gateway: host, DNS: c.DNS}
	// The caller holds slot i's lock: an interface of that name is what a
	// crashed engine left.
	if link, err := netlink.LinkByName(s.hostName); err == nil {
		if err := netlink.LinkDel(link); err != nil {
			return nil, fmt.Errorf("slot %d: remove a stale %s: %w", i, s.hostName, err)
		}
	}
	ns, err := newNamespace()
	if err != nil {
		return nil, err
	}
	s.ns = ns
	if err := s.plumb(); err != nil {
		s.destroy()
		return nil, fmt.Errorf("slot %d: %w", i, err)
	}
	return s, nil
}

// newNamespace makes a network namespace on a locked thread, configures what
// only a thread inside it can (sysctls under /proc/sys/net), and returns its
// handle, leaving the thread where it was.
func newNamespace() (netns.NsHandle, error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return 0, fmt.Errorf("read current network namespace: %w", err)
	}
	defer orig.Close()
	ns, err := netns.New() // unshares this thread into the new namespace
	if err != nil {
		runtime.UnlockOSThread()
		return 0, fmt.Errorf("create network namespace: %w", err)
	}
	// No IPv6 at all inside: the policy is IPv4-only, so a sandbox gets no
	// address (not even link-local) to reach anything over IPv6.
	sysctlErr := disableIPv6()
	if err := netns.Set(orig); err != nil {
		// This thread is stuck in the wrong namespace: never unlock it, so
		// the runtime retires it when this goroutine ends.
		ns.Close()
		return 0, fmt.Errorf("return to the host network namespace: %w", err)
	}
	runtime.UnlockOSThread()
	if sysctlErr != nil {
		ns.Close()
		return 0, sysctlErr
	}
	return ns, nil
}

func disableIPv6() error {
	for _, scope := range []string{"all", "default"} {
		p := filepath.Join("/proc/sys/net/ipv6/conf", scope, "disable_ipv6")
		if _, err := os.Stat(p); os.IsNotExist(err) {
			return nil // kernel without IPv6
		}
		if err := os.WriteFile(p, []byte("1"), 0); err != nil {
			return fmt.Errorf("disable IPv6 in the slot: %w", err)
		}
	}
	return nil
}

func (s *Slot) plumb() error {
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: s.hostName},
		PeerName:      "eth0",
		PeerNamespace: netlink.NsFd(int(s.ns)),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth %s: %w", s.hostName, err)
	}
	hostLink, err := netlink.LinkByName(s.hostName)
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(hostLink, addr(s.Gateway, 30)); err != nil {
		return fmt.Errorf("address %s on %s: %w", s.Gateway, s.hostName, err)
	}
	// Strict reverse-path filtering drops anything the sandbox sends from
	// an address other than its own.
	if err := os.WriteFile(filepath.Join("/proc/sys/net/ipv4/conf", s.hostName, "rp_filter"), []byte("1"), 0); err != nil {
		return fmt.Errorf("rp_filter on %s: %w", s.hostName, err)
	}
	if err := netlink.LinkSetUp(hostLink); err != nil {
		return fmt.Errorf("bring %s up: %w", s.hostName, err)
	}

	h, err := netlink.NewHandleAt(s.ns)
	if err != nil {
		return fmt.Errorf("netlink in slot: %w", err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("bring lo up in slot: %w", err)
	}
	eth, err := h.LinkByName("eth0")
	if err != nil {
		return err
	}
	if err := h.AddrAdd(eth, addr(s.Address, 30)); err != nil {
		return fmt.Errorf("address %s in slot: %w", s.Address, err)
	}
	if err := h.LinkSetUp(eth); err != nil {
		return fmt.Errorf("bring eth0 up in slot: %w", err)
	}
	gw := net.IP(s.Gateway.AsSlice())
	if err := h.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: gw}); err != nil {
		return fmt.Errorf("default route in slot: %w", err)
	}
	return nil
}

// destroy deletes the veth pair (both ends go at once), releases the
// namespace (with no process left in it, the kernel frees it) and forgets
// the sandbox's connections.
func (s *Slot) destroy() error {
	var errs []error
	if link, lerr := netlink.LinkByName(s.hostName); lerr == nil {
		if derr := netlink.LinkDel(link); derr != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", s.hostName, derr))
		}
	}
	if s.ns.IsOpen() {
		s.ns.Close()
	}
	if err := forgetConnections(s.Address); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// forgetConnections deletes the host's conntrack entries a sandbox at addr
// left: an established connection nobody closed stays in the table for days,
// counting against the host's limit, and against the next sandbox given the
// same address (its open-connection count would start full).
func forgetConnections(addr netip.Addr) error {
	filter := &netlink.ConntrackFilter{}
	if err := filter.AddIP(netlink.ConntrackOrigSrcIP, net.IP(addr.AsSlice())); err != nil {
		return err
	}
	if _, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, filter); err != nil {
		return fmt.Errorf("forget the connections of %s: %w", addr, err)
	}
	return nil
}

func addr(a netip.Addr, bits int) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, 32)}}
}

// removeLinks deletes every interface whose name starts with prefix: the
// sandbox interfaces a crashed engine left (their namespaces usually take
// them along when they go; this is for any that a lingering process kept).
func removeLinks(prefix string) {
	links, err := netlink.LinkList()
	if err != nil {
		return
	}
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, prefix) {
			_ = netlink.LinkDel(l)
		}
	}
}

// enableForwarding turns on IPv4 forwarding in the engine's network
// namespace: without it no packet leaves a slot.
func enableForwarding() error {
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0); err != nil {
		return fmt.Errorf("enable IPv4 forwarding: %w", err)
	}
	return nil
}
