package seccomp

import (
	"slices"
	"testing"
)

// TestDefaultCapabilitiesAreDockers pins the set to Docker's default
// container capabilities: the seccomp rules are evaluated against it and the
// engine drops the bounding set to it, so a change must be deliberate.
func TestDefaultCapabilitiesAreDockers(t *testing.T) {
	want := []string{
		"CAP_AUDIT_WRITE", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID",
		"CAP_KILL", "CAP_MKNOD", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW", "CAP_SETFCAP",
		"CAP_SETGID", "CAP_SETPCAP", "CAP_SETUID", "CAP_SYS_CHROOT",
	}
	if got := slices.Sorted(slices.Values(DefaultCapabilityNames)); !slices.Equal(got, want) {
		t.Errorf("DefaultCapabilityNames = %v, want %v", got, want)
	}
	if len(DefaultCapabilities) != len(DefaultCapabilityNames) {
		t.Fatalf("%d numbers for %d names", len(DefaultCapabilities), len(DefaultCapabilityNames))
	}
}
