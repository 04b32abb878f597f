package namespaces

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/engine/warm"
	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces/spawner"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// pythonEnv is a python sandbox's environment as the engine gives it.
func pythonEnv(rt images.Runtime) []string {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	for k, v := range rt.Env {
		env = append(env, k+"="+v)
	}
	return env
}

// startPythonZygote starts a zygote of runtime's image preloading preload
// (with OpenBLAS held to one thread: the zygote must stay
// single-threaded), stopped when t ends; it returns the zygote and the
// warm pre-start its sandboxes are configured with.
func startPythonZygote(t testing.TB, b *Backend, img sandbox.Image, rt images.Runtime, preload string) (*zygoteProcess, *sandbox.Prestart) {
	t.Helper()
	return startPythonZygoteEnv(t, b, img, rt, preload, nil)
}

// startPythonZygoteEnv is startPythonZygote with extra in the zygote's
// environment only.
func startPythonZygoteEnv(t testing.TB, b *Backend, img sandbox.Image, rt images.Runtime, preload string, extra []string) (*zygoteProcess, *sandbox.Prestart) {
	t.Helper()
	argv, err := warm.Zygote(rt.WarmCommand)
	if err != nil {
		t.Fatal(err)
	}
	env := append(pythonEnv(rt), "OPENBLAS_NUM_THREADS=1")
	if preload != "" {
		env = append(env, "SCRATCHRUN_PRELOAD="+preload)
	}
	z, err := b.startZygote(img, argv, append(append([]string{}, env...), extra...))
	if err != nil {
		t.Fatalf("start the zygote: %v", err)
	}
	t.Cleanup(func() {
		if err := z.Close(); err != nil {
			t.Errorf("close the zygote: %v", err)
		}
	})
	warmArgv, err := warm.Command("python", rt.WarmCommand)
	if err != nil {
		t.Fatal(err)
	}
	return z, &sandbox.Prestart{Argv: warmArgv, Env: env, Dir: "/tmp"}
}

// Sandboxes made through a python zygote run their job as a warm sandbox
// does (output, exit status, traceback); two of them draw different
// random.random(), uuid4() and numpy.random.random() (the modules were
// loaded in the zygote, so only the fork hooks and the reseed make them
// differ); neither ctypes nor the bootstrap's entry is there for a job
// before it imports them; a module one job changed (os, loaded in the zygote) is pristine
// in the next; each job is pid 2 of its own sandbox with no capability
// beyond the sandbox's, and reads its own memory with process_vm_readv as
// an ordinary sandbox's job can; and nothing is left once the zygote is
// closed.
func TestZygotePythonSandboxes(t *testing.T) {
	b := testenv.RealBackend[*Backend](t, level)
	img, rt := env.Image(t, "python3.13")
	before := level.Snapshot()
	t.Cleanup(func() { level.CheckClean(t, before) }) // after the zygote's Close (cleanups run last first)
	z, pre := startPythonZygote(t, b, img, rt, "random,uuid,numpy")
	src := `import sys
boot = sys._getframe(1).f_globals  # the bootstrap's, whose _main runs this
machinery = [n for n in ("ctypes", "_ctypes") if n in sys.modules] + [n for n in ("_zygote",) if n in boot]
if "_main" not in boot:
    machinery.append("(not the bootstrap's frame)")
import os, random, uuid, numpy
pristine = not hasattr(os, "planted")
os.planted = True
import ctypes, json
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
mine, copy = ctypes.create_string_buffer(b"in-proc"), ctypes.create_string_buffer(8)
read = ctypes.CDLL(None).process_vm_readv(os.getpid(), ctypes.byref(iovec(ctypes.cast(copy, ctypes.c_void_p), 8)), 1,
    ctypes.byref(iovec(ctypes.cast(mine, ctypes.c_void_p), 8)), 1, 0) == 8 and copy.value == b"in-proc"
print(json.dumps({"vm_read": read, "r": random.random(), "u": str(uuid.uuid4()), "n": float(numpy.random.random()),
    "pristine": pristine, "machinery": machinery, "pid": os.getpid(), "argv": sys.argv, "main": __name__, "file": __file__,
    "cap": [l.split()[1] for l in open("/proc/self/status") if l.startswith(("CapEff", "CapBnd"))]}))
`
	argv := []string{"/usr/bin/python3.13", "/code/main.py"}
	var seen []map[string]any
	for i := 0; i < 2; i++ {
		o, stdout, stderr := zygoteRun(t, b, z, img, pre, argv, src)
		var got map[string]any
		if o.ExitCode != 0 || json.Unmarshal([]byte(stdout), &got) != nil {
			t.Fatalf("job %d: exit %d, stdout %q, stderr %q", i, o.ExitCode, stdout, stderr)
		}
		if m := got["machinery"].([]any); len(m) != 0 {
			t.Errorf("job %d sees the zygote's machinery: %v", i, m)
		}
		if got["vm_read"] != true {
			t.Errorf("job %d could not process_vm_readv its own memory, as an ordinary sandbox can", i)
		}
		if got["pristine"] != true || got["pid"] != 2.0 || got["main"] != "__main__" || got["file"] != "/code/main.py" {
			t.Errorf("job %d: %v", i, got)
		}
		if c := got["cap"].([]any); len(c) != 2 || c[0] != c[1] {
			t.Errorf("job %d: capabilities %v, want the effective set to be the bounding set", i, c)
		}
		seen = append(seen, got)
	}
	for _, k := range []string{"r", "u", "n"} {
		if seen[0][k] == seen[1][k] {
			t.Errorf("two sandboxes drew the same %s: %v", k, seen[0][k])
		}
	}
	o, stdout, stderr := zygoteRun(t, b, z, img, pre, argv, "import sys\nprint('out')\ndef f():\n    raise ValueError('boom')\nf()\n")
	if o.ExitCode != 1 || stdout != "out\n" || !strings.Contains(stderr, `File "/code/main.py", line 5, in <module>`) || !strings.HasSuffix(stderr, "ValueError: boom\n") {
		t.Errorf("a failing job: exit %d, stdout %q, stderr %q", o.ExitCode, stdout, stderr)
	}
	if o, _, _ := zygoteRun(t, b, z, img, pre, argv, "raise SystemExit(7)"); o.ExitCode != 7 {
		t.Errorf("SystemExit(7): exit %d", o.ExitCode)
	}
	// The zygote holds CAP_SETUID and CAP_SETGID only, in a root of its own.
	zpid := strconv.Itoa(zygoteHostPid(t, z))
	status, err := os.ReadFile("/proc/" + zpid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) == 2 && strings.HasPrefix(f[0], "Cap") && f[0] != "CapInh:" && f[0] != "CapAmb:" && f[1] != "00000000000000c0" {
			t.Errorf("zygote %s %s, want CAP_SETUID and CAP_SETGID only (c0)", f[0], f[1])
		}
	}
	if root, _ := os.Readlink("/proc/" + zpid + "/root"); root != "/" {
		t.Logf("zygote root as we see it: %q", root)
	}
	if _, err := os.Stat(filepath.Join("/proc", zpid, "root", "var")); err == nil {
		t.Errorf("the zygote sees /var")
	}
	_ = time.Second
}

// A heavy zygote preloads what the heavy warm sandbox does, matplotlib's
// pyplot included, which refuses to import without a writable config or
// cache directory: the zygote's home is a writable copy of the image's
// /root, so matplotlib finds there the font cache the image baked and
// rebuilds nothing (the copy is compared with the image's). Its sandboxes draw
// a chart with the preloaded modules, and see the image's /root, not the
// zygote's: what the zygote wrote there is not in theirs.
func TestZygoteHeavyPreloadsMatplotlib(t *testing.T) {
	b := testenv.RealBackend[*Backend](t, level)
	img, rt := env.Image(t, "python3.13")
	if !slices.Contains(rt.Preload, "matplotlib.pyplot") {
		t.Fatalf("python3.13 preloads %v, not matplotlib.pyplot", rt.Preload)
	}
	before := level.Snapshot()
	t.Cleanup(func() { level.CheckClean(t, before) })
	hook := "import matplotlib\nopen('/root/zygote-was-here', 'w').close()\nassert matplotlib.get_cachedir() == '/root/.cache/matplotlib', matplotlib.get_cachedir()"
	z, pre := startPythonZygoteEnv(t, b, img, rt, strings.Join(rt.Preload, ","), []string{spawner.TestHookEnv + "=" + hook})
	src := `import os, sys
preloaded = [m for m in ("numpy", "pandas", "matplotlib.pyplot") if m in sys.modules]
import matplotlib, matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9])
plt.savefig("/tmp/chart.png")
with open("/tmp/chart.png", "rb") as f:
    png = f.read(8) == b"\x89PNG\r\n\x1a\n"
os.makedirs("/root/.config/matplotlib", exist_ok=True)
print(preloaded, png, os.path.exists("/root/zygote-was-here"), matplotlib.get_cachedir())
`
	o, stdout, stderr := zygoteRun(t, b, z, img, pre, []string{"/usr/bin/python3.13", "/code/main.py"}, src)
	want := "['numpy', 'pandas', 'matplotlib.pyplot'] True False /root/.cache/matplotlib\n"
	if o.ExitCode != 0 || stdout != want {
		t.Errorf("exit %d, stdout %q (want %q), stderr %q", o.ExitCode, stdout, want, stderr)
	}
	if why := z.Stderr(); why != "" {
		t.Errorf("the zygote said %q (a failed preload)", why)
	}
	// The zygote's home holds the image's /root file for file, unchanged
	// by the preload: a copy cut short or left out would have matplotlib
	// rebuild its font cache in every zygote (the rebuilt file may well be
	// byte for byte the same, but .bashrc and .profile would be missing).
	home := filepath.Join("/proc", strconv.Itoa(zygoteHostPid(t, z)), "root", "root")
	image := filepath.Join(img.RootFS, "root")
	files := 0
	err := filepath.WalkDir(image, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(image, path)
		want, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		if got, err := os.ReadFile(filepath.Join(home, rel)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("the zygote's /root/%s: %d bytes, err %v; the image's: %d bytes", rel, len(got), err, len(want))
		}
		return nil
	})
	if err != nil || files == 0 {
		t.Errorf("the image's /root: %d files, %v", files, err)
	}
}

// A sandbox that asks for a zygote which cannot start is made by the
// helper instead, and works the same; so is one that asks for a zygote
// with egress (the helper joins network namespaces, a zygote cannot).
func TestZygoteFailureFallsBackToTheHelper(t *testing.T) {
	b := testenv.RealBackend[*Backend](t, level)
	img, rt := env.Image(t, "python3.13")
	before := level.Snapshot()
	t.Cleanup(func() { level.CheckClean(t, before) })
	warmArgv, err := warm.Command("python", rt.WarmCommand)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testenv.SandboxConfig(img)
	cfg.Prestart = &sandbox.Prestart{Argv: warmArgv, Env: pythonEnv(rt), Dir: "/tmp"}
	cfg.Zygote = &sandbox.Zygote{Caller: "t", Runtime: rt.Name, Variant: "light", Argv: []string{"/no/such/interpreter"}, Env: pythonEnv(rt)}
	for i := 0; i < 2; i++ { // the second finds the failure remembered
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		sb, err := b.Create(ctx, cfg)
		if err != nil {
			cancel()
			t.Fatalf("create %d: %v", i, err)
		}
		var stdout bytes.Buffer
		o, err := sb.Run(ctx, sandbox.Job{Argv: []string{"/usr/bin/python3.13", "/code/main.py"}, Env: cfg.Prestart.Env, Dir: "/tmp",
			Timeout: 30 * time.Second, MaxReturnBytes: 1 << 20, Stdout: &stdout,
			Files: []sandbox.File{{Path: "/code/main.py", Data: []byte("import gc\nprint(gc.get_freeze_count())")}}})
		if err != nil || o.ExitCode != 0 || stdout.String() != "0\n" {
			t.Errorf("sandbox %d: %+v %v %q (a frozen heap is a zygote's fork)", i, o, err, stdout.String())
		}
		if td := sb.Destroy(); !td.Purged {
			t.Errorf("teardown %d: %v", i, td.Err)
		}
		cancel()
	}
	if n := b.zygotes.liveCount(); n != 1 {
		t.Errorf("%d zygote entries, want the one failed start remembered", n)
	}
	b.RetireZygotes()
}
