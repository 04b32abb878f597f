//go:build linux && amd64

package seccomp

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/sys/unix"
)

// childEnv marks the re-executed test binary that installs the filter.
// Install cannot be undone, so the filtered checks (TestInChild*) run in a
// child process started by TestInstallInChildProcess.
const childEnv = "SCRATCHRUN_SECCOMP_TEST_CHILD"

func inChild() bool { return os.Getenv(childEnv) == "1" }

// earlyThread is an OS thread that exists before Install, to show that
// SECCOMP_FILTER_FLAG_TSYNC reached threads other than the caller's.
var earlyThread *lockedThread

func TestMain(m *testing.M) {
	if inChild() {
		earlyThread = startLockedThread()
		if err := Install(); err != nil {
			fmt.Fprintln(os.Stderr, "Install:", err)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}

// childTests are the filtered checks; the parent insists each one ran.
var childTests = []string{
	"TestInChildNormalWork",
	"TestInChildDenied",
	"TestInChildAllThreadsFiltered",
	"TestInChildI386ABI",
}

func TestInstallInChildProcess(t *testing.T) {
	if inChild() {
		t.Skip("this is the filtered child")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestInChild", "-test.v", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("filtered child output:\n%s", out)
	if err != nil {
		t.Fatalf("filtered child: %v", err)
	}
	for _, name := range childTests {
		if !bytes.Contains(out, []byte("--- PASS: "+name+" ")) && !bytes.Contains(out, []byte("--- SKIP: "+name+" ")) {
			t.Errorf("%s did not run in the child", name)
		}
	}
}

func requireChild(t *testing.T) {
	t.Helper()
	if !inChild() {
		t.Skip("runs in the filtered child started by TestInstallInChildProcess")
	}
}

// lockedThread is a goroutine locked to its own OS thread that runs
// functions on request.
type lockedThread struct{ req chan func() }

func startLockedThread() *lockedThread {
	lt := &lockedThread{req: make(chan func())}
	ready := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread is dedicated
		close(ready)
		for f := range lt.req {
			f()
		}
	}()
	<-ready
	return lt
}

func (lt *lockedThread) do(f func()) {
	done := make(chan struct{})
	lt.req <- func() { f(); close(done) }
	<-done
}

// TestInChildNormalWork: the Go runtime and ordinary programs keep working
// under the filter.
func TestInChildNormalWork(t *testing.T) {
	requireChild(t)

	t.Run("goroutines and new threads", func(t *testing.T) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		sum := 0
		for i := range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mu.Lock()
				sum += i
				mu.Unlock()
			}()
		}
		wg.Wait()
		if sum != 199*200/2 {
			t.Errorf("sum = %d", sum)
		}
		// Locked goroutines force the runtime to clone new OS threads.
		before := threadCount(t)
		for range 8 {
			lt := startLockedThread()
			lt.do(func() {})
		}
		runtime.GC()
		if after := threadCount(t); after <= before {
			t.Errorf("no new threads: %d before, %d after", before, after)
		}
	})

	t.Run("exec", func(t *testing.T) {
		if err := exec.Command("/bin/true").Run(); err != nil {
			t.Fatalf("/bin/true: %v", err)
		}
		out, err := exec.Command("/bin/sh", "-c", "echo hello; exit 3").Output()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 || string(out) != "hello\n" {
			t.Fatalf("sh: %q, %v", out, err)
		}
	})

	t.Run("children inherit the filter", func(t *testing.T) {
		out, err := exec.Command("/bin/cat", "/proc/self/status").Output()
		if err != nil {
			t.Fatal(err)
		}
		status := parseStatus(out)
		if status["Seccomp"] != "2" || status["NoNewPrivs"] != "1" {
			t.Errorf("child Seccomp=%q NoNewPrivs=%q", status["Seccomp"], status["NoNewPrivs"])
		}
	})

	t.Run("files", func(t *testing.T) {
		dir := t.TempDir()
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		if err := os.WriteFile(a, []byte("data"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(a, b); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(b, a); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(a); err != nil || string(got) != "data" {
			t.Fatalf("read: %q, %v", got, err)
		}
		if entries, err := os.ReadDir(dir); err != nil || len(entries) != 2 {
			t.Fatalf("readdir: %v, %v", entries, err)
		}
		fd, err := unix.Openat2(unix.AT_FDCWD, b, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
		if err != nil {
			t.Fatalf("openat2: %v", err)
		}
		unix.Close(fd)
		if err := os.Remove(a); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("pipes", func(t *testing.T) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		go func() { _, _ = w.Write([]byte("ping")); w.Close() }()
		if got, err := io.ReadAll(r); err != nil || string(got) != "ping" {
			t.Fatalf("pipe: %q, %v", got, err)
		}
	})

	t.Run("time", func(t *testing.T) {
		start := time.Now()
		time.Sleep(10 * time.Millisecond)
		timer := time.NewTimer(5 * time.Millisecond)
		<-timer.C
		ticker := time.NewTicker(time.Millisecond)
		<-ticker.C
		ticker.Stop()
		if el := time.Since(start); el < 15*time.Millisecond {
			t.Errorf("elapsed %v", el)
		}
	})

	t.Run("signals", func(t *testing.T) {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGUSR1)
		defer signal.Stop(ch)
		if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("SIGUSR1 not delivered")
		}
	})

	t.Run("wait4 and kill", func(t *testing.T) {
		pid, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "30"}, &syscall.ProcAttr{})
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("wait4: %v, %v", ws, err)
		}
	})

	t.Run("network", func(t *testing.T) {
		for _, network := range []string{"tcp4", "unix"} {
			addr := "127.0.0.1:0"
			if network == "unix" {
				addr = filepath.Join(t.TempDir(), "sock")
			}
			ln, err := net.Listen(network, addr)
			if err != nil {
				t.Fatalf("%s listen: %v", network, err)
			}
			go func() {
				c, err := ln.Accept()
				if err == nil {
					_, _ = io.Copy(c, c)
					c.Close()
				}
			}()
			c, err := net.Dial(network, ln.Addr().String())
			if err != nil {
				t.Fatalf("%s dial: %v", network, err)
			}
			_, _ = c.Write([]byte("echo"))
			buf := make([]byte, 4)
			if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "echo" {
				t.Fatalf("%s echo: %q, %v", network, buf, err)
			}
			c.Close()
			ln.Close()
		}
	})

	t.Run("getrandom", func(t *testing.T) {
		if _, err := rand.Read(make([]byte, 32)); err != nil {
			t.Fatal(err)
		}
	})
}

// TestInChildDenied: the extra denials, as the kernel reports them.
func TestInChildDenied(t *testing.T) {
	requireChild(t)
	for _, p := range deniedProbes() {
		if got := p.call(t); got != p.want {
			t.Errorf("%s: got %v, want %v", p.name, errnoName(got), errnoName(p.want))
		}
	}
}

// TestInChildAllThreadsFiltered: TSYNC put every thread, including one that
// existed before Install, under the filter and no_new_privs.
func TestInChildAllThreadsFiltered(t *testing.T) {
	requireChild(t)
	var mode int
	var mountErr error
	earlyThread.do(func() {
		mode, _ = unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0)
		mountErr = unix.Mount("none", "/", "scratchrun-no-such-fs", 0, "")
	})
	if mode != 2 || !errors.Is(mountErr, unix.EPERM) {
		t.Errorf("pre-Install thread: seccomp mode %d, mount %v", mode, mountErr)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "status"))
		if err != nil {
			continue // thread exited meanwhile
		}
		status := parseStatus(b)
		if status["Seccomp"] != "2" || status["NoNewPrivs"] != "1" {
			t.Errorf("thread %s: Seccomp=%q NoNewPrivs=%q", task.Name(), status["Seccomp"], status["NoNewPrivs"])
		}
	}
	t.Logf("%d threads checked", len(tasks))
}

// TestInChildI386ABI: a syscall through int $0x80 is refused, including one
// (unshare) that the x86_64 rules deny — the 32-bit table is no way around
// them.
func TestInChildI386ABI(t *testing.T) {
	requireChild(t)
	for _, name := range []string{"getuid32", "unshare"} {
		code, ok := runELF(t, true, name, unix.CLONE_NEWUSER)
		if !ok {
			// Covered by TestPolicyArchCheck at the BPF level.
			t.Skip("the kernel does not run int $0x80 (IA32 emulation off); nothing to bypass here")
		}
		if code != int(unix.EPERM) {
			t.Errorf("i386 %s: exit %d, want %d (EPERM)", name, code, unix.EPERM)
		}
	}
}

// TestSyscallELFHarness checks the probe executables themselves, unfiltered:
// the native variant must work, and the int $0x80 variant must succeed where
// the kernel has 32-bit syscalls, or the filtered EPERM above would prove
// nothing.
func TestSyscallELFHarness(t *testing.T) {
	if inChild() {
		t.Skip("runs unfiltered only")
	}
	if underSeccomp() {
		t.Skip("test process already runs under seccomp")
	}
	want := -os.Getuid() & 0xff
	if code, ok := runELF(t, false, "getuid", 0); !ok || code != want {
		t.Fatalf("native getuid probe: exit %d (ran: %v), want %d", code, ok, want)
	}
	code, ok := runELF(t, true, "getuid32", 0)
	if !ok {
		t.Skip("the kernel does not run int $0x80 (IA32 emulation off)")
	}
	if code != want {
		t.Errorf("i386 getuid32 probe: exit %d, want %d", code, want)
	}
}

// runELF runs a syscallELF probe for the named syscall of the i386 (int80)
// or x86_64 table; ok is false when the kernel kills it with SIGSEGV, which
// int $0x80 gets when the kernel has no 32-bit syscall entry.
func runELF(t *testing.T, int80 bool, name string, arg uint32) (code int, ok bool) {
	t.Helper()
	table := arch.X86_64
	if int80 {
		table = arch.I386
	}
	nr, known := table.SyscallNames[name]
	if !known {
		t.Fatalf("no %s syscall %q", table.Name, name)
	}
	path := filepath.Join(t.TempDir(), "probe-"+name)
	if err := os.WriteFile(path, syscallELF(int80, uint32(nr), arg), 0o755); err != nil {
		t.Fatal(err)
	}
	err := exec.Command(path).Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, true
	case errors.As(err, &ee):
		if ws, isWS := ee.Sys().(syscall.WaitStatus); isWS && ws.Signaled() {
			if ws.Signal() == syscall.SIGSEGV {
				return 0, false
			}
			t.Fatalf("%s probe killed by %v", name, ws.Signal())
		}
		return ee.ExitCode(), true
	default:
		t.Fatalf("%s probe: %v", name, err)
		return 0, false
	}
}

// parseStatus parses /proc/<pid>/status into key/value pairs.
func parseStatus(b []byte) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

func threadCount(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(parseStatus(b)["Threads"])
	if err != nil {
		t.Fatal(err)
	}
	return n
}
