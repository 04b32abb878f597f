package microvm

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// slotInterface is the egress slot's end of its veth pair, inside the
// slot's namespace (see package netpolicy).
const slotInterface = "eth0"

// guestLink is what an egress guest gets of its network slot: a tap device
// in the slot's namespace, bridged with the slot's veth, and the address
// the slot gave its sandbox (taken off the veth, which no process in the
// namespace uses: the guest is the sandbox). Traffic leaves the host
// through the slot's veth exactly as a namespaces sandbox's does, with the
// same address, so the host's nftables policy applies unchanged and
// nothing is added per VM. The namespace, bridge and tap go when the slot
// is released.
type guestLink struct {
	Tap     *os.File
	Address netip.Prefix
	Gateway netip.Addr
}

// attachTap makes the guest's tap in the namespace nsFD names.
func attachTap(nsFD int) (*guestLink, error) {
	runtime.LockOSThread()
	// The thread is discarded rather than returned to its namespace if
	// anything below fails half way (the runtime ends a locked thread
	// that exits still locked).
	back, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer back.Close()
	if err := netns.Set(netns.NsHandle(nsFD)); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("join the network slot: %w", err)
	}
	link, err := attachTapHere()
	if err := netns.Set(back); err != nil {
		if link != nil {
			link.Tap.Close()
		}
		return nil, fmt.Errorf("leave the network slot: %w", err) // thread stays locked: discarded
	}
	runtime.UnlockOSThread()
	return link, err
}

// attachTapHere does attachTap's work in the slot's namespace.
func attachTapHere() (*guestLink, error) {
	veth, err := netlink.LinkByName(slotInterface)
	if err != nil {
		return nil, fmt.Errorf("network slot: %w", err)
	}
	addrs, err := netlink.AddrList(veth, netlink.FAMILY_V4)
	if err != nil || len(addrs) != 1 {
		return nil, fmt.Errorf("network slot: want one IPv4 address on %s, have %v (%v)", slotInterface, addrs, err)
	}
	prefix, ok := netip.AddrFromSlice(addrs[0].IP.To4())
	ones, _ := addrs[0].Mask.Size()
	if !ok {
		return nil, errors.New("network slot: bad address")
	}
	routes, err := netlink.RouteList(veth, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("network slot: %w", err)
	}
	var gateway netip.Addr
	for _, r := range routes {
		// netlink gives the default route's destination as nil or as
		// 0.0.0.0/0, depending on its version.
		if r.Gw != nil && (r.Dst == nil || (r.Dst.IP.IsUnspecified() && maskBits(r.Dst.Mask) == 0)) {
			gateway, _ = netip.AddrFromSlice(r.Gw.To4())
		}
	}
	if !gateway.IsValid() {
		return nil, errors.New("network slot: no default route")
	}
	tap, name, err := openTap()
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*guestLink, error) {
		tap.Close()
		return nil, fmt.Errorf("network slot: %w", err)
	}
	bridge := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
	if err := netlink.LinkAdd(bridge); err != nil {
		return fail(err)
	}
	tapLink, err := netlink.LinkByName(name)
	if err != nil {
		return fail(err)
	}
	if err := netlink.AddrDel(veth, &addrs[0]); err != nil {
		return fail(err)
	}
	for _, l := range []netlink.Link{veth, tapLink} {
		if err := netlink.LinkSetMaster(l, bridge); err != nil {
			return fail(err)
		}
	}
	for _, l := range []netlink.Link{bridge, tapLink, veth} {
		if err := netlink.LinkSetUp(l); err != nil {
			return fail(err)
		}
	}
	return &guestLink{Tap: tap, Address: netip.PrefixFrom(prefix, ones), Gateway: gateway}, nil
}

// openTap creates a tap device in the calling thread's namespace and
// returns its descriptor (the device lives as long as it) and name.
func openTap() (*os.File, string, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq("tap%d")
	if err != nil {
		unix.Close(fd)
		return nil, "", err
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, "", fmt.Errorf("create a tap device: %w", err)
	}
	return os.NewFile(uintptr(fd), "tap"), ifr.Name(), nil
}

// guestMAC is a locally administered unicast address for sandbox n.
func guestMAC(n uint64) string {
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", byte(n>>16), byte(n>>8), byte(n))
}

func maskBits(m net.IPMask) int {
	ones, _ := m.Size()
	return ones
}
