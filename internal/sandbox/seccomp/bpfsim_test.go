//go:build linux && amd64

package seccomp

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// call is one syscall as a seccomp filter sees it (struct seccomp_data).
type call struct {
	arch uint32
	nr   uint32
	args [maxArgs]uint64
}

// native returns an x86_64 call of nr with the given leading arguments.
func native(nr int, args ...uint64) call {
	c := call{arch: unix.AUDIT_ARCH_X86_64, nr: uint32(nr)}
	copy(c.args[:], args)
	return c
}

// simulator runs a seccomp program in x/net/bpf's BPF interpreter, so the
// exact instructions the kernel would get can be checked for any input
// without installing them.
type simulator struct{ vm *bpf.VM }

func newSimulator(t testing.TB, insts []bpf.Instruction) simulator {
	t.Helper()
	vm, err := bpf.NewVM(insts)
	if err != nil {
		t.Fatalf("NewVM: %v", err)
	}
	return simulator{vm}
}

// programSimulator runs a program in the kernel's format: it goes back
// through bpf.Disassemble so what is checked is exactly what Install loads.
func programSimulator(t testing.TB, prog []unix.SockFilter) simulator {
	t.Helper()
	raw := make([]bpf.RawInstruction, len(prog))
	for i, f := range prog {
		raw[i] = bpf.RawInstruction{Op: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K}
	}
	insts, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("program does not disassemble")
	}
	return newSimulator(t, insts)
}

// run returns the filter's verdict (SECCOMP_RET_*) for c. The kernel loads
// seccomp_data words in native (little-endian) order while the interpreter
// loads big-endian, so each 32-bit word is stored big-endian at its native
// offset; for a 64-bit argument the low word is at the lower offset.
func (s simulator) run(t testing.TB, c call) uint32 {
	t.Helper()
	var data [64]byte
	binary.BigEndian.PutUint32(data[0:], c.nr)
	binary.BigEndian.PutUint32(data[4:], c.arch)
	for i, a := range c.args {
		binary.BigEndian.PutUint32(data[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(data[20+8*i:], uint32(a>>32))
	}
	v, err := s.vm.Run(data[:])
	if err != nil {
		t.Fatalf("run filter: %v", err)
	}
	return uint32(v)
}

// Verdict helpers.
const (
	retAllow = unix.SECCOMP_RET_ALLOW
	retEPERM = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retNOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

// lets reports whether a verdict lets the syscall run.
func lets(v uint32) bool {
	a := v & unix.SECCOMP_RET_ACTION_FULL
	return a == unix.SECCOMP_RET_ALLOW || a == unix.SECCOMP_RET_LOG
}
