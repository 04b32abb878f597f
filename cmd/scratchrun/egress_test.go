package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/scratchrun/scratchrun/internal/testenv"
)

// --allow-egress --network egress wires a sandbox to a network slot, and the
// CLI removes everything again. It runs in a fresh network namespace with no
// route anywhere, so the probe's packet cannot leave the machine.
func TestExecEgressWiring(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
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

// Two one-shot `exec --allow-egress` at once in one network namespace both
// run (the second used to fail: "another ScratchRun engine owns network
// egress"), and when both are done the namespace has no table left and no
// lock file of it is left in /run/scratchrun. The namespace is one the test
// makes, with no route anywhere.
func TestTwoEgressExecsAtOnce(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	if os.Geteuid() != 0 {
		t.Skip("needs root for egress")
	}
	name := fmt.Sprintf("scratchrun-clitest-egress-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	defer exec.Command("ip", "netns", "del", name).Run()
	var st syscall.Stat_t
	if err := syscall.Stat("/run/netns/"+name, &st); err != nil {
		t.Fatal(err)
	}
	lockFile := fmt.Sprintf("/run/scratchrun/egress-netns-%d.lock", st.Ino)

	code := "import socket, time\nprint(sorted(n for _, n in socket.if_nameindex()), flush=True)\ntime.sleep(2)\n"
	outs := make([]string, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command("ip", "netns", "exec", name, binary, "exec", "--allow-egress", "--network", "egress", "--runtime", "python3.13", "--code", code)
			cmd.Env = append(os.Environ(), "SCRATCHRUN_DNS=198.51.100.53")
			out, err := cmd.CombinedOutput()
			outs[i], errs[i] = string(out), err
		}()
	}
	wg.Wait()
	for i := range outs {
		if errs[i] != nil || !strings.HasPrefix(outs[i], "['eth0', 'lo']") {
			t.Errorf("exec %d: %v: %q", i, errs[i], outs[i])
		}
	}
	if out, err := exec.Command("ip", "netns", "exec", name, "nft", "list", "tables").CombinedOutput(); err != nil || strings.Contains(string(out), "scratchrun") {
		t.Errorf("tables left in the namespace: %v %q", err, out)
	}
	if _, err := os.Stat(lockFile); !os.IsNotExist(err) {
		t.Errorf("lock file %s left (%v)", lockFile, err)
	}
}
