package namespaces

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/idmap"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces/spawner"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// zygoteHook is run in the zygote itself before it serves (through
// spawner.TestHookEnv), as code that took the zygote over would run: it
// reports, on stderr, what the zygote could do.
const zygoteHook = `
import os, json, ctypes, sys
r = {}
def attempt(name, f):
    try:
        f()
        r[name] = 0
    except OSError as e:
        r[name] = e.errno
attempt("setuid_outside", lambda: os.setuid(%[1]d))
attempt("seteuid_sandbox", lambda: os.setresuid(-1, %[2]d, -1))
attempt("seteuid_other_owner", lambda: os.setresuid(-1, %[3]d, -1))
def own():
    os.setresuid(-1, %[4]d, -1)
    os.setresuid(-1, 0, -1)
attempt("seteuid_own_block", own)
attempt("setgid_sandbox", lambda: os.setgid(%[2]d))
attempt("setgroups", lambda: os.setgroups([%[2]d]))
attempt("kill_test", lambda: os.kill(%[5]d, 0))
attempt("proc1_root", lambda: os.listdir("/proc/1/root/"))
attempt("proc1_cwd", lambda: os.listdir("/proc/1/cwd/"))
attempt("proc1_mem", lambda: os.close(os.open("/proc/1/mem", os.O_RDWR)))
libc = ctypes.CDLL(None, use_errno=True)
r["ptrace"] = ctypes.get_errno() if libc.ptrace(16, 1, 0, 0) < 0 else 0
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(8)
here, there = iovec(ctypes.cast(buf, ctypes.c_void_p), 8), iovec(0x10000, 8)
ctypes.set_errno(0)
r["proc1_vm_read"] = ctypes.get_errno() if libc.process_vm_readv(1, ctypes.byref(here), 1, ctypes.byref(there), 1, 0) < 0 else 0
r["pid"] = os.getpid()
r["proc"] = sorted(int(d) for d in os.listdir("/proc") if d.isdigit())
r["net"] = sorted(l.split(":")[0].strip() for l in open("/proc/self/net/dev").readlines()[2:])
r["writable"] = sorted(f[4] for f in (l.split() for l in open("/proc/self/mountinfo")) if f[5].split(",")[0] == "rw")
home = os.statvfs("/root")
r["home_bytes"] = home.f_blocks * home.f_frsize
sys.stderr.write("HOOK " + json.dumps(r) + "\n")
sys.stderr.flush()
`

// A zygote taken over can reach nothing beyond its own caller's
// sandboxes: it cannot take a uid outside its owner block (a sandbox's,
// another owner's), nor a sandbox's gid or groups, nor ptrace; it cannot
// name a host process (the test's own pid) and its /proc shows only its
// own pid namespace (its pid 1 and itself), its network only a loopback
// of its own, and it can write no file system but /proc, its device
// nodes and its home, a small tmpfs of its own (no cgroup's: another
// caller's limits are out of its reach). Its sandboxes still work, and a retired zygote's running
// sandbox runs on until destroyed; nothing is left afterwards.
func TestZygoteIsConfined(t *testing.T) {
	b := testenv.RealBackend[*Backend](t, level)
	img, rt := env.Image(t, "python3.13")
	before := level.Snapshot()
	t.Cleanup(func() { level.CheckClean(t, before) })
	// The block is the next the backend hands out: take it once to learn
	// it (the test holds the backend alone).
	base, err := b.owners.takeBlock(zygoteOwners)
	if err != nil {
		t.Fatal(err)
	}
	b.owners.releaseBlock(base, zygoteOwners)
	other := base + zygoteOwners
	if base > ownerUIDBase {
		other = base - 1
	}
	hook := fmt.Sprintf(zygoteHook, 1_200_000_000, idmap.SandboxBase, other, base+5, os.Getpid())
	z, pre := startPythonZygoteEnv(t, b, img, rt, "", []string{spawner.TestHookEnv + "=" + hook})
	if z.ownerBase != base {
		t.Fatalf("the zygote's block starts at %d, the hook assumed %d", z.ownerBase, base)
	}
	var report map[string]any
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, line, ok := strings.Cut(z.Stderr(), "HOOK "); ok {
			line, _, _ = strings.Cut(line, "\n")
			if err := json.Unmarshal([]byte(line), &report); err != nil {
				t.Fatalf("the hook's report %q: %v", line, err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no report from the hook; the zygote's stderr: %q", z.Stderr())
		}
	}
	t.Logf("from inside the zygote: %v", report)
	eperm, esrch := float64(unix.EPERM), float64(unix.ESRCH)
	for _, k := range []string{"setuid_outside", "seteuid_sandbox", "seteuid_other_owner", "setgid_sandbox", "setgroups", "ptrace"} {
		if report[k] != eperm {
			t.Errorf("%s: %v, want EPERM", k, report[k])
		}
	}
	// Its pid 1 (the launcher's reaper) is uid 0 in the engine's mount
	// namespace: through /proc/1 it would reach the host's file system.
	// process_vm_readv is allowed (sandboxes have it) and refused by the
	// kernel for want of ptrace access (an address it could read would
	// fail with EFAULT instead).
	if report["proc1_vm_read"] != eperm {
		t.Errorf("proc1_vm_read: %v, want EPERM", report["proc1_vm_read"])
	}
	for _, k := range []string{"proc1_root", "proc1_cwd", "proc1_mem"} {
		if report[k] == 0.0 {
			t.Errorf("%s: opened from inside the zygote, want EACCES or EPERM", k)
		}
	}
	if report["seteuid_own_block"] != 0.0 {
		t.Errorf("taking an owner uid of its own block: %v, want success (the maps need it)", report["seteuid_own_block"])
	}
	if report["kill_test"] != esrch && report["kill_test"] != eperm {
		t.Errorf("signalling the test's process: %v, want ESRCH or EPERM", report["kill_test"])
	}
	if fmt.Sprint(report["proc"]) != "[1 2]" || report["pid"] != 2.0 {
		t.Errorf("the zygote is pid %v and sees pids %v, want 2 and [1 2]", report["pid"], report["proc"])
	}
	// No cgroup file system (the engine opens a sandbox's cgroup.procs
	// files for it), nothing writable but /proc, the device nodes and
	// the home the launcher made (20 MiB at most).
	for _, m := range report["writable"].([]any) {
		if p := m.(string); p != "/proc" && p != "/root" && !strings.HasPrefix(p, "/dev/") {
			t.Errorf("the zygote can write under %s", p)
		}
	}
	if n := report["home_bytes"].(float64); n <= 0 || n > 20<<20 {
		t.Errorf("the zygote's home holds %.0f bytes, want a tmpfs of 20 MiB at most", n)
	}
	if fmt.Sprint(report["net"]) != "[lo]" {
		t.Errorf("the zygote's network devices: %v, want [lo]", report["net"])
	}

	// A sandbox of the zygote outlives its retirement.
	cfg := testenv.SandboxConfig(img)
	cfg.Prestart = pre
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := b.create(ctx, cfg, z)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	zpid := zygoteHostPid(t, z)
	pidfd, err := unix.PidfdOpen(zpid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	z.Retire()
	if n, err := unix.Poll([]unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}, 30_000); n != 1 || err != nil {
		t.Fatalf("the retired zygote did not exit: %d %v", n, err)
	}
	var stdout bytes.Buffer
	o, err := sb.Run(ctx, sandbox.Job{Argv: []string{"/usr/bin/python3.13", "/code/main.py"}, Env: cfg.Prestart.Env, Dir: "/tmp",
		Timeout: 30 * time.Second, MaxReturnBytes: 1 << 20, Stdout: &stdout,
		Files: []sandbox.File{{Path: "/code/main.py", Data: []byte("import os\nprint(os.getuid(), os.getpid())")}}})
	if err != nil || o.ExitCode != 0 || stdout.String() != "0 2\n" {
		t.Errorf("a job after the zygote retired: %+v %v %q", o, err, stdout.String())
	}
	if td := sb.Destroy(); !td.Purged {
		t.Errorf("teardown: %v", td.Err)
	}
	select {
	case <-z.gone:
	case <-time.After(30 * time.Second):
		t.Fatal("the zygote's launcher did not exit once its last sandbox was destroyed")
	}
}
