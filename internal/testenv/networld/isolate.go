package networld

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// isolatedEnv marks the copy of a test binary that runs in its own network
// namespace.
const isolatedEnv = "SCRATCHRUN_NETWORLD_ISOLATED"

// Isolated reports whether this process is the copy ReexecIsolated or
// Isolate started in a network namespace of its own.
func Isolated() bool { return os.Getenv(isolatedEnv) != "" }

// ReexecIsolated runs this test binary again, with the same arguments and
// standard streams, in a new, empty network namespace, and returns its exit
// status: a TestMain's whole work outside the namespace.
func ReexecIsolated() int {
	cmd, err := isolatedCommand(os.Args[1:]...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "run isolated tests:", err)
		return 1
	}
	return 0
}

// Isolate runs test t alone in a copy of this binary in a new, empty network
// namespace, logs what it printed and fails t when it failed; it reports
// false then, and the test returns. In that copy it reports true: the test
// goes on, isolated.
func Isolate(t *testing.T) bool {
	t.Helper()
	if testing.Short() {
		// The fast tier runs as an ordinary user, who cannot make the
		// namespace (docs/design.md, "Test tiers").
		t.Skip("skipped under -short (the fast tier): runs in a network namespace of its own, as root")
	}
	if Isolated() {
		return true
	}
	cmd, err := isolatedCommand("-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	t.Logf("isolated run:\n%s", out)
	if err != nil {
		t.Fatalf("%s in an isolated network namespace: %v", t.Name(), err)
	}
	return false
}

// isolatedCommand is this test binary with args, to be started in a new
// network namespace, dying with this process.
func isolatedCommand(args ...string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), isolatedEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}
