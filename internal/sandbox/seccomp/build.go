//go:build linux && amd64

package seccomp

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	seccompbpf "github.com/elastic/go-seccomp-bpf"
	dockerprofile "github.com/moby/profiles/seccomp"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// bpfMaxInsns is the kernel's limit on classic BPF program length.
const bpfMaxInsns = 4096

// rule is one translated rule: the named syscalls whose arguments match args
// get action.
type rule struct {
	action seccompbpf.Action
	names  []string
	args   argMatch
}

// compiled is the filter for one environment, in every form callers need.
type compiled struct {
	policy  seccompbpf.Policy // go-seccomp-bpf policy the program was assembled from
	insts   []bpf.Instruction // assembled program, for inspection and tests
	program []unix.SockFilter // the same program in the kernel's format
	unknown []string          // profile syscall names missing from the x86_64 table
	subArch []string          // ABIs Docker's archMap adds that the filter denies
}

// compile translates prof for env, adds the extra denials and assembles the
// result.
func compile(prof *dockerprofile.Seccomp, env profileEnv) (*compiled, error) {
	def, err := defaultAction(prof)
	if err != nil {
		return nil, err
	}
	specRules, err := applicableRules(prof, env)
	if err != nil {
		return nil, err
	}
	rules := extraRules()
	for _, r := range specRules {
		action, err := translateAction(r)
		if err != nil {
			return nil, fmt.Errorf("syscalls %v: %w", r.Names, err)
		}
		rules = append(rules, rule{action: action, names: r.Names, args: translateArgs(r.Args, permits(action))})
	}
	groups, unknown := groupRules(rules)
	if len(unknown) > 0 {
		// Skipping a name cannot loosen the filter: the default action
		// denies (defaultAction insists), so a syscall that no rule names
		// is refused. In Docker's profile these are other architectures'
		// syscalls (chown32, _llseek, ...) or ones newer than the library's
		// table, all in allow rules; a test verifies that.
		slog.Debug("seccomp: skipping syscalls unknown on x86_64", "names", unknown)
	}

	c := &compiled{
		policy:  seccompbpf.Policy{DefaultAction: def, Syscalls: groups},
		unknown: unknown,
	}
	for _, a := range profileSubArches(prof.ArchMap) {
		c.subArch = append(c.subArch, string(a))
	}
	if len(c.subArch) > 0 {
		slog.Debug("seccomp: profile also allows these ABIs; the filter denies them", "arches", c.subArch)
	}
	if c.insts, err = assemble(c.policy); err != nil {
		return nil, fmt.Errorf("assemble policy: %w", err)
	}
	raw, err := bpf.Assemble(c.insts)
	if err != nil {
		return nil, fmt.Errorf("assemble BPF: %w", err)
	}
	if len(raw) > bpfMaxInsns {
		return nil, fmt.Errorf("filter has %d instructions, kernel limit is %d", len(raw), bpfMaxInsns)
	}
	c.program = make([]unix.SockFilter, len(raw))
	for i, in := range raw {
		c.program[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	return c, nil
}

// groupRules turns rules into go-seccomp-bpf syscall groups. It returns the
// names that are not x86_64 syscalls, which are left out.
//
// go-seccomp-bpf evaluates groups in order and the first matching group
// decides, whereas an OCI profile is an unordered set. Rules are therefore
// emitted strictest action first (extra denials ahead of the profile's own on
// ties), one group per action; that way every deny precedes every allow. Among
// denials of equal rank (EPERM vs ENOSYS) the earlier group wins; both deny.
//
// Within a group, syscalls are sorted by number (the low numbers are the hot
// ones: read, write, mmap, ...) and a syscall's rules are merged: any
// unconditional rule makes it unconditional, otherwise its condition sets are
// ORed. A syscall already matched unconditionally by an earlier group is left
// out of later groups, where it could never match; this also keeps denied
// syscalls out of the allow groups altogether.
func groupRules(rules []rule) ([]seccompbpf.SyscallGroup, []string) {
	rules = slices.Clone(rules)
	slices.SortStableFunc(rules, func(a, b rule) int {
		return cmp.Compare(strictness(b.action), strictness(a.action))
	})

	type builder struct {
		action seccompbpf.Action
		match  map[int]argMatch
	}
	var builders []*builder
	byAction := map[seccompbpf.Action]*builder{}
	unknown := map[string]bool{}
	for _, r := range rules {
		b := byAction[r.action]
		if b == nil {
			b = &builder{action: r.action, match: map[int]argMatch{}}
			byAction[r.action] = b
			builders = append(builders, b)
		}
		if !r.args.always && len(r.args.sets) == 0 {
			continue // can never match
		}
		for _, name := range r.names {
			nr, ok := nativeSyscalls.SyscallNames[name]
			if !ok {
				unknown[name] = true
				continue
			}
			b.match[nr] = b.match[nr].or(r.args)
		}
	}

	var groups []seccompbpf.SyscallGroup
	decided := map[int]bool{}
	for _, b := range builders {
		g := seccompbpf.SyscallGroup{Action: b.action}
		var always []int
		for _, nr := range slices.Sorted(maps.Keys(b.match)) {
			if decided[nr] {
				continue
			}
			name := nativeSyscalls.SyscallNumbers[nr]
			m := b.match[nr]
			if m.always {
				g.Names = append(g.Names, name)
				always = append(always, nr)
				continue
			}
			for _, set := range m.sets {
				g.NamesWithCondtions = append(g.NamesWithCondtions, seccompbpf.NameWithConditions{Name: name, Conditions: set})
			}
		}
		for _, nr := range always {
			decided[nr] = true
		}
		if len(g.Names)+len(g.NamesWithCondtions) > 0 {
			groups = append(groups, g)
		}
	}
	return groups, slices.Sorted(maps.Keys(unknown))
}
