package bpfload

import (
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 4},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 1, Jf: 2, K: 0xc000003e},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0x7fff0000},
	}
	b := Encode(prog)
	if len(b) != 8*len(prog) {
		t.Fatalf("encoded %d bytes, want %d", len(b), 8*len(prog))
	}
	got, err := Decode(b)
	if err != nil || !slices.Equal(got, prog) {
		t.Fatalf("decode: %v %+v", err, got)
	}
	if _, err := Decode(b[:7]); err == nil {
		t.Error("a truncated program decoded")
	}
}
