package nsinit

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// loopbackUp brings up lo in the sandbox's fresh network namespace, where it
// starts down: programs expect localhost to work (test servers, IPC).
// One ioctl does it; a netlink library would be more code for the same call.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket for lo: %w", err)
	}
	defer unix.Close(fd)
	req, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, req); err != nil {
		return fmt.Errorf("read lo flags: %w", err)
	}
	req.SetUint16(req.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, req); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	return nil
}
