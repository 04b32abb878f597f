//go:build linux && amd64

package seccomp

import (
	"errors"
	"fmt"
	"slices"

	seccompbpf "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Offsets in struct seccomp_data.
const (
	dataNr   = 0
	dataArch = 4
	dataArgs = 16
)

// assemble compiles p to BPF with go-seccomp-bpf's semantics (groups are
// tried in order, the first match decides, otherwise the default action).
//
// It cannot simply call p.Assemble: go-seccomp-bpf v1.6.0 miscompiles
// argument conditions. After a syscall's argument checks fail it continues
// with the next syscall comparisons while the BPF accumulator still holds the
// last argument word instead of the syscall number. With Docker's profile
// that denies clone(2) for every thread the Go runtime creates (breaking
// Install's caller) and allows socket(56, ...) by matching it against
// clone's rule (loosening the profile). A test pins both symptoms.
//
// So the work is split. Syscalls with only unconditional rules — all but a
// handful — are compiled by go-seccomp-bpf, whose code for them is correct
// and which also emits the architecture and x32 checks. Syscalls with any
// argument condition are compiled here (conditionalTail) into a block that
// replaces the library program's final "return default" instruction. Every
// path that used to reach that return (no unconditional rule matched, or a
// foreign architecture) now enters the block, which re-checks the
// architecture and reloads the syscall number before dispatching, so it is
// correct however it is entered.
func assemble(p seccompbpf.Policy) ([]bpf.Instruction, error) {
	conditional := map[string]bool{}
	for _, g := range p.Syscalls {
		for _, nc := range g.NamesWithCondtions {
			conditional[nc.Name] = true
		}
	}
	lib := seccompbpf.Policy{DefaultAction: p.DefaultAction}
	for _, g := range p.Syscalls {
		names := slices.DeleteFunc(slices.Clone(g.Names), func(n string) bool { return conditional[n] })
		if len(names) > 0 {
			lib.Syscalls = append(lib.Syscalls, seccompbpf.SyscallGroup{Action: g.Action, Names: names})
		}
	}
	head, err := lib.Assemble()
	if err != nil {
		return nil, err
	}
	ret, ok := head[len(head)-1].(bpf.RetConstant)
	if !ok {
		return nil, errors.New("go-seccomp-bpf program does not end with the default return")
	}
	tail, err := conditionalTail(p, conditional, ret.Val)
	if err != nil {
		return nil, err
	}
	return append(head[:len(head)-1], tail...), nil
}

// step is one rule for one syscall: if any set matches (or always), return
// action.
type step struct {
	action seccompbpf.Action
	always bool
	sets   []seccompbpf.ArgumentConditions
}

// conditionalTail compiles the syscalls in names, in number order, each to a
// self-contained block that ends in a return on every path:
//
//	    ld [arch]; jeq native, 1, 0; ja end
//	    ld [nr]
//	    jeq X, 1, 0; ja nextX; <X's rules in group order; ret default>
//	nextX: ...
//	end: ret default
//
// Because a block never falls through, argument loads cannot leak into the
// next syscall comparison. All conditional jumps stay within one condition
// set; the distances that can be long use ja.
func conditionalTail(p seccompbpf.Policy, names map[string]bool, defaultRet uint32) ([]bpf.Instruction, error) {
	var nrs []int
	for name := range names {
		n, ok := nativeSyscalls.SyscallNames[name]
		if !ok {
			return nil, fmt.Errorf("unknown syscall %q", name)
		}
		nrs = append(nrs, n)
	}
	slices.Sort(nrs)

	var a asm
	end := a.newLabel()
	native := a.newLabel()
	a.emit(bpf.LoadAbsolute{Off: dataArch, Size: 4})
	a.jumpIf(bpf.JumpEqual, nativeAuditArch, native, next)
	a.jump(end)
	a.place(native)
	a.emit(bpf.LoadAbsolute{Off: dataNr, Size: 4})
	for _, n := range nrs {
		name := nativeSyscalls.SyscallNumbers[n]
		block, skip := a.newLabel(), a.newLabel()
		a.jumpIf(bpf.JumpEqual, uint32(n), block, next)
		a.jump(skip)
		a.place(block)
		if err := a.rules(stepsFor(p, name), defaultRet); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		a.place(skip)
	}
	a.place(end)
	a.emit(bpf.RetConstant{Val: defaultRet})
	return a.resolve()
}

// stepsFor collects name's rules from p's groups in evaluation order.
func stepsFor(p seccompbpf.Policy, name string) []step {
	var steps []step
	for _, g := range p.Syscalls {
		if slices.Contains(g.Names, name) {
			steps = append(steps, step{action: g.Action, always: true})
			continue
		}
		var s step
		for _, nc := range g.NamesWithCondtions {
			if nc.Name == name {
				s.action = g.Action
				s.sets = append(s.sets, nc.Conditions)
			}
		}
		if len(s.sets) > 0 {
			steps = append(steps, s)
		}
	}
	return steps
}

// rules emits one syscall's block: each step's condition sets in order,
// returning the step's action on the first set that holds, and the default
// when none does.
func (a *asm) rules(steps []step, defaultRet uint32) error {
	for _, s := range steps {
		if s.always {
			a.emit(bpf.RetConstant{Val: retValue(s.action)})
			return nil
		}
		for _, set := range s.sets {
			fail := a.newLabel()
			for _, c := range set {
				if err := a.condition(c, fail); err != nil {
					return err
				}
			}
			a.emit(bpf.RetConstant{Val: retValue(s.action)})
			a.place(fail)
		}
	}
	a.emit(bpf.RetConstant{Val: defaultRet})
	return nil
}

// retValue is the filter return value of an action, with go-seccomp-bpf's
// convention that a bare ActionErrno means EPERM.
func retValue(a seccompbpf.Action) uint32 {
	if a == seccompbpf.ActionErrno {
		a |= seccompbpf.Action(unix.EPERM)
	}
	return uint32(a)
}

// condition emits a 64-bit comparison of one argument that falls through
// when c holds and jumps to fail otherwise. Arguments are two 32-bit words
// in native (little-endian) order; each comparison looks at the high word
// first and at the low word only when the high word does not decide.
func (a *asm) condition(c seccompbpf.Condition, fail label) error {
	if c.Argument >= maxArgs {
		return fmt.Errorf("argument %d out of range", c.Argument)
	}
	hi, lo := uint32(c.Value>>32), uint32(c.Value)
	ldHi := bpf.LoadAbsolute{Off: dataArgs + 8*c.Argument + 4, Size: 4}
	ldLo := bpf.LoadAbsolute{Off: dataArgs + 8*c.Argument, Size: 4}
	pass := a.newLabel()
	// ordered emits the pattern shared by <, <=, >, >=: a strict comparison
	// of the high words decides unless they are equal, then the low words
	// decide with loTest.
	ordered := func(strict, loTest bpf.JumpTest) {
		a.emit(ldHi)
		a.jumpIf(strict, hi, pass, next)
		a.jumpIf(bpf.JumpEqual, hi, next, fail)
		a.emit(ldLo)
		a.jumpIf(loTest, lo, next, fail)
	}
	switch c.Operation {
	case seccompbpf.Equal:
		a.emit(ldHi)
		a.jumpIf(bpf.JumpEqual, hi, next, fail)
		a.emit(ldLo)
		a.jumpIf(bpf.JumpEqual, lo, next, fail)
	case seccompbpf.NotEqual:
		a.emit(ldHi)
		a.jumpIf(bpf.JumpEqual, hi, next, pass)
		a.emit(ldLo)
		a.jumpIf(bpf.JumpEqual, lo, fail, next)
	case seccompbpf.GreaterThan:
		ordered(bpf.JumpGreaterThan, bpf.JumpGreaterThan)
	case seccompbpf.GreaterOrEqual:
		ordered(bpf.JumpGreaterThan, bpf.JumpGreaterOrEqual)
	case seccompbpf.LessThan:
		ordered(bpf.JumpLessThan, bpf.JumpLessThan)
	case seccompbpf.LessOrEqual:
		ordered(bpf.JumpLessThan, bpf.JumpLessOrEqual)
	case seccompbpf.BitsSet: // any bit of Value set
		a.emit(ldHi)
		a.jumpIf(bpf.JumpBitsSet, hi, pass, next)
		a.emit(ldLo)
		a.jumpIf(bpf.JumpBitsSet, lo, next, fail)
	case seccompbpf.BitsNotSet: // no bit of Value set
		a.emit(ldHi)
		a.jumpIf(bpf.JumpBitsSet, hi, fail, next)
		a.emit(ldLo)
		a.jumpIf(bpf.JumpBitsSet, lo, fail, next)
	default:
		return fmt.Errorf("unsupported operation %q", c.Operation)
	}
	a.place(pass)
	return nil
}
