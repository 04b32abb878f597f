//go:build linux && amd64

package seccomp

import (
	"errors"
	"fmt"
	"slices"

	dockerprofile "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// profileEnv is what the profile's conditional rules (includes/excludes) are
// evaluated against. Docker evaluates them per container; a sandbox always has
// the same capabilities and runs on this host's kernel, so the environment is
// fixed per process.
type profileEnv struct {
	arch   string                      // profile arch name, e.g. "amd64"
	caps   []string                    // capability bounding set
	kernel dockerprofile.KernelVersion // running kernel
}

// sandboxEnv returns the environment sandboxed code runs in: Docker's default
// capabilities (the engine drops the bounding set to exactly those), the
// running kernel and the native architecture.
func sandboxEnv() (profileEnv, error) {
	kernel, err := runningKernel()
	if err != nil {
		return profileEnv{}, err
	}
	return profileEnv{
		arch:   profileArch,
		caps:   slices.Clone(DefaultCapabilityNames),
		kernel: kernel,
	}, nil
}

// applicableRules returns the profile's rules that apply in env, as OCI
// syscall rules. It mirrors moby's setupSeccomp (GetDefaultProfile) so the
// sandbox gets the rule set Docker would give a container with the same
// capabilities on the same kernel; a test cross-checks the two. It is written
// out rather than calling GetDefaultProfile so the kernel version can be
// injected in tests.
func applicableRules(prof *dockerprofile.Seccomp, env profileEnv) ([]specs.LinuxSyscall, error) {
	if len(prof.Architectures) != 0 && len(prof.ArchMap) != 0 {
		return nil, errors.New("profile specifies both architectures and archMap")
	}
	if len(prof.LinuxSeccomp.Syscalls) != 0 {
		// Docker ignores this embedded field's rules too, but silently
		// dropping allow-or-deny rules is not something to do quietly.
		return nil, errors.New("profile uses LinuxSeccomp.Syscalls; rules belong in Syscalls")
	}
	var out []specs.LinuxSyscall
	for i, call := range prof.Syscalls {
		if call == nil || !env.applies(call) {
			continue
		}
		rule := call.LinuxSyscall
		if call.Name != "" {
			if len(rule.Names) != 0 {
				return nil, fmt.Errorf("profile rule %d has both name and names", i)
			}
			rule.Names = []string{call.Name}
		}
		out = append(out, rule)
	}
	return out, nil
}

// applies reports whether a conditional rule is part of the profile in env:
// excluded if any excluded arch/cap/kernel matches, included only if every
// included condition holds (all listed caps present, arch listed, kernel at
// least minKernel).
func (env profileEnv) applies(call *dockerprofile.Syscall) bool {
	if ex := call.Excludes; ex != nil {
		if slices.Contains(ex.Arches, env.arch) {
			return false
		}
		for _, c := range ex.Caps {
			if slices.Contains(env.caps, c) {
				return false
			}
		}
		if ex.MinKernel != nil && kernelAtLeast(env.kernel, *ex.MinKernel) {
			return false
		}
	}
	if in := call.Includes; in != nil {
		if len(in.Arches) > 0 && !slices.Contains(in.Arches, env.arch) {
			return false
		}
		for _, c := range in.Caps {
			if !slices.Contains(env.caps, c) {
				return false
			}
		}
		if in.MinKernel != nil && !kernelAtLeast(env.kernel, *in.MinKernel) {
			return false
		}
	}
	return true
}
