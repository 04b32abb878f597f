package goinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

func mount(source, target, fstype string, flags uintptr, data string) error {
	if err := unix.Mount(source, target, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s on %s (%s): %w", source, target, fstype, err)
	}
	return nil
}

// writeResolvConf points the sandbox at its resolvers (egress only), with
// short timeouts so a failed lookup fails fast.
func writeResolvConf(servers []string) error {
	var b strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	b.WriteString("options timeout:2 attempts:2\n")
	// The image's file may be a symlink (systemd images link it into /run);
	// replace it rather than write through it.
	_ = os.Remove("/etc/resolv.conf")
	if err := os.WriteFile("/etc/resolv.conf", []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write /etc/resolv.conf: %w", err)
	}
	return nil
}

// maskProc hides and freezes the setup's /proc paths under root.
func maskProc(root string, s initproto.SetupMessage) error {
	for _, p := range s.MaskPaths {
		target := filepath.Join(root, p)
		fi, err := os.Stat(target)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		if fi.IsDir() {
			err = mount("tmpfs", target, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,nr_inodes=4")
		} else {
			err = mount("/dev/null", target, "", unix.MS_BIND, "")
		}
		if err != nil {
			return err
		}
	}
	for _, p := range s.ReadOnlyPaths {
		target := filepath.Join(root, p)
		if _, err := os.Stat(target); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := mount(target, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return err
		}
		if err := mount("", target, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return err
		}
	}
	return nil
}
