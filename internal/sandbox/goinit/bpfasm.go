package goinit

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
)

// offArg is the offset of argument i's low 32 bits (little endian).
func offArg(i int) uint32 { return 16 + 8*uint32(i) }

// bpfAsm writes a small classic BPF program with forward jumps to labels,
// for the one filter init builds itself (shieldProgram); the sandbox's
// filter is compiled in the engine (package seccomp).
type bpfAsm struct {
	prog   []bpfInsn
	labels []int // each label's instruction, -1 until placed
}

// bpfInsn is an instruction whose jumps name labels (fallThrough: the following
// instruction).
type bpfInsn struct {
	code   uint16
	k      uint32
	jt, jf int
}

const fallThrough = -1

func (a *bpfAsm) label() int {
	a.labels = append(a.labels, -1)
	return len(a.labels) - 1
}

func (a *bpfAsm) place(l int) { a.labels[l] = len(a.prog) }

func (a *bpfAsm) emit(code uint16, k uint32, jt, jf int) {
	a.prog = append(a.prog, bpfInsn{code: code, k: k, jt: jt, jf: jf})
}

// load loads the 32-bit word at off of seccomp_data.
func (a *bpfAsm) load(off uint32) {
	a.emit(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, off, fallThrough, fallThrough)
}

// jumpIf jumps to l when the accumulator is k.
func (a *bpfAsm) jumpIf(k uint32, l int) {
	a.emit(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, k, l, fallThrough)
}

// jumpUnless jumps to l when the accumulator is not k.
func (a *bpfAsm) jumpUnless(k uint32, l int) {
	a.emit(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, k, fallThrough, l)
}

// jumpAbove jumps to l when the accumulator is above k (unsigned).
func (a *bpfAsm) jumpAbove(k uint32, l int) {
	a.emit(unix.BPF_JMP|unix.BPF_JGT|unix.BPF_K, k, l, fallThrough)
}

// jumpAtLeast jumps to yes when the accumulator is at least k (unsigned),
// else to no.
func (a *bpfAsm) jumpAtLeast(k uint32, yes, no int) {
	a.emit(unix.BPF_JMP|unix.BPF_JGE|unix.BPF_K, k, yes, no)
}

func (a *bpfAsm) jump(l int) { a.emit(unix.BPF_JMP|unix.BPF_JA, 0, l, fallThrough) }

func (a *bpfAsm) ret(k uint32) { a.emit(unix.BPF_RET|unix.BPF_K, k, fallThrough, fallThrough) }

// assemble resolves the labels; a program this file writes wrongly (a
// label never placed, or behind its jump) panics.
func (a *bpfAsm) assemble() []unix.SockFilter {
	out := make([]unix.SockFilter, len(a.prog))
	offset := func(i, l int) uint32 {
		if l == fallThrough {
			return 0
		}
		at := a.labels[l]
		if at <= i || at-i-1 > 255 {
			panic(fmt.Sprintf("bpf: instruction %d jumps to label %d at %d", i, l, at))
		}
		return uint32(at - i - 1)
	}
	for i, in := range a.prog {
		f := unix.SockFilter{Code: in.code, K: in.k}
		if in.code == unix.BPF_JMP|unix.BPF_JA {
			f.K = offset(i, in.jt)
		} else if in.code&0x07 == unix.BPF_JMP {
			f.Jt, f.Jf = uint8(offset(i, in.jt)), uint8(offset(i, in.jf))
		}
		out[i] = f
	}
	return out
}
