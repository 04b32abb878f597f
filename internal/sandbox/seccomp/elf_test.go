//go:build linux && amd64

package seccomp

import (
	"bytes"
	"encoding/binary"
)

// syscallELF returns a minimal static x86-64 Linux executable that makes one
// syscall and exits with the negated result: 0 when the call returned 0,
// errno when it failed (1 for EPERM). With int80 the call goes through the
// 32-bit ABI (int $0x80, which the kernel reports to seccomp as
// AUDIT_ARCH_I386) with arg in ebx; otherwise through the native syscall
// instruction with arg in rdi. It lets the tests prove the i386 ABI is
// filtered without cgo or a 32-bit toolchain; the native variant checks the
// executable itself.
func syscallELF(int80 bool, nr, arg uint32) []byte {
	const (
		base     = 0x400000
		ehdrSize = 64
		phdrSize = 56
	)
	le := binary.LittleEndian
	var code bytes.Buffer
	code.WriteByte(0xb8) // mov eax, nr
	code.Write(le.AppendUint32(nil, nr))
	if int80 {
		code.WriteByte(0xbb) // mov ebx, arg
		code.Write(le.AppendUint32(nil, arg))
		code.Write([]byte{
			0x31, 0xc9, // xor ecx, ecx
			0x31, 0xd2, // xor edx, edx
			0xcd, 0x80, // int $0x80
		})
	} else {
		code.WriteByte(0xbf) // mov edi, arg
		code.Write(le.AppendUint32(nil, arg))
		code.Write([]byte{
			0x31, 0xf6, // xor esi, esi
			0x31, 0xd2, // xor edx, edx
			0x0f, 0x05, // syscall
		})
	}
	code.Write([]byte{
		0xf7, 0xd8, // neg eax
		0x89, 0xc7, // mov edi, eax
		0xb8, 60, 0, 0, 0, // mov eax, 60 (x86-64 exit)
		0x0f, 0x05, // syscall
	})
	size := uint64(ehdrSize + phdrSize + code.Len())

	var f bytes.Buffer
	f.Write([]byte{0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* LE */, 1 /* version */, 0 /* SysV */})
	f.Write(make([]byte, 8))
	f.Write(le.AppendUint16(nil, 2))  // e_type: ET_EXEC
	f.Write(le.AppendUint16(nil, 62)) // e_machine: EM_X86_64
	f.Write(le.AppendUint32(nil, 1))  // e_version
	f.Write(le.AppendUint64(nil, base+ehdrSize+phdrSize))
	f.Write(le.AppendUint64(nil, ehdrSize)) // e_phoff
	f.Write(le.AppendUint64(nil, 0))        // e_shoff
	f.Write(le.AppendUint32(nil, 0))        // e_flags
	f.Write(le.AppendUint16(nil, ehdrSize))
	f.Write(le.AppendUint16(nil, phdrSize))
	f.Write(le.AppendUint16(nil, 1)) // e_phnum
	f.Write(le.AppendUint16(nil, 0)) // e_shentsize
	f.Write(le.AppendUint16(nil, 0)) // e_shnum
	f.Write(le.AppendUint16(nil, 0)) // e_shstrndx
	// One PT_LOAD segment, readable and executable, mapping the whole file.
	f.Write(le.AppendUint32(nil, 1)) // p_type: PT_LOAD
	f.Write(le.AppendUint32(nil, 5)) // p_flags: R|X
	f.Write(le.AppendUint64(nil, 0)) // p_offset
	f.Write(le.AppendUint64(nil, base))
	f.Write(le.AppendUint64(nil, base))
	f.Write(le.AppendUint64(nil, size))
	f.Write(le.AppendUint64(nil, size))
	f.Write(le.AppendUint64(nil, 0x1000))
	f.Write(code.Bytes())
	return f.Bytes()
}
