//go:build hostile

package engine

// The hostile-input suite: what a security reviewer wants to see tried before
// trusting the sandbox. It runs in CI (scripts/test.sh passes -tags hostile).

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// pyErrno runs Python that tries each operation and prints "name: result".
const pyErrno = `import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def sys_(name, nr, *args):
    r = libc.syscall(nr, *args)
    e = ctypes.get_errno()
    print(name + ":", "ok" if r >= 0 else errno.errorcode.get(e, e))
`

// Every privileged kernel interface a sandbox could use to get out is refused.
func TestHostileSyscallsRefused(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		code := pyErrno + `
sys_("keyctl", 250, 0, 0, 0, 0, 0)
sys_("add_key", 248, b"user", b"k", b"v", 1, -2)
sys_("bpf", 321, 0, 0, 0)
sys_("perf_event_open", 298, 0, 0, -1, -1, 0)
sys_("userfaultfd", 323, 0)
sys_("io_uring_setup", 425, 1, 0)
sys_("init_module", 175, 0, 0, 0)
sys_("finit_module", 313, 0, 0, 0)
sys_("kexec_load", 246, 0, 0, 0, 0)
sys_("setns", 308, 0, 0)
sys_("pivot_root", 155, b"/tmp", b"/tmp")
sys_("unshare_user", 272, 0x10000000)
sys_("unshare_net", 272, 0x40000000)
sys_("clone_newns", 56, 0x00020000 | 17, 0, 0, 0, 0)
sys_("ptrace_attach", 101, 16, 1, 0, 0)
sys_("open_by_handle_at", 304, 0, 0, 0)
sys_("mount", 165, b"none", b"/tmp", b"tmpfs", 0, 0)
sys_("umount", 166, b"/tmp", 2)
sys_("swapon", 167, b"/tmp/x", 0)
sys_("reboot", 169, 0xfee1dead, 0x28121969, 0x1234567, 0)
sys_("syslog", 103, 3, 0, 0)
sys_("mknod_mem", 133, b"/tmp/mem", 0o20600, (1 << 8) | 1)
sys_("memfd_secret", 447, 0)
ctx = ctypes.c_ulong(0)
sys_("io_setup", 206, 1, ctypes.byref(ctx))
for fam, typ, name in ((socket.AF_PACKET, socket.SOCK_RAW, "packet"), (socket.AF_INET, socket.SOCK_RAW, "raw_inet")):
    try:
        socket.socket(fam, typ); print(name + ": ok")
    except OSError as ex: print(name + ":", errno.errorcode[ex.errno])
for path in ("/proc/sys/kernel/modprobe", "/proc/sysrq-trigger", "/proc/sys/vm/drop_caches"):
    try:
        open(path, "w").write("1"); print(path + ": ok")
    except OSError as ex: print(path + ":", errno.errorcode[ex.errno])
st = dict(l.split(":\t") for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
print("NoNewPrivs:", st["NoNewPrivs"].strip(), "Seccomp:", st["Seccomp"].strip())
print("CapEff:", st["CapEff"].strip())
`
		res := run(t, e, execapi.Request{Runtime: "python3.13", Code: code})
		if res.ExitCode != 0 {
			t.Fatalf("exit %d stderr %q", res.ExitCode, res.Stderr)
		}
		for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
			name, result, _ := strings.Cut(line, ": ")
			switch name {
			case "NoNewPrivs":
				if !strings.HasPrefix(result, "1 Seccomp: 2") {
					t.Errorf("no_new_privs/seccomp not in force: %q", line)
				}
			case "CapEff":
				// Docker's default set minus NET_RAW: no CAP_SYS_ADMIN (bit 21),
				// CAP_SYS_PTRACE (19), CAP_SYS_MODULE (16), CAP_NET_ADMIN (12).
				var caps uint64
				fmt.Sscanf(result, "%x", &caps)
				for _, bit := range []uint{21, 19, 16, 12, 13} {
					if caps&(1<<bit) != 0 {
						t.Errorf("capability %d is effective: %s", bit, line)
					}
				}
			default:
				if result == "ok" {
					t.Errorf("%s succeeded inside the sandbox", name)
				}
			}
		}
	})
}

// The sandbox inherits no descriptor from the engine: only stdin (/dev/null)
// and the two output pipes.
func TestHostileNoInheritedDescriptors(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		res := run(t, e, execapi.Request{Runtime: "python3.13", Code: `import os
fds = sorted(int(f) for f in os.listdir('/proc/self/fd'))
print([ (f, os.readlink('/proc/self/fd/%d' % f)) for f in fds if f > 2 and os.path.exists('/proc/self/fd/%d' % f) and not os.readlink('/proc/self/fd/%d' % f).startswith('/proc/') ])
print(os.readlink('/proc/self/fd/0'))
try:
    print(os.readlink('/proc/1/fd/0'))
except OSError as e: print('init fds:', e.strerror)
`})
		lines := strings.Split(res.Stdout, "\n")
		// Init's descriptors are refused (Linux) or not there at all
		// (gVisor's reaper hides its /proc/1/fd).
		if len(lines) < 3 || lines[0] != "[]" || lines[1] != "/dev/null" ||
			!strings.Contains(lines[2], "Permission denied") && !strings.Contains(lines[2], "No such file") {
			t.Errorf("descriptors: %q stderr %q", res.Stdout, res.Stderr)
		}
	})
}

// Writable places all fill up and fail cleanly; the next call is unaffected.
func TestHostileDiskFillEverywhere(t *testing.T) {
	forEachBackend(t, func(c *Config) { c.MaxInodes = 8192 }, func(t *testing.T, e *Engine) {
		res := run(t, e, execapi.Request{Runtime: "bash", Limits: execapi.Limits{MemoryMB: 512, TimeoutMS: 30000},
			Code: `for d in /tmp /dev/shm /code /root /var/tmp; do
  out=$(dd if=/dev/zero of=$d/fill bs=1M count=1000 2>&1); case "$out" in *"No space left"*) echo "$d full";; *) echo "$d NOT full: $out";; esac
  rm -f $d/fill
done
mkdir /tmp/many && cd /tmp/many && i=0; while : > f$i 2>/dev/null; do i=$((i+1)); done; echo "files stopped at $i"`})
		for _, d := range []string{"/tmp", "/dev/shm", "/code", "/root", "/var/tmp"} {
			if !strings.Contains(res.Stdout, d+" full") {
				t.Errorf("%s: %q", d, res.Stdout)
			}
		}
		if !strings.Contains(res.Stdout, "files stopped at") {
			t.Errorf("inode exhaustion did not stop: %q (note %q)", res.Stdout, res.Note)
		}
		if next := run(t, e, execapi.Request{Runtime: "bash", Code: "df -k /tmp | tail -1"}); !strings.Contains(next.Stdout, "/tmp") || strings.Contains(next.Stdout, "100%") {
			t.Errorf("next call's /tmp: %q", next.Stdout)
		}
	})
}

// A thread bomb stops at the process/thread limit.
func TestHostileThreadBomb(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		res := run(t, e, execapi.Request{Runtime: "python3.13", Limits: execapi.Limits{TimeoutMS: 20000},
			Code: "import threading, time\nn = 0\ntry:\n    while True:\n        threading.Thread(target=time.sleep, args=(60,), daemon=True).start(); n += 1\nexcept RuntimeError as e:\n    print('stopped at', n, e)\n"})
		if !strings.HasPrefix(res.Stdout, "stopped at") {
			t.Errorf("thread bomb: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
		}
	})
}

// A steady stream of exiting orphans (init reaps each one) does not postpone
// the timeout: init still kills at the deadline and returns the files, which
// the engine's backstop, a grace period later, would lose.
func TestHostileOrphanStreamStillTimesOut(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		res := run(t, e, execapi.Request{Runtime: "bash", Limits: execapi.Limits{TimeoutMS: 1500}, ReturnFiles: []string{"/tmp/kept"},
			Code: "echo kept > /tmp/kept; while :; do (true &) ; done"})
		// "a2VwdAo=" is base64 of "kept\n".
		if res.ExitCode != execapi.ExitTimeout || res.Files["/tmp/kept"] != "a2VwdAo=" {
			t.Errorf("exit %d, files %v, note %q", res.ExitCode, res.Files, res.Note)
		}
	})
}

// A gigabyte of output neither blocks the run nor fills the engine's memory.
func TestHostileGigabyteOfOutput(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		res := run(t, e, execapi.Request{Runtime: "bash", Limits: execapi.Limits{TimeoutMS: 30000},
			Code: "head -c 1000000000 /dev/zero; echo done >&2"})
		if res.ExitCode != 0 || len(res.Stdout) != 1<<20 || res.Stderr != "done\n" {
			t.Errorf("exit %d stdout %d bytes stderr %q note %q", res.ExitCode, len(res.Stdout), res.Stderr, res.Note)
		}
	})
}

// Runs at the maximum timeout under full load all end at their timeout, and
// nothing outlives them.
func TestHostileMaxTimeoutUnderFullLoad(t *testing.T) {
	forEachBackend(t, func(c *Config) { c.Admission.Capacity = 4 }, func(t *testing.T, e *Engine) {
		var wg sync.WaitGroup
		start := time.Now()
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				res := run(t, e, execapi.Request{Runtime: "python3.13", Limits: execapi.Limits{TimeoutMS: 30000},
					Code: "import os, time\nif os.fork() == 0:\n    os.setsid()\n    while True: pass\nwhile True: time.sleep(1)"})
				if res.ExitCode != execapi.ExitTimeout {
					t.Errorf("run %d: exit %d", i, res.ExitCode)
				}
			}(i)
		}
		wg.Wait()
		if d := time.Since(start); d > 60*time.Second {
			t.Errorf("four 30 s runs took %s", d)
		}
	})
}

// Secrets passed in env never appear in errors or logs, whatever happens.
func TestHostileSecretsStayOutOfLogsAndErrors(t *testing.T) {
	var logs bytes.Buffer
	e := newTestEngine(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	const secret = "sk-test-7f3a9c-DO-NOT-LEAK"
	env := map[string]string{"API_TOKEN": secret}
	var errs []string
	for _, req := range []execapi.Request{
		{Runtime: "bash", Code: "x", Env: env, Limits: execapi.Limits{TimeoutMS: 999999}},
		{Runtime: "nope", Code: "x", Env: env},
		{Runtime: "bash", Code: "x", Env: env, Files: map[string]string{"relative": "y"}},
	} {
		if _, err := e.Exec(context.Background(), req, nil); err != nil {
			errs = append(errs, err.Error())
		}
	}
	res := run(t, e, execapi.Request{Runtime: "bash", Env: env, Limits: execapi.Limits{TimeoutMS: 1000}, Code: "sleep 5"})
	if len(errs) != 3 {
		t.Fatalf("expected 3 validation errors, got %v", errs)
	}
	for _, s := range append(errs, logs.String(), res.Note) {
		if strings.Contains(s, secret) {
			t.Errorf("secret leaked: %q", s)
		}
	}
}
