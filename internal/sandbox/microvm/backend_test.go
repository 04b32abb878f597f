package microvm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// A job runs on the guest's own kernel, not the host's, as root of the
// guest, on the image with its own owners (0-based, as the image was
// built) and with the same small /dev as the other backends.
func TestGuestHasItsOwnKernel(t *testing.T) {
	b := backend(t)
	img, _ := env.Image(t, "bash")
	r := run(t, testenv.SandboxConfig(img), sandbox.Job{Argv: []string{"/bin/bash", "-c", "uname -r; id -u; stat -c '%u %g' /etc/shadow; ls /dev | tr '\\n' ' '"}})
	var host unix.Utsname
	if err := unix.Uname(&host); err != nil {
		t.Fatal(err)
	}
	hostRelease := unix.ByteSliceToString(host.Release[:])
	lines := strings.Split(r.Stdout, "\n")
	if r.ExitCode != 0 || len(lines) < 4 {
		t.Fatalf("exit %d stdout %q stderr %q", r.ExitCode, r.Stdout, r.Stderr)
	}
	if lines[0] == hostRelease || lines[0] != b.KernelRelease() {
		t.Errorf("uname -r in the guest is %q; the host's is %q and the guest kernel's %q", lines[0], hostRelease, b.KernelRelease())
	}
	if lines[1] != "0" || lines[2] != "0 42" {
		t.Errorf("uid %q, /etc/shadow owned by %q: want 0 and \"0 42\" (the image's own owners)", lines[1], lines[2])
	}
	if want := "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero "; lines[3] != want {
		t.Errorf("/dev holds %q, want %q", lines[3], want)
	}
}

// Input and returned files cross the virtio-serial ports byte for byte,
// whatever the bytes.
func TestFilesAreBinarySafe(t *testing.T) {
	img, _ := env.Image(t, "bash")
	data := make([]byte, 3*256+7)
	for i := range data {
		data[i] = byte(i * 7)
	}
	r := run(t, testenv.SandboxConfig(img), sandbox.Job{
		Argv:        []string{"/bin/bash", "-c", "cat /tmp/in.bin /tmp/in.bin > /tmp/out.bin; printf '\\0\\377'"},
		Files:       []sandbox.File{{Path: "/tmp/in.bin", Data: data}},
		ReturnFiles: []string{"/tmp/out.bin"},
	})
	if want := append(append([]byte(nil), data...), data...); !bytes.Equal(r.Files["/tmp/out.bin"], want) {
		t.Errorf("returned %d bytes, want the %d of the input twice (notes %q)", len(r.Files["/tmp/out.bin"]), len(want), r.Notes)
	}
	if r.Stdout != "\x00\xff" {
		t.Errorf("stdout %q", r.Stdout)
	}
}

// Twenty calls in a row leave no QEMU process, socket, file or cgroup
// behind, and each one's teardown is verified.
func TestTwentyCallsLeaveNothing(t *testing.T) {
	b := backend(t)
	img, _ := env.Image(t, "bash")
	before := level.Snapshot()
	stateBefore := stateFiles(t)
	for i := range 20 {
		r := run(t, testenv.SandboxConfig(img), sandbox.Job{Argv: []string{"/bin/bash", "-c", "echo $((6*7))"}})
		if r.Stdout != "42\n" || !r.Teardown.Purged {
			t.Fatalf("call %d: stdout %q, teardown %+v", i, r.Stdout, r.Teardown)
		}
	}
	level.CheckClean(t, before)
	if left := qemuProcesses(b); len(left) > 0 {
		t.Errorf("QEMU processes left: %v", left)
	}
	if after := stateFiles(t); after != stateBefore {
		t.Errorf("state directory held %q before and %q after", stateBefore, after)
	}
	if b.Cgroups() != nil {
		if left := b.Cgroups().Leftovers(); len(left) > 0 {
			t.Errorf("cgroups left: %v", left)
		}
	}
}

// stateFiles lists the backend's state directory.
func stateFiles(t *testing.T) string {
	t.Helper()
	entries, err := os.ReadDir(level.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

// qemuProcesses lists the live processes running this backend's QEMU
// with this backend's initramfs.
func qemuProcesses(b *Backend) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(data), b.initramfs) {
			out = append(out, filepath.Base(filepath.Dir(p)))
		}
	}
	return out
}

// A host where KVM cannot run a guest gets software emulation, and says
// so: at start (Limitations) and to front ends (SoftwareEmulation).
func TestNoUsableKVMMeansEmulationSaidOut(t *testing.T) {
	backend(t) // the shared one first: its probe, and the kernel it checks
	// QEMU runs as a uid of its own and must reach the state directory.
	dir := level.StateDir + "-nokvm"
	defer os.RemoveAll(dir)
	b, err := New(Options{StateDir: filepath.Join(dir, "state"), CgroupParent: level.CgroupParent + "-nokvm",
		KVMDevice: filepath.Join(dir, "no-kvm"), ProbeCacheDir: filepath.Join(dir, "probes")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	}()
	if !b.SoftwareEmulation() || b.Accel() != AccelTCG {
		t.Errorf("accelerator %q without a KVM device", b.Accel())
	}
	if said := strings.Join(b.Limitations(), "\n"); !strings.Contains(said, EmulationWarning) || !strings.Contains(said, "no-kvm") {
		t.Errorf("limitations %q do not give the warning and why", said)
	}
}

// A QEMU that is not there is a clear error at start, naming it and how
// to install it; so is a missing guest kernel.
func TestMissingPiecesAreClearErrorsAtStart(t *testing.T) {
	testenv.SkipIfShort(t, "opens the microvm backend, as root")
	dir := t.TempDir()
	_, err := New(Options{StateDir: dir, QEMU: filepath.Join(dir, "qemu-system-x86_64")})
	if err == nil || !strings.Contains(err.Error(), "QEMU") || !strings.Contains(err.Error(), "install-microvm.sh") {
		t.Errorf("missing QEMU: %v", err)
	}
	_, err = New(Options{StateDir: dir, Kernel: filepath.Join(dir, "no-kernel")})
	if err == nil || !strings.Contains(err.Error(), "guest kernel") || !strings.Contains(err.Error(), "install-microvm.sh") {
		t.Errorf("missing kernel: %v", err)
	}
}

// A job's memory limit below what the warm guest's user cgroup already
// uses is refused before anything of the job runs (the engine then uses a
// fresh sandbox), as on the other backends.
func TestLimitBelowUsageIsRefused(t *testing.T) {
	img, _ := env.Image(t, "python3.13")
	cfg := testenv.SandboxConfig(img)
	cfg.Warm = true
	cfg.Prestart = &sandbox.Prestart{Argv: []string{"/usr/bin/python3", "-c", "x = bytearray(96 << 20); import os; os.read(3, 1)"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/tmp"}
	b := backend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := b.Create(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	// Let the interpreter take its memory.
	time.Sleep(3 * time.Second)
	_, err = s.Run(ctx, sandbox.Job{Argv: []string{"/usr/bin/python3", "/code/main.py"}, Dir: "/tmp", Timeout: 10 * time.Second,
		MemoryBytes: 64 << 20, MaxReturnBytes: 1, Files: []sandbox.File{{Path: "/code/main.py", Data: []byte("print(1)")}}})
	if err == nil || !strings.Contains(err.Error(), sandbox.ErrLimitBelowUsage.Error()) {
		t.Errorf("got %v, want %v", err, sandbox.ErrLimitBelowUsage)
	}
}

// After the first guest of a shape boots and is saved, the next ones are
// restored from it, each with the host's clock and randomness of its own:
// no two calls see the same random bytes, and none lives at the moment
// the guest was saved.
func TestRestoredGuestsHaveTheirOwnRandomness(t *testing.T) {
	b := backend(t)
	img, _ := env.Image(t, "bash")
	cfg := testenv.SandboxConfig(img)
	cfg.MemoryBytes = 200 << 20 // a shape of this test's own
	seen := map[string]bool{}
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		start := time.Now()
		s, err := b.Create(ctx, cfg)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		created := time.Since(start)
		var out, errs bytes.Buffer
		o, err := s.Run(ctx, sandbox.Job{Argv: []string{"/bin/bash", "-c", "head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'; echo; date +%s"},
			Dir: "/tmp", Timeout: 30 * time.Second, MemoryBytes: cfg.MemoryBytes, MaxReturnBytes: 1,
			Env: []string{"PATH=/usr/bin:/bin"}, Stdout: &out, Stderr: &errs})
		restored := s.(*vmSandbox).restored
		td := s.Destroy()
		cancel()
		if err != nil || o.ExitCode != 0 || !td.Purged {
			t.Fatalf("call %d: %v, exit %d, output %q, teardown %+v", i, err, o.ExitCode, out.String(), td)
		}
		t.Logf("call %d: restored %v, created in %s", i, restored, created)
		if restored != (i > 0) {
			t.Errorf("call %d: restored %v", i, restored)
		}
		lines := strings.Fields(out.String())
		if len(lines) != 2 || len(lines[0]) != 32 {
			t.Fatalf("call %d: output %q, stderr %q, notes %q%s", i, out.String(), errs.String(), o.Notes, s.(*vmSandbox).Diagnostics())
		}
		if seen[lines[0]] {
			t.Errorf("call %d read random bytes %s an earlier call read", i, lines[0])
		}
		seen[lines[0]] = true
		var guest int64
		fmt.Sscan(lines[1], &guest)
		if d := time.Now().Unix() - guest; d < -5 || d > 60 {
			t.Errorf("call %d: the guest's clock is %d s off the host's", i, d)
		}
	}
}

// A machine that fails to start (here a VMM that exits at once) is torn
// down whole: Create returns the error promptly and leaves nothing.
func TestAFailedStartIsTornDown(t *testing.T) {
	b := backend(t)
	img, _ := env.Image(t, "bash")
	before := level.Snapshot()
	saved := b.vmm
	b.vmm = &QEMUVMM{Binary: "/bin/false", TBMiB: tbMiB}
	defer func() { b.vmm = saved }()
	done := make(chan error, 1)
	go func() {
		_, err := b.Create(context.Background(), testenv.SandboxConfig(img))
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Create succeeded with a VMM that exits at once")
		}
	case <-time.After(time.Minute):
		t.Fatal("Create did not return within a minute of its VMM's exit")
	}
	level.CheckClean(t, before)
}
