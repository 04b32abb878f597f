package spawner

import (
	"context"
	"encoding/binary"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces/nsinit"
)

// The built-in init holds exactly fds 0-4, answers a malformed setup with
// an error instead of acting on it, and exits without answering an
// oversized one. (Everything it does with a valid setup is tested through
// the engine: see internal/engine.)
func TestBuiltinInitRefusesMalformedSetup(t *testing.T) {
	s, _ := startTestSpawner(t)
	valid, err := nsinit.SetupMessage{RootFS: "/nonexistent", Hostname: "x", Seccomp: make([]byte, 8),
		MaskPaths: []string{"/proc/kcore"}, ReadOnlyPaths: []string{"/proc/sys"}}.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	frame := func(body []byte) []byte {
		return append(binary.LittleEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	hugeList := slices.Clone(valid)
	// The fields before the DNS list: two strings, three numbers, a string
	// and the flags.
	dnsAt := 4 + len("/nonexistent") + 4 + 8*3 + 4 + len("x") + 8
	binary.LittleEndian.PutUint32(hugeList[dnsAt:], 1<<30)
	withNUL, _ := nsinit.SetupMessage{RootFS: "/a\x00b", Hostname: "x", Seccomp: make([]byte, 8),
		MaskPaths: []string{"/proc/kcore"}, ReadOnlyPaths: []string{"/proc/sys"}}.MarshalBinary()
	noMasks, _ := nsinit.SetupMessage{RootFS: "/nonexistent", Hostname: "x", Seccomp: make([]byte, 8)}.MarshalBinary()
	cases := []struct {
		name, input, want string
	}{
		{"cut short", string(frame(valid[:len(valid)-3])), "malformed setup message"},
		{"trailing bytes", string(frame(append(slices.Clone(valid), 0))), "malformed setup message"},
		{"impossible list count", string(frame(hugeList)), "malformed setup message"},
		{"NUL in a path", string(frame(withNUL)), "malformed setup message"},
		{"no /proc paths to mask", string(frame(noMasks)), "malformed setup message"},
		{"over the size limit", string(binary.LittleEndian.AppendUint32(nil, nsinit.MaxSetupBytes+1)), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newChildPipes(t)
			proc, err := s.Spawn(context.Background(), Request{BuiltinInit: true, CloneFlags: namespaces,
				UIDMap: "0 1000000000 65536\n", GIDMap: "0 1000000000 65536\n",
				Stdout: p.outW, Stderr: p.errW, FD3: p.ctlR, FD4: p.statusW})
			if err != nil {
				t.Fatal(err)
			}
			defer proc.Wait()
			defer proc.Kill()
			for _, f := range []*os.File{p.outW, p.errW, p.statusW, p.ctlR} {
				f.Close()
			}
			if c.name == "cut short" {
				entries, err := os.ReadDir("/proc/" + strconv.Itoa(proc.Pid) + "/fd")
				if err != nil {
					t.Fatal(err)
				}
				var fds []string
				for _, e := range entries {
					fds = append(fds, e.Name())
				}
				if strings.Join(fds, ",") != "0,1,2,3,4" {
					t.Errorf("init holds fds %v, want exactly 0-4", fds)
				}
			}
			if _, err := p.ctl.Write([]byte(c.input)); err != nil {
				t.Fatal(err)
			}
			p.ctl.Close()
			var ready nsinit.ReadyMessage
			err = nsinit.ReadMessage(p.status, 1<<20, &ready)
			if c.want == "" {
				if err != io.EOF {
					t.Errorf("want no answer, got %+v (%v)", ready, err)
				}
				return
			}
			if err != nil || ready.Ready || ready.Error != c.want {
				t.Errorf("got %+v (%v), want the error %q", ready, err, c.want)
			}
		})
	}
}

// The built-in init builds a whole sandbox: the helper refuses to start it
// without every namespace (a shared IPC namespace would reach the host's
// System V IPC).
func TestBuiltinInitNeedsEveryNamespace(t *testing.T) {
	s, _ := startTestSpawner(t)
	for _, missing := range []uintptr{syscall.CLONE_NEWIPC, syscall.CLONE_NEWUTS, syscall.CLONE_NEWNET} {
		p := newChildPipes(t)
		_, err := s.Spawn(context.Background(), Request{BuiltinInit: true, CloneFlags: namespaces &^ missing,
			UIDMap: "0 1000000000 65536\n", GIDMap: "0 1000000000 65536\n",
			Stdout: p.outW, Stderr: p.errW, FD3: p.ctlR, FD4: p.statusW})
		if err == nil || !strings.Contains(err.Error(), "malformed request") {
			t.Errorf("without namespace %#x: %v", missing, err)
		}
	}
}
