package goinit

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// configureNetwork brings loopback up and, for egress, gives the guest's
// interface the address and default route the engine sent (the network
// slot's, whose policy the host applies). The kernel's own IP
// autoconfiguration is not in Debian's kernel, and the agent links no
// netlink library (see the package comment): two ioctls and one route
// message do it.
func configureNetwork(m initproto.VMMessage, device string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}
	defer unix.Close(fd)
	if err := interfaceUp(fd, "lo"); err != nil {
		return err
	}
	if !m.Address.IsValid() {
		return nil
	}
	ifr, err := unix.NewIfreq(device)
	if err != nil {
		return err
	}
	addr := m.Address.Addr().As4()
	if err := ifr.SetInet4Addr(addr[:]); err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFADDR, ifr); err != nil {
		return fmt.Errorf("network: address of %s: %w", device, err)
	}
	mask := binary.BigEndian.AppendUint32(nil, ^uint32(0)<<(32-m.Address.Bits()))
	if err := ifr.SetInet4Addr(mask); err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFNETMASK, ifr); err != nil {
		return fmt.Errorf("network: netmask of %s: %w", device, err)
	}
	if err := interfaceUp(fd, device); err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return fmt.Errorf("network: index of %s: %w", device, err)
	}
	return addDefaultRoute(m.Gateway.As4(), int(ifr.Uint32()))
}

func interfaceUp(fd int, name string) error {
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("network: flags of %s: %w", name, err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("network: bring %s up: %w", name, err)
	}
	return nil
}

// addDefaultRoute sends one RTM_NEWROUTE (default via gateway on
// interface index) and reads the kernel's acknowledgement.
func addDefaultRoute(gateway [4]byte, index int) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}
	defer unix.Close(fd)
	attr := func(kind uint16, data []byte) []byte {
		b := binary.LittleEndian.AppendUint16(nil, uint16(unix.SizeofRtAttr+len(data)))
		b = binary.LittleEndian.AppendUint16(b, kind)
		return append(b, data...) // 4-byte payloads: already aligned
	}
	rt := unix.RtMsg{Family: unix.AF_INET, Table: unix.RT_TABLE_MAIN, Protocol: unix.RTPROT_BOOT,
		Scope: unix.RT_SCOPE_UNIVERSE, Type: unix.RTN_UNICAST}
	body := append([]byte(nil), (*[unix.SizeofRtMsg]byte)(unsafe.Pointer(&rt))[:]...)
	body = append(body, attr(unix.RTA_GATEWAY, gateway[:])...)
	body = append(body, attr(unix.RTA_OIF, binary.LittleEndian.AppendUint32(nil, uint32(index)))...)
	hdr := unix.NlMsghdr{Len: uint32(unix.SizeofNlMsghdr + len(body)), Type: unix.RTM_NEWROUTE,
		Flags: unix.NLM_F_REQUEST | unix.NLM_F_ACK | unix.NLM_F_CREATE | unix.NLM_F_EXCL, Seq: 1}
	msg := append((*[unix.SizeofNlMsghdr]byte)(unsafe.Pointer(&hdr))[:], body...)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("network: default route: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return fmt.Errorf("network: default route: %w", err)
	}
	if n < unix.SizeofNlMsghdr+4 {
		return fmt.Errorf("network: default route: short answer")
	}
	if code := int32(binary.LittleEndian.Uint32(buf[unix.SizeofNlMsghdr:])); code != 0 {
		return fmt.Errorf("network: default route: %w", unix.Errno(-code))
	}
	return nil
}
