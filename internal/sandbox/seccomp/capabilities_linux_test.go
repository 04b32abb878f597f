//go:build linux

package seccomp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestDefaultCapabilityNumbers checks the hand-written numbers against the
// kernel UAPI constants in x/sys/unix.
func TestDefaultCapabilityNumbers(t *testing.T) {
	want := map[string]uintptr{
		"CAP_CHOWN": unix.CAP_CHOWN, "CAP_DAC_OVERRIDE": unix.CAP_DAC_OVERRIDE,
		"CAP_FOWNER": unix.CAP_FOWNER, "CAP_FSETID": unix.CAP_FSETID,
		"CAP_KILL": unix.CAP_KILL, "CAP_SETGID": unix.CAP_SETGID,
		"CAP_SETUID": unix.CAP_SETUID, "CAP_SETPCAP": unix.CAP_SETPCAP,
		"CAP_NET_BIND_SERVICE": unix.CAP_NET_BIND_SERVICE, "CAP_NET_RAW": unix.CAP_NET_RAW,
		"CAP_SYS_CHROOT": unix.CAP_SYS_CHROOT, "CAP_MKNOD": unix.CAP_MKNOD,
		"CAP_AUDIT_WRITE": unix.CAP_AUDIT_WRITE, "CAP_SETFCAP": unix.CAP_SETFCAP,
	}
	for i, name := range DefaultCapabilityNames {
		if n, ok := want[name]; !ok || DefaultCapabilities[i] != n {
			t.Errorf("%s = %d, want %d (known: %v)", name, DefaultCapabilities[i], n, ok)
		}
	}
}
