package spawner

import (
	"context"
	"encoding/binary"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// Init holds exactly fds 0-4, answers a malformed setup with an error
// instead of acting on it, refuses a setup of another protocol version
// saying so (in the Go init's words), and exits without answering an
// oversized one. (Everything it does with a valid setup is tested through
// the engine: see internal/engine.)
func TestBuiltinInitRefusesMalformedSetup(t *testing.T) {
	s := startTestSpawner(t)
	valid, err := initproto.SetupMessage{RootFS: "/nonexistent", Hostname: "x", Seccomp: make([]byte, 8),
		MaskPaths: []string{"/proc/kcore"}, ReadOnlyPaths: []string{"/proc/sys"}}.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	frame := func(body []byte) []byte {
		return append(binary.LittleEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	hugeList := slices.Clone(valid)
	// The fields before the DNS list: the version, two strings, three
	// numbers, a string and the flags.
	dnsAt := 8 + 4 + len("/nonexistent") + 4 + 8*3 + 4 + len("x") + 8
	binary.LittleEndian.PutUint32(hugeList[dnsAt:], 1<<30)
	withNUL, _ := initproto.SetupMessage{RootFS: "/a\x00b", Hostname: "x", Seccomp: make([]byte, 8),
		MaskPaths: []string{"/proc/kcore"}, ReadOnlyPaths: []string{"/proc/sys"}}.MarshalBinary()
	noMasks, _ := initproto.SetupMessage{RootFS: "/nonexistent", Hostname: "x", Seccomp: make([]byte, 8)}.MarshalBinary()
	otherVersion := slices.Clone(valid)
	binary.LittleEndian.PutUint64(otherVersion, initproto.ProtocolVersion+1)
	cases := []struct {
		name, input, want string
	}{
		{"cut short", string(frame(valid[:len(valid)-3])), "malformed setup message"},
		{"trailing bytes", string(frame(append(slices.Clone(valid), 0))), "malformed setup message"},
		{"impossible list count", string(frame(hugeList)), "malformed setup message"},
		{"NUL in a path", string(frame(withNUL)), "malformed setup message"},
		{"no /proc paths to mask", string(frame(noMasks)), "malformed setup message"},
		{"another protocol version", string(frame(otherVersion)), (&initproto.VersionError{Got: initproto.ProtocolVersion + 1}).Error()},
		{"over the size limit", string(binary.LittleEndian.AppendUint32(nil, initproto.MaxSetupBytes+1)), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newChildPipes(t)
			proc, err := s.Spawn(context.Background(), initRequest(p))
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
			var ready initproto.ReadyMessage
			err = initproto.ReadMessage(p.status, 1<<20, &ready)
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
