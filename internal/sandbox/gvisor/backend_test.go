package gvisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

func bash(script string) []string { return []string{"/bin/bash", "-c", script} }

// The start-up probe ran, and the backend says which platform it chose.
func TestNewReportsPlatform(t *testing.T) {
	b := backend(t)
	if b.Name() != "gvisor" {
		t.Errorf("Name %q", b.Name())
	}
	if p := b.Platform(); p != PlatformSystrap && p != PlatformKVM {
		t.Errorf("platform %q", p)
	}
	if _, err := os.Stat("/dev/kvm"); err != nil && b.Platform() == PlatformKVM {
		t.Errorf("KVM chosen without /dev/kvm")
	}
}

// A second backend on the same state directory (a one-shot `exec` after
// another) trusts this boot's probe of the same binaries instead of
// running another sandbox.
func TestNewReusesProbe(t *testing.T) {
	b := backend(t)
	again, err := New(Options{StateDir: testStateDir, CgroupParent: testCgroupParent})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if !again.probeCached || again.Platform() != b.Platform() {
		t.Errorf("second New: cached %v, platform %q (first %q)", again.probeCached, again.Platform(), b.Platform())
	}
	if b.probeCached {
		t.Error("the suite's own backend did not probe (its state directory is new)")
	}
}

// A missing runsc is reported by New, naming the path.
func TestNewNamesMissingRunsc(t *testing.T) {
	testenv.SkipIfShort(t, "opens the gVisor backend, as root")
	dir := t.TempDir()
	// A cgroup parent of its own: a backend removes its parent on Close.
	parent := testCgroupParent + "-missing"
	_, err := New(Options{StateDir: filepath.Join(dir, "state"), CgroupParent: parent, Runsc: filepath.Join(dir, "no-runsc")})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "no-runsc")) {
		t.Fatalf("New with a missing runsc: %v", err)
	}
	_, err = New(Options{StateDir: filepath.Join(dir, "state"), CgroupParent: parent, Runsc: "/bin/true"})
	if err == nil || !strings.Contains(err.Error(), "gVisor cannot run here") {
		t.Fatalf("New with a runsc that is not one: %v", err)
	}
	if left := cgroups.HierarchyDirs(parent); len(left) > 0 {
		t.Errorf("a failed New left cgroup directories: %v", left)
	}
}

// The pinned version is the one scripts/install-runsc.sh builds.
func TestPinnedVersionMatchesInstallScript(t *testing.T) {
	data, err := os.ReadFile("../../../scripts/install-runsc.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^version="([^"]+)"`).FindSubmatch(data)
	if m == nil || string(m[1]) != PinnedRunscVersion {
		t.Errorf("install-runsc.sh pins %q, the backend %q", m, PinnedRunscVersion)
	}
}

func TestPrintsExitCodesAndStreams(t *testing.T) {
	img, _ := env.Image(t, "python3.13")
	r := run(t, testenv.SandboxConfig(img), sandbox.Job{Argv: []string{"/usr/bin/python3.13", "-c",
		"import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(7)"}})
	if r.ExitCode != 7 || r.Stdout != "out\n" || r.Stderr != "err\n" || r.TimedOut || r.OOMKilled {
		t.Errorf("got %+v stdout %q stderr %q", r.Outcome, r.Stdout, r.Stderr)
	}
	img, _ = env.Image(t, "bash")
	r = run(t, testenv.SandboxConfig(img), sandbox.Job{Argv: bash("kill -TERM $$")})
	if r.Signal != 15 || r.ExitCode != 128+15 {
		t.Errorf("signal: %+v", r.Outcome)
	}
}

// Files go in before the program starts and come out after it ends; user
// code runs as root with Docker's capabilities minus NET_RAW, no_new_privs
// and the seccomp filter, in a sandbox whose hostname is "sandbox".
func TestFilesInAndOutAndConfinement(t *testing.T) {
	img, _ := env.Image(t, "bash")
	r := run(t, testenv.SandboxConfig(img), sandbox.Job{
		Argv: bash(`cat /code/in.txt; cat /tmp/sub/dir/data.bin | wc -c; echo made > /tmp/out.txt; mkdir -p /root/x && echo deep > /root/x/y
hostname; id -u; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status | tr -d '\t'`),
		Files:       []sandbox.File{{Path: "/code/in.txt", Data: []byte("input\n")}, {Path: "/tmp/sub/dir/data.bin", Data: make([]byte, 3000)}},
		ReturnFiles: []string{"/tmp/out.txt", "/root/x/y", "/tmp/missing"},
	})
	want := "input\n3000\nsandbox\n0\nCapEff:00000000a00405fb\nCapBnd:00000000a00405fb\nNoNewPrivs:1\nSeccomp:2\n"
	if r.ExitCode != 0 || r.Stdout != want {
		t.Errorf("exit %d stdout %q (want %q) stderr %q", r.ExitCode, r.Stdout, want, r.Stderr)
	}
	if string(r.Files["/tmp/out.txt"]) != "made\n" || string(r.Files["/root/x/y"]) != "deep\n" {
		t.Errorf("return files %q", r.Files)
	}
	if _, ok := r.Files["/tmp/missing"]; ok || !strings.Contains(strings.Join(r.Notes, " "), "/tmp/missing") {
		t.Errorf("missing file: files %q notes %q", r.Files, r.Notes)
	}
}

// Return files never follow a link out of the sandbox, and pseudo-files and
// FIFOs are refused; the host's copy of a path is never read.
func TestReturnFilesStayInside(t *testing.T) {
	secret := "gvisor-host-secret-" + filepath.Base(t.TempDir())
	hostPath := filepath.Join(os.TempDir(), secret)
	if err := os.WriteFile(hostPath, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(hostPath)
	img, _ := env.Image(t, "bash")
	links := map[string]string{"abs": hostPath, "rel": "../../../../.." + hostPath, "viaproc": "/proc/1/root" + hostPath,
		"environ": "/proc/self/environ", "fd": "/proc/1/fd/1", "initexe": "/proc/1/exe"}
	script := "mkfifo /tmp/fifo; "
	var paths []string
	for name, target := range links {
		script += "ln -s " + target + " /tmp/" + name + "; "
		paths = append(paths, "/tmp/"+name)
	}
	paths = append(paths, "/tmp/fifo", hostPath, "/proc/self/status")
	r := run(t, testenv.SandboxConfig(img), sandbox.Job{Argv: bash(script + "echo ok"), ReturnFiles: paths})
	if r.Stdout != "ok\n" {
		t.Fatalf("stdout %q stderr %q", r.Stdout, r.Stderr)
	}
	for p, data := range r.Files {
		t.Errorf("%s was returned (%d bytes: %.40q)", p, len(data), data)
	}
	notes := strings.Join(r.Notes, "\n")
	for _, p := range paths {
		if !strings.Contains(notes, p) {
			t.Errorf("no note explains why %s is missing: %s", p, notes)
		}
	}
}

// At the timeout everything dies, a daemonized grandchild in its own
// session included, and the run ends promptly.
func TestTimeoutKillsDaemons(t *testing.T) {
	img, _ := env.Image(t, "bash")
	start := time.Now()
	r := run(t, testenv.SandboxConfig(img), sandbox.Job{Timeout: 1500 * time.Millisecond,
		Argv: bash("setsid bash -c 'trap \"\" TERM HUP; exec sleep 1000' </dev/null >/dev/null 2>&1 &\necho started\nwhile :; do sleep 1; done")})
	if !r.TimedOut || r.Signal != 9 || r.Stdout != "started\n" {
		t.Errorf("got %+v stdout %q", r.Outcome, r.Stdout)
	}
	if d := time.Since(start); d > 45*time.Second {
		t.Errorf("a 1.5 s timeout took %s", d)
	}
}

// A daemon left behind by a program that exits does not keep the run alive.
func TestDaemonDiesWithProgram(t *testing.T) {
	img, _ := env.Image(t, "bash")
	r := run(t, testenv.SandboxConfig(img), sandbox.Job{Timeout: 20 * time.Second,
		Argv: bash("nohup sleep 1000 >/dev/null 2>&1 &\nsetsid sleep 1000 </dev/null >/dev/null 2>&1 &\necho parent done")})
	if r.ExitCode != 0 || r.TimedOut || r.Stdout != "parent done\n" || r.Duration > 10*time.Second {
		t.Errorf("got %+v stdout %q", r.Outcome, r.Stdout)
	}
}

// Over the memory limit the kernel kills (the Sentry, and with it the
// sandbox): exit 137 and OOMKilled.
func TestMemoryLimitKills(t *testing.T) {
	img, _ := env.Image(t, "python3.13")
	cfg := testenv.SandboxConfig(img)
	r := run(t, cfg, sandbox.Job{MemoryBytes: 64 << 20,
		Argv: []string{"/usr/bin/python3.13", "-c", "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))\n"}})
	if !r.OOMKilled || r.ExitCode != 137 || r.TimedOut {
		t.Errorf("got %+v stderr %q", r.Outcome, r.Stderr)
	}
}

// Processes and threads stop at MaxPids inside the Sentry.
func TestThreadAndForkBombsStop(t *testing.T) {
	img, _ := env.Image(t, "python3.13")
	cfg := testenv.SandboxConfig(img)
	cfg.MaxPids = 64
	r := run(t, cfg, sandbox.Job{Timeout: 30 * time.Second, Argv: []string{"/usr/bin/python3.13", "-c",
		"import threading, time\nn = 0\ntry:\n    while True:\n        threading.Thread(target=time.sleep, args=(60,), daemon=True).start(); n += 1\nexcept RuntimeError as e:\n    print('stopped at', n)\n"}})
	if !strings.HasPrefix(r.Stdout, "stopped at") || r.TimedOut {
		t.Errorf("thread bomb: %+v stdout %q stderr %q", r.Outcome, r.Stdout, r.Stderr)
	}
	img, _ = env.Image(t, "bash")
	r = run(t, cfg, sandbox.Job{Timeout: 5 * time.Second, Argv: bash("bomb() { bomb | bomb & }; bomb; sleep 3; echo survived")})
	if r.ExitCode == 0 && !strings.Contains(r.Stdout, "survived") {
		t.Errorf("fork bomb: %+v stdout %q", r.Outcome, r.Stdout)
	}
}

// Output reaches the writers while the program still runs, and a flood is
// drained without blocking (the caller's writers cap it, not the backend).
func TestOutputStreamsAndFloods(t *testing.T) {
	img, _ := env.Image(t, "bash")
	b := backend(t)
	s, err := b.Create(context.Background(), testenv.SandboxConfig(img))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	early := make(chan struct{})
	var count atomic.Int64
	out := writerFunc(func(p []byte) (int, error) {
		if count.Add(int64(len(p))) >= 5 && strings.HasPrefix(string(p), "first") {
			close(early)
		}
		return len(p), nil
	})
	done := make(chan sandbox.Outcome, 1)
	go func() {
		o, err := s.Run(context.Background(), sandbox.Job{Argv: bash("echo first; sleep 2; head -c 100000000 /dev/zero"), Dir: "/tmp",
			Timeout: 60 * time.Second, MaxReturnBytes: 1, Stdout: out, Stderr: io.Discard})
		if err != nil {
			t.Error(err)
		}
		done <- o
	}()
	select {
	case <-early:
	case <-done:
		t.Fatal("the first line arrived only after the program ended")
	case <-time.After(60 * time.Second):
		t.Fatal("no output")
	}
	if o := <-done; o.ExitCode != 0 || count.Load() != 6+100000000 {
		t.Errorf("flood: %+v, %d bytes", o, count.Load())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Without a network the sandbox has loopback only, and it works.
func TestNetworkNoneHasOnlyLoopback(t *testing.T) {
	img, _ := env.Image(t, "python3.13")
	r := run(t, testenv.SandboxConfig(img), sandbox.Job{Argv: []string{"/usr/bin/python3.13", "-c", `import socket
print(sorted(n for _, n in socket.if_nameindex()))
srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen()
socket.create_connection(srv.getsockname(), timeout=2)
print('loopback works')
try:
    socket.create_connection(('192.0.2.1', 80), timeout=2); print('reached')
except OSError as e: print('unreachable')
`}})
	if r.Stdout != "['lo']\nloopback works\nunreachable\n" {
		t.Errorf("stdout %q stderr %q", r.Stdout, r.Stderr)
	}
}

// Run runs at most once.
func TestRunOnlyOnce(t *testing.T) {
	img, _ := env.Image(t, "bash")
	s, err := backend(t).Create(context.Background(), testenv.SandboxConfig(img))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	job := sandbox.Job{Argv: bash("true"), Dir: "/", Timeout: 10 * time.Second, MaxReturnBytes: 1}
	if _, err := s.Run(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(context.Background(), job); err == nil {
		t.Error("a second Run succeeded")
	}
}

// Cancelling the context kills the sandbox at once; teardown is verified
// and nothing is left (no runsc process, state, bundle or cgroup).
func TestCancelKillsAtOnce(t *testing.T) {
	img, _ := env.Image(t, "bash")
	b := backend(t)
	before := leakcheck.Take(leakOpts)
	s, err := b.Create(context.Background(), testenv.SandboxConfig(img))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	out := writerFunc(func(p []byte) (int, error) {
		select {
		case <-started:
		default:
			close(started)
		}
		return len(p), nil
	})
	go func() {
		<-started
		cancel()
	}()
	begin := time.Now()
	_, err = s.Run(ctx, sandbox.Job{Argv: bash("echo hi; exec sleep 60"), Dir: "/", Timeout: 60 * time.Second, MaxReturnBytes: 1, Stdout: out})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run after cancel: %v", err)
	}
	if d := time.Since(begin); d > 20*time.Second {
		t.Errorf("cancel took %s", d)
	}
	if td := s.Destroy(); !td.Purged {
		t.Errorf("teardown: %v", td.Err)
	}
	checkClean(t, before)
}

// Sandboxes destroyed in every state leave nothing: unused, finished, timed
// out; the image on disk is untouched.
func TestTeardownLeavesNothing(t *testing.T) {
	img, _ := env.Image(t, "bash")
	b := backend(t)
	imageBefore := imageState(t, img.RootFS)
	before := leakcheck.Take(leakOpts)
	unused, err := b.Create(context.Background(), testenv.SandboxConfig(img))
	if err != nil {
		t.Fatal(err)
	}
	if td := unused.Destroy(); !td.Purged {
		t.Errorf("unused sandbox: %v", td.Err)
	}
	run(t, testenv.SandboxConfig(img), sandbox.Job{Argv: bash("touch /etc/new /root/new; rm -rf /usr/share/doc; (sleep 100 &); echo x")})
	run(t, testenv.SandboxConfig(img), sandbox.Job{Argv: bash("sleep 100"), Timeout: time.Second})
	checkClean(t, before)
	if after := imageState(t, img.RootFS); after != imageBefore {
		t.Errorf("the image changed on disk:\nbefore %s\nafter  %s", imageBefore, after)
	}
}

// checkClean fails the test when anything of a sandbox is left.
func checkClean(t *testing.T, before leakcheck.Snapshot) {
	t.Helper()
	if left := leakcheck.WaitClean(before, leakOpts, 10*time.Second); len(left) > 0 {
		t.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
	}
	if procs := runscProcesses(); len(procs) > 0 {
		t.Errorf("runsc processes left: %v", procs)
	}
	if left := leftoverState(false); len(left) > 0 {
		t.Errorf("runsc state or bundles left: %v", left)
	}
	if left := groupLeftovers(); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
}

// runscProcesses lists processes running runsc with this suite's state
// directory (runsc itself, its gofer and Sentry).
func runscProcesses() []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(data), testStateDir) {
			out = append(out, strings.ReplaceAll(string(data), "\x00", " "))
		}
	}
	return out
}

// groupLeftovers lists sandbox cgroups below the suite's parent on every
// hierarchy (runsc adds controllers leakcheck's memory/pids/cpu view may not
// cover).
func groupLeftovers() []string {
	var out []string
	for _, p := range cgroups.HierarchyDirs(testCgroupParent) {
		entries, _ := os.ReadDir(p)
		for _, e := range entries {
			if e.IsDir() {
				out = append(out, filepath.Join(p, e.Name()))
			}
		}
	}
	return out
}

// imageState summarises the image's top level and a few directories a
// sandbox wrote to: names, sizes and modification times.
func imageState(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	for _, dir := range []string{".", "etc", "root", "usr/share", "tmp", "code"} {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(filepath.Join(root, dir))
		b.WriteString(dir + "@" + fi.ModTime().String() + ":")
		for _, e := range entries {
			b.WriteString(" " + e.Name())
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Every writable place is size-limited, and the tmpfs ones inode-limited:
// a full one fails with ENOSPC and the program goes on.
func TestFileSystemLimits(t *testing.T) {
	img, _ := env.Image(t, "bash")
	cfg := testenv.SandboxConfig(img)
	cfg.TmpBytes, cfg.WritableBytes, cfg.MaxInodes = 2<<20, 4<<20, 200
	r := run(t, cfg, sandbox.Job{Timeout: 60 * time.Second, Argv: bash(`for d in /tmp /dev/shm /code /root /var/tmp; do
  case "$(dd if=/dev/zero of=$d/fill bs=1M count=20 2>&1)" in *"No space left"*) echo "$d full";; *) echo "$d NOT full";; esac
  rm -f $d/fill
done
for d in /tmp /dev/shm /code; do
  mkdir $d/many && cd $d/many && i=0; while : > f$i 2>/dev/null; do i=$((i+1)); [ $i -gt 1000 ] && break; done; echo "$d files stopped at $i"
done`)})
	want := "/tmp full\n/dev/shm full\n/code full\n/root full\n/var/tmp full\n"
	if !strings.HasPrefix(r.Stdout, want) {
		t.Errorf("stdout %q, want it to start with %q", r.Stdout, want)
	}
	for _, d := range []string{"/tmp", "/dev/shm", "/code"} {
		var n int
		for _, line := range strings.Split(r.Stdout, "\n") {
			if _, err := fmt.Sscanf(line, d+" files stopped at %d", &n); err == nil {
				break
			}
		}
		if n == 0 || n > 200 {
			t.Errorf("%s: file creation stopped at %d, want at most the 200-inode limit (stdout %q)", d, n, r.Stdout)
		}
	}
}
