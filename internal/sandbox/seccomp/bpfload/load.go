// Package bpfload installs an already compiled seccomp BPF program. It is
// the only seccomp code a sandbox's init carries: compiling Docker's profile
// happens once, in the engine (package seccomp), and the program travels to
// init as data, which keeps init small and its start fast.
package bpfload

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Install sets no_new_privs and loads prog into every thread of the calling
// process (SECCOMP_FILTER_FLAG_TSYNC). After it returns, every existing
// thread, every thread created later and every child is filtered; the filter
// cannot be removed. Each call stacks another filter, so call it once.
func Install(prog []unix.SockFilter) error {
	if len(prog) == 0 {
		return errors.New("seccomp: empty filter program")
	}
	// prctl and seccomp act on the calling thread; TSYNC copies both the
	// filter and no_new_privs to the others, so both calls must come from
	// the same thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: set no_new_privs: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	tid, _, errno := unix.Syscall(unix.SYS_SECCOMP,
		unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(&fprog)
	if errno != 0 {
		return fmt.Errorf("seccomp: load filter: %w", errno)
	}
	// With TSYNC the kernel reports a thread it could not synchronise by
	// returning its TID, not an errno; nothing was installed then.
	if tid != 0 {
		return fmt.Errorf("seccomp: load filter: thread %d could not be synchronized", tid)
	}
	return nil
}

// instructionSize is the size of one struct sock_filter.
const instructionSize = 8

// Encode packs prog as the kernel lays it out (struct sock_filter, native
// byte order). The engine sends it to init this way: as JSON objects the
// program was 19 KB that every sandbox's init spent a millisecond decoding.
func Encode(prog []unix.SockFilter) []byte {
	out := make([]byte, 0, len(prog)*instructionSize)
	for _, ins := range prog {
		out = binary.NativeEndian.AppendUint16(out, ins.Code)
		out = append(out, ins.Jt, ins.Jf)
		out = binary.NativeEndian.AppendUint32(out, ins.K)
	}
	return out
}

// InstallEncoded installs a program packed by Encode (see Install).
func InstallEncoded(b []byte) error {
	prog, err := Decode(b)
	if err != nil {
		return err
	}
	return Install(prog)
}

// Decode unpacks what Encode packed.
func Decode(b []byte) ([]unix.SockFilter, error) {
	if len(b)%instructionSize != 0 {
		return nil, fmt.Errorf("seccomp: program of %d bytes is not whole instructions", len(b))
	}
	prog := make([]unix.SockFilter, len(b)/instructionSize)
	for i := range prog {
		ins := b[i*instructionSize:]
		prog[i] = unix.SockFilter{Code: binary.NativeEndian.Uint16(ins), Jt: ins[2], Jf: ins[3], K: binary.NativeEndian.Uint32(ins[4:])}
	}
	return prog, nil
}
