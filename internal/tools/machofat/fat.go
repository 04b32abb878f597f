package main

import (
	"bytes"
	"debug/macho"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

// sliceAlign is each slice's alignment as a power of two: 2^14, the
// arm64 page size, which lipo uses for arm64 and which suits amd64's 4 KiB
// pages as well.
const sliceAlign = 14

// joinFiles reads the thin Mach-O files ins and writes their universal
// binary to out, executable.
func joinFiles(out string, ins []string) error {
	var thin [][]byte
	for _, in := range ins {
		data, err := os.ReadFile(in)
		if err != nil {
			return err
		}
		thin = append(thin, data)
	}
	fat, err := join(thin)
	if err != nil {
		return err
	}
	return os.WriteFile(out, fat, 0o755)
}

// join lays out the universal binary of thin, one slice per CPU in the
// order given. Each input must be a thin 64-bit Mach-O of its own CPU and
// all of one file type, which is what macOS's loader and
// debug/macho.NewFatFile require.
func join(thin [][]byte) ([]byte, error) {
	if len(thin) == 0 {
		return nil, errors.New("no input")
	}
	headers := make([]macho.FatArchHeader, len(thin))
	offset := uint64(8 + 20*len(thin)) // fat_header, then the fat_archs
	seen := map[macho.Cpu]bool{}
	var fileType macho.Type
	for i, data := range thin {
		f, err := macho.NewFile(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("input %d: not a thin Mach-O file: %w", i+1, err)
		}
		if f.Magic != macho.Magic64 {
			return nil, fmt.Errorf("input %d: a 32-bit Mach-O file", i+1)
		}
		if seen[f.Cpu] {
			return nil, fmt.Errorf("input %d: a second slice for %v", i+1, f.Cpu)
		}
		seen[f.Cpu] = true
		if i == 0 {
			fileType = f.Type
		} else if f.Type != fileType {
			return nil, fmt.Errorf("input %d: file type %v, the first is %v", i+1, f.Type, fileType)
		}
		offset = alignUp(offset)
		if offset+uint64(len(data)) > 1<<32-1 {
			return nil, fmt.Errorf("input %d: ends past 4 GiB, beyond a fat_arch's 32-bit offsets", i+1)
		}
		headers[i] = macho.FatArchHeader{Cpu: f.Cpu, SubCpu: f.SubCpu, Offset: uint32(offset), Size: uint32(len(data)), Align: sliceAlign}
		offset += uint64(len(data))
	}
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, [2]uint32{macho.MagicFat, uint32(len(thin))})
	binary.Write(&b, binary.BigEndian, headers)
	for i, data := range thin {
		b.Write(make([]byte, int(headers[i].Offset)-b.Len()))
		b.Write(data)
	}
	return b.Bytes(), nil
}

// alignUp rounds off up to the next multiple of 2^sliceAlign.
func alignUp(off uint64) uint64 {
	const a = 1 << sliceAlign
	return (off + a - 1) &^ (a - 1)
}
