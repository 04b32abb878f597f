// Package seccomp builds the seccomp filter that confines sandboxed code.
// The engine compiles it once (Program) and sends it to each sandbox's init,
// which installs it with package bpfload before any user code runs.
//
// The filter is Docker's default seccomp profile (moby/profiles/seccomp
// DefaultProfile), evaluated for the sandbox's fixed environment — Docker's
// default capability set (DefaultCapabilities), the running kernel and
// x86_64 — and then made stricter: syscalls a sandbox has no business with
// are denied even where Docker would allow them (deny.go). The package never
// loosens Docker's profile: every step that cannot be translated exactly errs
// towards denying, and a test compares the compiled filter with the profile
// for every syscall over many argument values.
//
// Why a hand-written translation: Docker's profile is an OCI-style rule list
// that runc turns into BPF through libseccomp. No Go library converts such a
// profile to BPF without cgo and libseccomp, and ScratchRun stays pure Go, so
// this package evaluates the profile's include/exclude conditions itself
// (mirroring moby's setupSeccomp) and compiles the rules with
// github.com/elastic/go-seccomp-bpf, a pure-Go BPF generator. Version 1.6.0
// of that library miscompiles rules with argument conditions (see
// assemble.go), so the few syscalls that have them (clone, socket,
// personality) are compiled by this package; go-seccomp-bpf compiles
// everything else, including the architecture check.
//
// Only linux/amd64 is supported. The compiled filter checks the architecture
// first: syscalls made through the 32-bit ABI (int $0x80, AUDIT_ARCH_I386) get
// the default action (EPERM) and x32 syscalls get ENOSYS, so neither can be
// used to reach a syscall that the x86_64 rules deny.
package seccomp
