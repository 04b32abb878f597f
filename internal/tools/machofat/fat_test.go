package main

import (
	"bytes"
	"debug/macho"
	"encoding/binary"
	"strings"
	"testing"
)

// thinMachO is the smallest 64-bit Mach-O file debug/macho reads: a
// header with no load commands, then pad bytes that stand for the code.
func thinMachO(cpu macho.Cpu, subCpu uint32, typ macho.Type, pad int) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, macho.FileHeader{Magic: macho.Magic64, Cpu: cpu, SubCpu: subCpu, Type: typ})
	binary.Write(&b, binary.LittleEndian, uint32(0)) // the 64-bit header's reserved word
	b.Write(bytes.Repeat([]byte{byte(cpu)}, pad))
	return b.Bytes()
}

// The universal binary is what debug/macho (and so macOS's loader, whose
// format it reads) takes for one: a slice per CPU, at aligned offsets,
// each byte for byte its input, with the input's CPU subtype.
func TestJoin(t *testing.T) {
	amd64 := thinMachO(macho.CpuAmd64, 3, macho.TypeExec, 5000)
	arm64 := thinMachO(macho.CpuArm64, 0, macho.TypeExec, 20000)
	fat, err := join([][]byte{amd64, arm64})
	if err != nil {
		t.Fatal(err)
	}
	ff, err := macho.NewFatFile(bytes.NewReader(fat))
	if err != nil {
		t.Fatal(err)
	}
	if len(ff.Arches) != 2 {
		t.Fatalf("%d slices, want 2", len(ff.Arches))
	}
	for i, want := range []struct {
		cpu    macho.Cpu
		subCpu uint32
		data   []byte
	}{{macho.CpuAmd64, 3, amd64}, {macho.CpuArm64, 0, arm64}} {
		a := ff.Arches[i]
		if a.Cpu != want.cpu || a.SubCpu != want.subCpu || a.File.Cpu != want.cpu {
			t.Errorf("slice %d: cpu %v/%d (file %v), want %v/%d", i, a.Cpu, a.SubCpu, a.File.Cpu, want.cpu, want.subCpu)
		}
		if a.Offset%(1<<sliceAlign) != 0 || a.Align != sliceAlign {
			t.Errorf("slice %d at %d, align %d: not on a 2^%d boundary", i, a.Offset, a.Align, sliceAlign)
		}
		if got := fat[a.Offset : a.Offset+a.Size]; !bytes.Equal(got, want.data) {
			t.Errorf("slice %d is not its input's bytes", i)
		}
	}
}

// What macOS could not load, or a fat file no tool reads, is refused,
// saying why.
func TestJoinRefused(t *testing.T) {
	amd64 := thinMachO(macho.CpuAmd64, 3, macho.TypeExec, 10)
	for _, c := range []struct {
		name string
		in   [][]byte
		want string
	}{
		{"nothing", nil, "no input"},
		{"an ELF file", [][]byte{amd64, []byte("\x7fELF\x02\x01\x01\x00 and more bytes than a header")}, "input 2: not a thin Mach-O"},
		{"a fat file", [][]byte{mustJoin(t, amd64), amd64}, "input 1: not a thin Mach-O"},
		{"two slices of one CPU", [][]byte{amd64, thinMachO(macho.CpuAmd64, 8, macho.TypeExec, 10)}, "a second slice for CpuAmd64"},
		{"an executable and a library", [][]byte{amd64, thinMachO(macho.CpuArm64, 0, macho.TypeDylib, 10)}, "file type"},
	} {
		_, err := join(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

func mustJoin(t *testing.T, thin ...[]byte) []byte {
	t.Helper()
	fat, err := join(thin)
	if err != nil {
		t.Fatal(err)
	}
	return fat
}
