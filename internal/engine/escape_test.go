package engine

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// No route reads a host file: direct paths, /proc of pid 1, /proc/self/root.
func TestHostFilesAreUnreachable(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		path, secret := hostSecretFile(t)
		code := fmt.Sprintf(`for p in %[1]s /proc/1/root%[1]s /proc/self/root%[1]s /proc/1/cwd%[1]s; do cat $p 2>/dev/null; done
grep -rs %[2]s /tmp /root /etc /proc/1/root/tmp 2>/dev/null | head -1
ls /var/lib/scratchrun %[3]s 2>&1 | head -2
echo end`, path, secret, testStateDir)
		res := run(t, e, execapi.Request{Runtime: "bash", Code: code})
		if strings.Contains(res.Stdout, secret) {
			t.Fatalf("sandbox read a host file: %q", res.Stdout)
		}
		if !strings.Contains(res.Stdout, "No such file") || !strings.HasSuffix(res.Stdout, "end\n") {
			t.Errorf("stdout %q: want the engine's directories absent", res.Stdout)
		}
	})
}

// Return files never follow a link out of the sandbox.
func TestSymlinkedReturnFilesStayInside(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		path, secret := hostSecretFile(t)
		code := fmt.Sprintf(`ln -s %[1]s /tmp/abs
ln -s ../../../../../..%[1]s /tmp/rel
ln -s /proc/1/root%[1]s /tmp/viaproc
ln -s /proc/self/environ /tmp/environ
ln -s /proc/1/fd/1 /tmp/fd
ln /etc/hostname /tmp/hard 2>/dev/null
mkfifo /tmp/fifo
echo ok`, path)
		res := run(t, e, execapi.Request{Runtime: "bash", Code: code,
			ReturnFiles: []string{"/tmp/abs", "/tmp/rel", "/tmp/viaproc", "/tmp/environ", "/tmp/fd", "/tmp/fifo"}})
		if res.Stdout != "ok\n" {
			t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
		}
		for p, b64 := range res.Files {
			data, _ := base64.StdEncoding.DecodeString(b64)
			if strings.Contains(string(data), secret) {
				t.Errorf("return file %s carried the host secret", p)
			}
			if p != "/tmp/environ" || len(data) > 0 {
				t.Errorf("return file %s was returned (%d bytes); links out and pseudo-files must not be", p, len(data))
			}
		}
		for _, p := range []string{"/tmp/abs", "/tmp/rel", "/tmp/viaproc", "/tmp/environ", "/tmp/fd", "/tmp/fifo"} {
			if !strings.Contains(res.Note, p) {
				t.Errorf("note %q does not explain why %s is missing", res.Note, p)
			}
		}
	})
}

// Privileged operations fail: mounting, new namespaces, ptrace, module and
// sysctl writes, raw sockets.
func TestPrivilegedOperationsFail(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		code := `import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, rc):
    print(name, 'ok' if rc == 0 else errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()))
os.makedirs('/tmp/m', exist_ok=True)
attempt('mount', libc.mount(b'none', b'/tmp/m', b'tmpfs', 0, None))
attempt('unshare', libc.unshare(0x10000000))
attempt('ptrace', libc.ptrace(16, 1, None, None))
try:
    open('/proc/sys/kernel/hostname', 'w').write('x'); print('sysctl ok')
except OSError as e: print('sysctl', errno.errorcode[e.errno])
try:
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW); print('packet ok')
except OSError as e: print('packet', errno.errorcode[e.errno])
print('pids', sorted(int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()))
`
		res := run(t, e, execapi.Request{Runtime: "python3.13", Code: code})
		if res.ExitCode != 0 {
			t.Fatalf("exit %d stderr %q", res.ExitCode, res.Stderr)
		}
		for _, want := range []string{"mount EPERM", "unshare EPERM", "ptrace EPERM", "sysctl EROFS"} {
			if !strings.Contains(res.Stdout, want) {
				t.Errorf("stdout %q lacks %q", res.Stdout, want)
			}
		}
		if strings.Contains(res.Stdout, "packet ok") {
			t.Errorf("a packet socket opened (it could only see lo, but should not exist)")
		}
		// Only the sandbox's own processes are visible: init (1) and the program.
		if !strings.Contains(res.Stdout, "pids [1]\n") {
			t.Errorf("stdout %q: want to see only init and the program itself", res.Stdout)
		}
	})
}

// One sandbox cannot signal another: kill(0) and kill(-1) stay inside the
// sandbox's own process group and pid namespace (all sandboxes share a host
// uid, so only the namespaces and sessions keep them apart).
func TestSandboxCannotSignalAnother(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		victim := make(chan execapi.Result, 1)
		go func() {
			res, err := e.Exec(context.Background(), execapi.Request{Runtime: "bash", Code: "sleep 2; echo survived"}, nil)
			if err != nil {
				res.Note = err.Error()
			}
			victim <- res
		}()
		time.Sleep(300 * time.Millisecond)
		run(t, e, execapi.Request{Runtime: "python3.13",
			Code: "import os, signal\nfor pid in (0, -1):\n    try: os.kill(pid, signal.SIGKILL)\n    except OSError as e: print(pid, e)\n"})
		res := <-victim
		if res.Stdout != "survived\n" || res.ExitCode != 0 {
			t.Errorf("victim sandbox: exit %d stdout %q note %q", res.ExitCode, res.Stdout, res.Note)
		}
	})
}

// The sandbox's mount table names no host path: not the image's directory
// in the data directory, not the engine's state directory (where a
// namespaces sandbox's writable layer is staged), in either of the files
// that show it.
func TestMountTableShowsNoHostPath(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		res := run(t, e, execapi.Request{Runtime: "bash", Code: "cat /proc/self/mountinfo; echo ---; cat /proc/self/mounts"})
		if res.ExitCode != 0 || !strings.Contains(res.Stdout, " / ") || !strings.Contains(res.Stdout, "/tmp") {
			t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
		}
		for _, host := range []string{testenv.DataDir(), "/var/lib/scratchrun", testStateDir, gvisorStateDir, "/run/scratchrun"} {
			if strings.Contains(res.Stdout, host) {
				t.Errorf("the mount table shows the host path %s:\n%s", host, res.Stdout)
			}
		}
	})
}
