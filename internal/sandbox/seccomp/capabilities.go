package seccomp

// defaultCapabilities is Docker's default container capability set, the only
// capabilities sandboxed code keeps inside its user namespace. The numbers are
// Linux UAPI constants (include/uapi/linux/capability.h); they are spelled out
// rather than taken from x/sys/unix so the list also compiles on non-Linux
// development machines. A test checks them against x/sys/unix.
var defaultCapabilities = []struct {
	name   string
	number uintptr
}{
	{"CAP_CHOWN", 0},
	{"CAP_DAC_OVERRIDE", 1},
	{"CAP_FOWNER", 3},
	{"CAP_FSETID", 4},
	{"CAP_KILL", 5},
	{"CAP_SETGID", 6},
	{"CAP_SETUID", 7},
	{"CAP_SETPCAP", 8},
	{"CAP_NET_BIND_SERVICE", 10},
	{"CAP_NET_RAW", 13},
	{"CAP_SYS_CHROOT", 18},
	{"CAP_MKNOD", 27},
	{"CAP_AUDIT_WRITE", 29},
	{"CAP_SETFCAP", 31},
}

// DefaultCapabilities are the capability numbers sandboxed code keeps within
// its user namespace: Docker's default set. The sandbox engine drops the
// capability bounding set to exactly these, and the seccomp profile's
// capability-dependent rules are evaluated against the same set, so the two
// must not diverge. Same order as DefaultCapabilityNames.
var DefaultCapabilities = func() []uintptr {
	out := make([]uintptr, len(defaultCapabilities))
	for i, c := range defaultCapabilities {
		out[i] = c.number
	}
	return out
}()

// DefaultCapabilityNames are the names ("CAP_CHOWN", ...) of
// DefaultCapabilities, spelled as in Docker's seccomp profile. Same order as
// DefaultCapabilities.
var DefaultCapabilityNames = func() []string {
	out := make([]string, len(defaultCapabilities))
	for i, c := range defaultCapabilities {
		out[i] = c.name
	}
	return out
}()
