package spawner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
)

// childMode makes the test binary act as a spawned init: it reports what it
// sees on fd 1, then waits for fd 3 to close (or EOF) before exiting.
const childMode = "SPAWNER_TEST_CHILD=1"

func TestMain(m *testing.M) {
	for _, kv := range os.Environ() {
		if kv == childMode {
			os.Exit(child())
		}
	}
	os.Exit(m.Run())
}

func child() int {
	// Before anything of ours opens a descriptor: which are open beyond 0-4?
	var extra []string
	for fd := 0; fd < 256; fd++ {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && fd > 4 {
			link, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
			extra = append(extra, fmt.Sprint(fd, link))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "extra fds=[%s]\n", strings.Join(extra, ","))
	for _, ns := range []string{"user", "pid", "mnt", "net", "ipc", "uts"} {
		link, _ := os.Readlink("/proc/self/ns/" + ns)
		fmt.Fprintf(&b, "%s=%s\n", ns, link)
	}
	uidMap, _ := os.ReadFile("/proc/self/uid_map")
	fmt.Fprintf(&b, "pid=%d uid=%d gid=%d sid=%d\n", os.Getpid(), os.Getuid(), os.Getgid(), mustSid())
	fmt.Fprintf(&b, "uid_map=%s\n", strings.Join(strings.Fields(string(uidMap)), " "))
	stdin, _ := os.Readlink("/proc/self/fd/0")
	fmt.Fprintf(&b, "stdin=%s env=%s\n", stdin, strings.Join(os.Environ(), ","))
	if os.Getenv("SPAWNER_TEST_CGROUP") != "" {
		cg, _ := os.ReadFile("/proc/self/cgroup")
		fmt.Fprintf(&b, "cgroup-at-start=%s\n", cg)
	}
	os.Stdout.WriteString(b.String())
	os.NewFile(4, "fd4").WriteString("fd4 ok\n")
	// Block until the test closes our fd 3 (or kills us).
	_, _ = io.ReadAll(os.NewFile(3, "fd3"))
	return 0
}

func mustSid() int {
	sid, _ := unix.Getsid(0)
	return sid
}

// startTestSpawner builds the helper and copies the test binary where an
// unprivileged mapped uid can execute it.
func startTestSpawner(t *testing.T) (*Spawner, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: maps the child to uid 1000000000")
	}
	dir, err := os.MkdirTemp("", "spawner-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	helper, err := Build(filepath.Join(dir, BinaryName))
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	program := filepath.Join(dir, "child")
	if err := os.WriteFile(program, data, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Start(helper)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, program
}

type childPipes struct {
	out, errR, ctl, status    *os.File // our ends
	outW, errW, ctlR, statusW *os.File // the child's
}

func newChildPipes(t *testing.T) *childPipes {
	t.Helper()
	var p childPipes
	var err error
	for _, pair := range [][2]**os.File{{&p.out, &p.outW}, {&p.errR, &p.errW}, {&p.ctlR, &p.ctl}, {&p.status, &p.statusW}} {
		if *pair[0], *pair[1], err = os.Pipe(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, f := range []*os.File{p.out, p.errR, p.ctl, p.status, p.outW, p.errW, p.ctlR, p.statusW} {
			f.Close()
		}
	})
	return &p
}

// noCgroupFiles keeps the child's Go runtime from holding the host's cgroup
// CPU files open (it would otherwise, to size GOMAXPROCS).
const noCgroupFiles = "GODEBUG=containermaxprocs=0,updatemaxprocs=0"

// runChild spawns r with p's pipes, lets the child finish (its fd 3 is
// closed at once) and returns what it wrote to fds 1, 2 and 4.
func runChild(t *testing.T, s *Spawner, r Request, p *childPipes) (stdout, stderr, fd4 string) {
	t.Helper()
	proc, err := s.Spawn(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []*os.File{p.outW, p.errW, p.statusW, p.ctlR, p.ctl} {
		f.Close() // the child holds its own copies; closing ctl lets it exit
	}
	out, _ := io.ReadAll(p.out)
	errOut, _ := io.ReadAll(p.errR)
	status, _ := io.ReadAll(p.status)
	proc.Wait()
	return string(out), string(errOut), string(status)
}

const namespaces = syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS

func childRequest(program string, p *childPipes) Request {
	return Request{Path: program, Argv: []string{"child"}, Env: []string{childMode, "K=v", noCgroupFiles},
		CloneFlags: namespaces, UIDMap: "0 1000000000 65536\n", GIDMap: "0 1000000000 65536\n",
		Stdout: p.outW, Stderr: p.errW, FD3: p.ctlR, FD4: p.statusW}
}

// A spawned child is pid 1 of new namespaces, root inside mapped to the
// given uid outside, in a session of its own, with exactly fds 0-4 (0 on
// /dev/null) and exactly the environment asked for.
func TestSpawnedChildIsIsolated(t *testing.T) {
	s, program := startTestSpawner(t)
	p := newChildPipes(t)
	got, _, status := runChild(t, s, childRequest(program, p), p)
	for _, ns := range []string{"user", "pid", "mnt", "net", "ipc", "uts"} {
		mine, _ := os.Readlink("/proc/self/ns/" + ns)
		if !strings.Contains(got, ns+"=") || strings.Contains(got, ns+"="+mine+"\n") {
			t.Errorf("child shares our %s namespace (%s):\n%s", ns, mine, got)
		}
	}
	for _, want := range []string{"pid=1 uid=0 gid=0 sid=1", "uid_map=0 1000000000 65536", "extra fds=[]", "stdin=/dev/null env=" + childMode + ",K=v," + noCgroupFiles + "\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("child output lacks %q:\n%s", want, got)
		}
	}
	if status != "fd4 ok\n" {
		t.Errorf("fd 4 got %q", status)
	}
}

// nsGetOwnerUID is NS_GET_OWNER_UID, _IO(0xb7, 0x4) (x/sys/unix lacks it).
const nsGetOwnerUID = 0xb704

// userNamespaceOwner asks the kernel which host uid owns pid's user
// namespace.
func userNamespaceOwner(t *testing.T, pid int) uint32 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var uid uint32
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), nsGetOwnerUID, uintptr(unsafe.Pointer(&uid))); e != 0 {
		t.Fatalf("NS_GET_OWNER_UID: %v", e)
	}
	return uid
}

// With OwnerUID the child's user namespace is owned by that uid (what the
// kernel counts per user inside it is charged there, not to root), root
// still wrote its maps, and the helper is root again afterwards and keeps
// serving; without it, root owns the namespace.
func TestSpawnGivesUserNamespaceItsOwner(t *testing.T) {
	s, program := startTestSpawner(t)
	const owner = 1_100_000_123
	for _, want := range []uint32{owner, 0} {
		p := newChildPipes(t)
		r := childRequest(program, p)
		r.OwnerUID = want
		proc, err := s.Spawn(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if got := userNamespaceOwner(t, proc.Pid); got != want {
			t.Errorf("owner %d, want %d", got, want)
		}
		for _, f := range []*os.File{p.outW, p.errW, p.statusW, p.ctlR, p.ctl} {
			f.Close()
		}
		out, _ := io.ReadAll(p.out)
		proc.Wait()
		if !strings.Contains(string(out), "pid=1 uid=0 gid=0") || !strings.Contains(string(out), "uid_map=0 1000000000 65536") {
			t.Errorf("child with owner %d saw:\n%s", want, out)
		}
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.Pid()))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(status), "Uid:\t0\t0\t0\t0\n") {
			t.Errorf("the helper is not root again after a spawn with owner %d:\n%s", want, status)
		}
	}
}

// An exec failure names the step and errno, and the helper keeps serving.
func TestSpawnReportsExecFailure(t *testing.T) {
	s, program := startTestSpawner(t)
	p := newChildPipes(t)
	r := childRequest(filepath.Join(filepath.Dir(program), "missing"), p)
	_, err := s.Spawn(context.Background(), r)
	if err == nil || !strings.Contains(err.Error(), "execve") || !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("want an execve ENOENT error, got %v", err)
	}
	proc, err := s.Spawn(context.Background(), childRequest(program, newChildPipes(t)))
	if err != nil {
		t.Fatalf("helper stopped serving after a failed spawn: %v", err)
	}
	proc.Kill()
	proc.Wait()
}

// Kill ends a child that would otherwise wait forever, and Wait sees it.
func TestKillAndWait(t *testing.T) {
	s, program := startTestSpawner(t)
	p := newChildPipes(t)
	proc, err := s.Spawn(context.Background(), childRequest(program, p))
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { proc.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after Kill")
	}
	// Wait returns once the child has exited; the kernel reaps it (the
	// helper ignores SIGCHLD) a moment later.
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(proc.Pid, 0) == nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("pid %d still exists after Kill and Wait", proc.Pid)
			break
		}
	}
	// After Wait the pidfd is closed: Kill must not reach whatever reuses
	// its number.
	if err := proc.Kill(); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Kill after Wait: %v, want os.ErrProcessDone", err)
	}
}

// With JoinNetNS the child is born in the given network namespace.
func TestSpawnJoinsNetworkNamespace(t *testing.T) {
	s, program := startTestSpawner(t)
	netns := make(chan int, 1)
	go func() {
		// This thread enters a new network namespace and never leaves it;
		// the runtime retires it when the goroutine ends locked.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			netns <- -1
			return
		}
		fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			fd = -1
		}
		netns <- fd
	}()
	fd := <-netns
	if fd < 0 {
		t.Fatal("could not make a network namespace")
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	p := newChildPipes(t)
	r := childRequest(program, p)
	r.CloneFlags &^= syscall.CLONE_NEWNET
	r.JoinNetNS, r.NetNSFD = true, fd
	out, stderr, _ := runChild(t, s, r, p)
	if len(out) == 0 {
		t.Logf("child stderr: %s", stderr)
	}
	if want := fmt.Sprintf("net=net:[%d]\n", st.Ino); !strings.Contains(out, want) {
		t.Errorf("child not in the given network namespace (want %q):\n%s", want, out)
	}
	// The helper went home: the next child gets a new namespace again.
	p2 := newChildPipes(t)
	out2, _, _ := runChild(t, s, childRequest(program, p2), p2)
	if strings.Contains(out2, fmt.Sprintf("net=net:[%d]\n", st.Ino)) {
		t.Errorf("a later child was born in the joined namespace too:\n%s", out2)
	}
}

// A closed spawner refuses further requests instead of hanging.
func TestClosedSpawnerRefuses(t *testing.T) {
	s, program := startTestSpawner(t)
	s.Close()
	if _, err := s.Spawn(context.Background(), childRequest(program, newChildPipes(t))); err == nil {
		t.Fatal("a closed spawner spawned")
	}
}

// The child is in its cgroups before it executes anything.
func TestSpawnJoinsCgroupsBeforeExec(t *testing.T) {
	s, program := startTestSpawner(t)
	m, err := cgroups.New(fmt.Sprintf("scratchrun-spawner-test-%d", os.Getpid()))
	if err != nil {
		t.Skipf("no writable cgroup: %v", err)
	}
	defer m.RemoveParent()
	g, err := m.Create("child", cgroups.Limits{MaxPids: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	p := newChildPipes(t)
	r := childRequest(program, p)
	r.Env = append(r.Env, "SPAWNER_TEST_CGROUP=1")
	r.CgroupProcs = g.ProcsFiles()
	out, _, _ := runChild(t, s, r, p)
	if !strings.Contains(out, "cgroup-at-start=") || !strings.Contains(out, fmt.Sprintf("scratchrun-spawner-test-%d/child", os.Getpid())) {
		t.Errorf("child was not in its cgroup when it started:\n%s", out)
	}
}

// Requests that would not isolate the child are refused.
func TestSpawnRefusesWeakRequests(t *testing.T) {
	s, program := startTestSpawner(t)
	for name, flags := range map[string]uintptr{
		"no user namespace": namespaces &^ syscall.CLONE_NEWUSER,
		"no pid namespace":  namespaces &^ syscall.CLONE_NEWPID,
		"CLONE_VM":          namespaces | syscall.CLONE_VM,
	} {
		r := childRequest(program, newChildPipes(t))
		r.CloneFlags = flags
		if proc, err := s.Spawn(context.Background(), r); err == nil {
			proc.Kill()
			proc.Wait()
			t.Errorf("%s: spawned", name)
		}
	}
	// And the helper still serves good ones.
	proc, err := s.Spawn(context.Background(), childRequest(program, newChildPipes(t)))
	if err != nil {
		t.Fatal(err)
	}
	proc.Kill()
	proc.Wait()
}

// A helper of another protocol version is refused at Start.
func TestStartRefusesOtherProtocol(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	dir := t.TempDir()
	for _, name := range sourceFiles {
		data, err := sources.ReadFile("c/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if name == "spawn.c" {
			current := fmt.Sprintf("#define PROTOCOL_VERSION %d\n", protocolVersion)
			if !strings.Contains(string(data), current) {
				t.Fatalf("spawn.c does not define %q", current)
			}
			data = []byte(strings.Replace(string(data), current, "#define PROTOCOL_VERSION 1\n", 1))
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "old")
	if out, err := exec.Command("cc", "-O2", "-o", bin, filepath.Join(dir, "spawn.c"), filepath.Join(dir, "init.c")).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v: %s", err, out)
	}
	if s, err := Start(bin); err == nil {
		s.Close()
		t.Fatal("started a helper of another protocol version")
	} else if !strings.Contains(err.Error(), "another protocol") {
		t.Fatalf("unexpected error: %v", err)
	}
}
