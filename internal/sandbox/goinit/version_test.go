package goinit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

func TestMain(m *testing.M) {
	// The tests below start this binary as the init.
	RunIfRequested()
	os.Exit(m.Run())
}

// The Go init refuses a setup of another protocol version, saying so in
// its ready message (in the words the C init uses too), before it acts on
// anything in it.
func TestInitRefusesAnotherProtocolVersion(t *testing.T) {
	body, err := initproto.SetupMessage{MaskPaths: []string{"/proc/kcore"}, ReadOnlyPaths: []string{"/proc/sys"}}.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint64(body, initproto.ProtocolVersion+1)
	frame := append(binary.LittleEndian.AppendUint32(nil, uint32(len(body))), body...)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "control"), frame, 0o600); err != nil {
		t.Fatal(err)
	}
	control, err := os.Open(filepath.Join(dir, "control"))
	if err != nil {
		t.Fatal(err)
	}
	defer control.Close()
	status, err := os.Create(filepath.Join(dir, "status"))
	if err != nil {
		t.Fatal(err)
	}
	defer status.Close()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := &exec.Cmd{Path: self, Args: []string{GVisorInitPath, GVisorRoleInit}, ExtraFiles: []*os.File{control, status}}
	var exit *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("init ended with %v, want exit status 1", err)
	}
	answer, err := os.ReadFile(status.Name())
	if err != nil {
		t.Fatal(err)
	}
	var ready initproto.ReadyMessage
	if err := initproto.ReadMessage(bytes.NewReader(answer), 1<<20, &ready); err != nil {
		t.Fatalf("no ready message: %v (%q)", err, answer)
	}
	want := (&initproto.VersionError{Got: initproto.ProtocolVersion + 1}).Error()
	if ready.Ready || ready.Error != want {
		t.Errorf("ready %+v, want the error %q", ready, want)
	}
}
