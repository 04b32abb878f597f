//go:build linux && amd64

package seccomp

import (
	"fmt"
	"slices"
	"sync"

	seccompbpf "github.com/elastic/go-seccomp-bpf"
	dockerprofile "github.com/moby/profiles/seccomp"
)

// sandboxFilter is the filter for this process's environment. The
// environment (capabilities, kernel, architecture) cannot change while the
// process runs, so it is built once: each backend asks for it (Program) when
// it starts, and every sandbox's init installs that compiled program.
var sandboxFilter = sync.OnceValues(func() (*compiled, error) {
	env, err := sandboxEnv()
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	c, err := compile(dockerprofile.DefaultProfile(), env)
	if err != nil {
		return nil, fmt.Errorf("seccomp: build filter from Docker's default profile: %w", err)
	}
	return c, nil
})

// Policy returns the sandbox's seccomp policy: Docker's default profile
// evaluated for DefaultCapabilities, the running kernel and x86_64, plus the
// extra denials, as a go-seccomp-bpf policy. Groups are in evaluation order
// (the first match decides; all denials come before all allowances). It is
// built once per process; each call returns a fresh copy, so callers may
// inspect or modify it without affecting what Install loads.
//
// It describes the filter; load it only through Install. Calling its
// Assemble method, or go-seccomp-bpf's LoadFilter, yields a wrong program
// (go-seccomp-bpf v1.6.0 miscompiles the argument conditions; see
// assemble.go), one that would, among other things, stop the Go runtime from
// creating threads.
func Policy() (*seccompbpf.Policy, error) {
	c, err := sandboxFilter()
	if err != nil {
		return nil, err
	}
	return clonePolicy(c.policy), nil
}

// clonePolicy deep-copies p's exported fields. The unexported architecture
// is left unset, which go-seccomp-bpf resolves to the native one.
func clonePolicy(p seccompbpf.Policy) *seccompbpf.Policy {
	out := &seccompbpf.Policy{DefaultAction: p.DefaultAction}
	for _, g := range p.Syscalls {
		cg := seccompbpf.SyscallGroup{Action: g.Action, Names: slices.Clone(g.Names)}
		for _, nc := range g.NamesWithCondtions {
			cg.NamesWithCondtions = append(cg.NamesWithCondtions, seccompbpf.NameWithConditions{
				Name:       nc.Name,
				Conditions: slices.Clone(nc.Conditions),
			})
		}
		out.Syscalls = append(out.Syscalls, cg)
	}
	return out
}
