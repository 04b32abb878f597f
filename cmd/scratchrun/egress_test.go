package main

import (
	"bytes"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// --allow-egress --network egress wires a sandbox to a network slot, and the
// CLI removes everything again. It runs in a fresh network namespace with no
// route anywhere, so the probe's packet cannot leave the machine.
func TestExecEgressWiring(t *testing.T) {
	code := `import socket
print(sorted(n for _, n in socket.if_nameindex()))
print(open('/etc/resolv.conf').read().split()[1])
try:
    socket.create_connection(('198.51.100.10', 80), timeout=5)
except OSError as e: print(type(e).__name__)
`
	cmd := exec.Command(binary, "exec", "--allow-egress", "--network", "egress", "--runtime", "python3.13", "--code", code)
	cmd.Env = append(cmd.Environ(), "SCRATCHRUN_DNS=198.51.100.53")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: stdout %q stderr %q", err, out.String(), errb.String())
	}
	lines := strings.Split(out.String(), "\n")
	if len(lines) < 3 || lines[0] != "['eth0', 'lo']" || lines[1] != "198.51.100.53" || !strings.Contains(lines[2], "Error") {
		t.Errorf("stdout %q stderr %q", out.String(), errb.String())
	}
}
