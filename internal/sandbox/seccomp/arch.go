//go:build linux && amd64

package seccomp

import (
	"github.com/elastic/go-seccomp-bpf/arch"
	dockerprofile "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// The filter is compiled for the native ABI only. go-seccomp-bpf emits one
// architecture check in front of all rules: a syscall whose seccomp_data.arch
// is not AUDIT_ARCH_X86_64 (the i386 ABI reached through int $0x80 or
// sysenter) jumps straight to the policy's default action, and an x86_64
// syscall number carrying the x32 bit (>= 0x40000000) returns ENOSYS; the
// block this package compiles itself repeats the architecture check
// (assemble.go). Docker's
// archMap lists x86 and x32 as sub-architectures of x86_64 and would allow the
// same names there; this package does not compile rules for them, so both
// ABIs are denied outright. That is stricter than Docker (32-bit binaries do
// not run in the sandbox) and it is what closes the classic bypass of
// name-based rules through another syscall table.
const (
	// profileArch is the architecture name the profile's includes/excludes
	// "arches" lists use for x86_64 (moby's goToNative[GOARCH]).
	profileArch = "amd64"

	// nativeSpecArch is the OCI name of the native architecture in archMap.
	nativeSpecArch = specs.ArchX86_64

	// nativeAuditArch is the seccomp_data.arch value of native syscalls.
	nativeAuditArch = unix.AUDIT_ARCH_X86_64

	// cloneFlagsArg is the argument index of clone(2)'s flags on x86_64
	// (s390 swaps the first two arguments; Docker's profile has a rule for
	// that, which does not apply here).
	cloneFlagsArg = 0
)

// nativeSyscalls is go-seccomp-bpf's x86_64 syscall table, used to resolve
// names and order rules.
var nativeSyscalls = arch.X86_64

// profileSubArches returns the sub-architectures the profile's archMap lists
// next to the native one. They are reported (not compiled) so callers and
// tests can see which ABIs Docker would allow but this filter denies.
func profileSubArches(archMap []dockerprofile.Architecture) []specs.Arch {
	for _, a := range archMap {
		if a.Arch == nativeSpecArch {
			return a.SubArches
		}
	}
	return nil
}
