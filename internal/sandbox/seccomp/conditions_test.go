//go:build linux && amd64

package seccomp

import (
	"fmt"
	"testing"

	seccompbpf "github.com/elastic/go-seccomp-bpf"
	dockerprofile "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// compileRules assembles rules the way compile does, with an EPERM default.
func compileRules(t *testing.T, rules ...rule) simulator {
	t.Helper()
	// go-seccomp-bpf rejects a policy without groups, which rules that can
	// never match produce; a filler group that returns the default keeps it
	// assemblable without changing any verdict.
	filler := rule{action: errnoAction(unix.EPERM), names: []string{"getppid"}, args: matchAlways}
	groups, _ := groupRules(append(rules, filler))
	p := seccompbpf.Policy{DefaultAction: seccompbpf.ActionErrno, Syscalls: groups}
	insts, err := assemble(p)
	if err != nil {
		t.Fatalf("assemble: %v", err)
	}
	return newSimulator(t, insts)
}

// interesting 64-bit values: around the 32-bit halves, sign bits and the
// namespace clone flags.
var interesting = []uint64{
	0, 1, 2, 3, 0x11, 0x7fffffff, 0x80000000, 0xffffffff,
	1 << 32, 1<<32 | 1, 1<<32 | 0xffffffff, 0xffffffff00000000, ^uint64(0),
	namespaceCloneFlags, namespaceCloneFlags | 0x11, unix.CLONE_NEWUSER, unix.CLONE_NEWUSER | 1<<40,
}

// libseccompHolds is libseccomp's semantics of one comparison on a 64-bit
// architecture, the reference the translation must reproduce.
func libseccompHolds(a specs.LinuxSeccompArg, v uint64) bool {
	switch a.Op {
	case specs.OpEqualTo:
		return v == a.Value
	case specs.OpNotEqual:
		return v != a.Value
	case specs.OpGreaterThan:
		return v > a.Value
	case specs.OpGreaterEqual:
		return v >= a.Value
	case specs.OpLessThan:
		return v < a.Value
	case specs.OpLessEqual:
		return v <= a.Value
	case specs.OpMaskedEqual:
		return v&a.Value == a.ValueTwo
	}
	panic("unknown op " + a.Op)
}

// TestTranslateArgMatchesLibseccomp runs every operator, for every pair of
// interesting operand and argument values and two argument positions,
// through the assembled BPF and compares with libseccomp's semantics.
func TestTranslateArgMatchesLibseccomp(t *testing.T) {
	ops := []specs.LinuxSeccompOperator{
		specs.OpEqualTo, specs.OpNotEqual, specs.OpGreaterThan, specs.OpGreaterEqual,
		specs.OpLessThan, specs.OpLessEqual, specs.OpMaskedEqual,
	}
	getpid := unix.SYS_GETPID
	for _, op := range ops {
		for _, index := range []uint{0, 5} {
			for _, value := range interesting {
				twos := []uint64{0}
				if op == specs.OpMaskedEqual {
					twos = interesting
				}
				for _, two := range twos {
					arg := specs.LinuxSeccompArg{Index: index, Op: op, Value: value, ValueTwo: two}
					name := fmt.Sprintf("%s[%d] %#x,%#x", op, index, value, two)
					sim := compileRules(t, rule{
						action: seccompbpf.ActionAllow,
						names:  []string{"getpid"},
						args:   translateArgs([]specs.LinuxSeccompArg{arg}, true),
					})
					for _, v := range interesting {
						c := native(getpid)
						c.args[index] = v
						c.args[(index+1)%maxArgs] = ^v // neighbours must not matter
						if got, want := lets(sim.run(t, c)), libseccompHolds(arg, v); got != want {
							t.Errorf("%s on %#x: allowed=%v, want %v", name, v, got, want)
						}
					}
				}
			}
		}
	}
}

// TestTranslateArgsFailsClosed checks the fallbacks for comparisons
// go-seccomp-bpf cannot express and for repeated argument indexes.
func TestTranslateArgsFailsClosed(t *testing.T) {
	bogus := specs.LinuxSeccompArg{Index: 0, Op: "SCMP_CMP_BOGUS", Value: 1}
	tooFar := specs.LinuxSeccompArg{Index: maxArgs, Op: specs.OpEqualTo, Value: 1}
	eq := func(i uint, v uint64) specs.LinuxSeccompArg {
		return specs.LinuxSeccompArg{Index: i, Op: specs.OpEqualTo, Value: v}
	}

	for _, bad := range []specs.LinuxSeccompArg{bogus, tooFar} {
		// An allow rule that cannot be expressed never matches ...
		if m := translateArgs([]specs.LinuxSeccompArg{bad}, true); m.always || len(m.sets) != 0 {
			t.Errorf("allow %+v: %+v, want never", bad, m)
		}
		// ... a deny rule drops the comparison, widening the deny.
		if m := translateArgs([]specs.LinuxSeccompArg{bad}, false); !m.always {
			t.Errorf("deny %+v: %+v, want always", bad, m)
		}
		m := translateArgs([]specs.LinuxSeccompArg{bad, eq(1, 7)}, false)
		if m.always || len(m.sets) != 1 || len(m.sets[0]) != 1 || m.sets[0][0].Argument != 1 {
			t.Errorf("deny %+v && arg1==7: %+v, want just arg1==7", bad, m)
		}
	}

	// Repeated index: allow rules AND (narrower), deny rules OR (wider).
	twice := []specs.LinuxSeccompArg{eq(0, 1), eq(0, 2)}
	allow := compileRules(t, rule{action: seccompbpf.ActionAllow, names: []string{"getpid"}, args: translateArgs(twice, true)})
	deny := compileRules(t,
		rule{action: errnoAction(unix.EACCES), names: []string{"getpid"}, args: translateArgs(twice, false)},
		rule{action: seccompbpf.ActionAllow, names: []string{"getpid"}, args: matchAlways},
	)
	for _, v := range []uint64{1, 2, 3} {
		if got := allow.run(t, native(unix.SYS_GETPID, v)); lets(got) {
			t.Errorf("allow arg0==1 && arg0==2 allowed %d", v)
		}
		wantDenied := v == 1 || v == 2
		if got := deny.run(t, native(unix.SYS_GETPID, v)); (got == unix.SECCOMP_RET_ERRNO|uint32(unix.EACCES)) != wantDenied {
			t.Errorf("deny arg0==1 || arg0==2 on %d: %#x", v, got)
		}
	}

	// MASKED_EQ wanting bits outside its mask can never hold.
	never := specs.LinuxSeccompArg{Op: specs.OpMaskedEqual, Value: 0xf0, ValueTwo: 0x01}
	if m := translateArgs([]specs.LinuxSeccompArg{never}, true); m.always || len(m.sets) != 0 {
		t.Errorf("impossible MASKED_EQ: %+v", m)
	}
}

func TestTranslateAction(t *testing.T) {
	u := func(v uint) *uint { return &v }
	cases := []struct {
		rule specs.LinuxSyscall
		want seccompbpf.Action
	}{
		{specs.LinuxSyscall{Action: specs.ActAllow}, seccompbpf.ActionAllow},
		{specs.LinuxSyscall{Action: specs.ActErrno}, errnoAction(unix.EPERM)},
		{specs.LinuxSyscall{Action: specs.ActErrno, ErrnoRet: u(uint(unix.ENOSYS))}, errnoAction(unix.ENOSYS)},
		{specs.LinuxSyscall{Action: specs.ActErrno, ErrnoRet: u(0)}, errnoAction(unix.EPERM)},
		{specs.LinuxSyscall{Action: specs.ActTrace}, errnoAction(unix.EPERM)},
		{specs.LinuxSyscall{Action: specs.ActNotify}, errnoAction(unix.EPERM)},
		{specs.LinuxSyscall{Action: specs.ActKill}, seccompbpf.ActionKillThread},
		{specs.LinuxSyscall{Action: specs.ActKillProcess}, seccompbpf.ActionKillProcess},
		{specs.LinuxSyscall{Action: specs.ActTrap}, seccompbpf.ActionTrap},
	}
	for _, c := range cases {
		got, err := translateAction(c.rule)
		if err != nil || got != c.want {
			t.Errorf("translateAction(%s, %v) = %#x, %v; want %#x", c.rule.Action, c.rule.ErrnoRet, uint32(got), err, uint32(c.want))
		}
	}
	if _, err := translateAction(specs.LinuxSyscall{Action: "SCMP_ACT_BOGUS"}); err == nil {
		t.Error("unknown action accepted")
	}
}

// The profile's default action is one that denies, translated as a rule's
// would be; one that lets calls run is refused.
func TestDefaultAction(t *testing.T) {
	for action, want := range map[specs.LinuxSeccompAction]seccompbpf.Action{
		specs.ActErrno:       seccompbpf.ActionErrno,
		specs.ActKill:        seccompbpf.ActionKillThread,
		specs.ActKillThread:  seccompbpf.ActionKillThread,
		specs.ActKillProcess: seccompbpf.ActionKillProcess,
		specs.ActTrap:        seccompbpf.ActionTrap,
	} {
		got, err := defaultAction(&dockerprofile.Seccomp{LinuxSeccomp: specs.LinuxSeccomp{DefaultAction: action}})
		if err != nil || got != want {
			t.Errorf("defaultAction(%s) = %#x, %v; want %#x", action, uint32(got), err, uint32(want))
		}
	}
	for _, action := range []specs.LinuxSeccompAction{specs.ActAllow, specs.ActLog, "SCMP_ACT_BOGUS"} {
		if _, err := defaultAction(&dockerprofile.Seccomp{LinuxSeccomp: specs.LinuxSeccomp{DefaultAction: action}}); err == nil {
			t.Errorf("default action %s accepted", action)
		}
	}
}
