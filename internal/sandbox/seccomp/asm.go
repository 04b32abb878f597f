//go:build linux && amd64

package seccomp

import (
	"fmt"
	"math"

	"golang.org/x/net/bpf"
)

// label names a position in an asm program. Classic BPF only jumps forward,
// so a label is placed after the jumps that use it.
type label int

// next is the label of the following instruction (a skip of 0).
const next label = -1

// asm is a minimal classic-BPF assembler with forward labels, used for the
// part of the filter this package generates itself (see assemble.go).
type asm struct {
	items  []asmItem
	labels []int // instruction index per label, -1 until placed
}

// asmItem is a resolved instruction or a jump still naming labels.
type asmItem struct {
	inst   bpf.Instruction // set unless this is a jump
	always bool            // unconditional jump to t
	cond   bpf.JumpTest    // conditional jump: to t if true, f if false
	val    uint32
	t, f   label
}

func (a *asm) newLabel() label {
	a.labels = append(a.labels, -1)
	return label(len(a.labels) - 1)
}

// place binds l to the next instruction emitted.
func (a *asm) place(l label) { a.labels[l] = len(a.items) }

func (a *asm) emit(in bpf.Instruction) { a.items = append(a.items, asmItem{inst: in}) }

// jumpIf compares A with val and continues at t if the test holds, else f.
func (a *asm) jumpIf(cond bpf.JumpTest, val uint32, t, f label) {
	a.items = append(a.items, asmItem{cond: cond, val: val, t: t, f: f})
}

// jump continues at l unconditionally; its 32-bit offset reaches anywhere.
func (a *asm) jump(l label) { a.items = append(a.items, asmItem{always: true, t: l}) }

// resolve returns the instructions with label offsets filled in. A
// conditional jump further than 255 instructions is an error rather than a
// silently wrong program; callers keep them local and use jump for distance.
func (a *asm) resolve() ([]bpf.Instruction, error) {
	out := make([]bpf.Instruction, len(a.items))
	for i, it := range a.items {
		if it.inst != nil {
			out[i] = it.inst
			continue
		}
		skip := func(l label) (int, error) {
			if l == next {
				return 0, nil
			}
			at := a.labels[l]
			if at < 0 {
				return 0, fmt.Errorf("bpf: label %d never placed", l)
			}
			if at <= i {
				return 0, fmt.Errorf("bpf: backward jump at %d", i)
			}
			return at - i - 1, nil
		}
		t, err := skip(it.t)
		if err != nil {
			return nil, err
		}
		if it.always {
			out[i] = bpf.Jump{Skip: uint32(t)}
			continue
		}
		f, err := skip(it.f)
		if err != nil {
			return nil, err
		}
		if t > math.MaxUint8 || f > math.MaxUint8 {
			return nil, fmt.Errorf("bpf: conditional jump at %d too far (%d, %d)", i, t, f)
		}
		out[i] = bpf.JumpIf{Cond: it.cond, Val: it.val, SkipTrue: uint8(t), SkipFalse: uint8(f)}
	}
	return out, nil
}
