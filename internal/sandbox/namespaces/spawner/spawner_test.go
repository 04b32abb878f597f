package spawner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
)

// The child the helper starts is always the sandbox's init, which waits on
// its control pipe for a setup before it does anything: these tests look
// at it from outside, through /proc, while it waits.

// testHelper is the helper built from the embedded sources, once per test
// binary, in testHelperDir (removed by TestMain).
var (
	testHelperOnce sync.Once
	testHelperDir  string
	testHelper     string
	testHelperErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if testHelperDir != "" {
		os.RemoveAll(testHelperDir)
	}
	os.Exit(code)
}

// startTestSpawner starts the helper built from the embedded sources.
func startTestSpawner(t *testing.T) *Spawner {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: maps the child to uid 1000000000")
	}
	testHelperOnce.Do(func() {
		if testHelperDir, testHelperErr = os.MkdirTemp("", "spawner-test-"); testHelperErr == nil {
			testHelper, testHelperErr = Build(filepath.Join(testHelperDir, BinaryName))
		}
	})
	if testHelperErr != nil {
		t.Fatal(testHelperErr)
	}
	s, err := Start(testHelper)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
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

// closeChildEnds closes the ends the child holds copies of.
func (p *childPipes) closeChildEnds() {
	for _, f := range []*os.File{p.outW, p.errW, p.statusW, p.ctlR} {
		f.Close()
	}
}

const namespaces = syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS

func initRequest(p *childPipes) Request {
	return Request{CloneFlags: namespaces, UIDMap: "0 1000000000 65536\n", GIDMap: "0 1000000000 65536\n",
		Stdout: p.outW, Stderr: p.errW, Control: p.ctlR, Status: p.statusW}
}

// spawnInit starts an init that waits (its control pipe stays open) until
// the test ends.
func spawnInit(t *testing.T, s *Spawner, r Request, p *childPipes) *Process {
	t.Helper()
	proc, err := s.Spawn(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	p.closeChildEnds()
	t.Cleanup(func() {
		proc.Kill()
		proc.Wait()
	})
	return proc
}

// procFile reads /proc/PID/name.
func procFile(t *testing.T, pid int, name string) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// statusField is a field of /proc/PID/status, its values joined by spaces.
func statusField(t *testing.T, pid int, field string) string {
	t.Helper()
	for _, line := range strings.Split(procFile(t, pid, "status"), "\n") {
		if name, value, ok := strings.Cut(line, ":"); ok && name == field {
			return strings.Join(strings.Fields(value), " ")
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return ""
}

// pipeLink is how /proc names the pipe f is an end of.
func pipeLink(t *testing.T, f *os.File) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("pipe:[%d]", st.Ino)
}

// A spawned init is pid 1 of new namespaces, root inside mapped to the
// given uid outside, in a session of its own, with exactly fds 0-4 (0 on
// /dev/null, 1-4 the pipes asked for) and none of the engine's environment.
func TestSpawnedChildIsIsolated(t *testing.T) {
	s := startTestSpawner(t)
	p := newChildPipes(t)
	proc := spawnInit(t, s, initRequest(p), p)
	for _, ns := range []string{"user", "pid", "mnt", "net", "ipc", "uts"} {
		mine, _ := os.Readlink("/proc/self/ns/" + ns)
		theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", proc.Pid, ns))
		if err != nil || theirs == mine {
			t.Errorf("child shares our %s namespace (%s, %v)", ns, mine, err)
		}
	}
	if got := statusField(t, proc.Pid, "NSpid"); got != fmt.Sprintf("%d 1", proc.Pid) {
		t.Errorf("NSpid %q: not pid 1 of its own pid namespace", got)
	}
	if got := statusField(t, proc.Pid, "NSsid"); got != fmt.Sprintf("%d 1", proc.Pid) {
		t.Errorf("NSsid %q: not in a session of its own", got)
	}
	if got := strings.Join(strings.Fields(procFile(t, proc.Pid, "uid_map")), " "); got != "0 1000000000 65536" {
		t.Errorf("uid_map %q", got)
	}
	if got := statusField(t, proc.Pid, "Uid"); got != "1000000000 1000000000 1000000000 1000000000" {
		t.Errorf("Uid %q: not root of its user namespace", got)
	}
	want := map[string]string{"0": "/dev/null", "1": pipeLink(t, p.out), "2": pipeLink(t, p.errR), "3": pipeLink(t, p.ctl), "4": pipeLink(t, p.status)}
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", proc.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		link, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", proc.Pid, e.Name()))
		if want[e.Name()] != link {
			t.Errorf("fd %s is %q, want %q", e.Name(), link, want[e.Name()])
		}
		delete(want, e.Name())
	}
	if len(want) > 0 {
		t.Errorf("fds missing: %v", want)
	}
	if env := procFile(t, proc.Pid, "environ"); env != "" {
		t.Errorf("init's environment is %q, want empty", env)
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
	s := startTestSpawner(t)
	const owner = 1_100_000_123
	for _, want := range []uint32{owner, 0} {
		p := newChildPipes(t)
		r := initRequest(p)
		r.OwnerUID = want
		proc := spawnInit(t, s, r, p)
		if got := userNamespaceOwner(t, proc.Pid); got != want {
			t.Errorf("owner %d, want %d", got, want)
		}
		if got := strings.Join(strings.Fields(procFile(t, proc.Pid, "uid_map")), " "); got != "0 1000000000 65536" {
			t.Errorf("child with owner %d: uid_map %q", want, got)
		}
		if got := statusField(t, proc.Pid, "NSpid"); got != fmt.Sprintf("%d 1", proc.Pid) {
			t.Errorf("child with owner %d: NSpid %q", want, got)
		}
		if got := statusField(t, s.Pid(), "Uid"); got != "0 0 0 0" {
			t.Errorf("the helper is not root again after a spawn with owner %d: Uid %q", want, got)
		}
	}
}

// A failed step is named with its errno, and the helper keeps serving.
func TestSpawnReportsFailedStep(t *testing.T) {
	s := startTestSpawner(t)
	p := newChildPipes(t)
	r := initRequest(p)
	r.CgroupProcs = []string{filepath.Join(t.TempDir(), "no-such-group", "cgroup.procs")}
	_, err := s.Spawn(context.Background(), r)
	if err == nil || !strings.Contains(err.Error(), "join cgroup") || !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("want a join cgroup ENOENT error, got %v", err)
	}
	p2 := newChildPipes(t)
	spawnInit(t, s, initRequest(p2), p2)
}

// Kill ends an init that would otherwise wait forever, and Wait sees it.
func TestKillAndWait(t *testing.T) {
	s := startTestSpawner(t)
	p := newChildPipes(t)
	proc, err := s.Spawn(context.Background(), initRequest(p))
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
	s := startTestSpawner(t)
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
	joined := fmt.Sprintf("net:[%d]", st.Ino)
	p := newChildPipes(t)
	r := initRequest(p)
	r.CloneFlags &^= syscall.CLONE_NEWNET
	r.JoinNetNS, r.NetNSFD = true, fd
	proc := spawnInit(t, s, r, p)
	if got, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", proc.Pid)); got != joined {
		t.Errorf("child in network namespace %s, want %s", got, joined)
	}
	// The helper went home: the next child gets a new namespace again.
	p2 := newChildPipes(t)
	proc2 := spawnInit(t, s, initRequest(p2), p2)
	if got, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", proc2.Pid)); got == joined {
		t.Errorf("a later child was born in the joined namespace too")
	}
}

// A closed spawner refuses further requests instead of hanging.
func TestClosedSpawnerRefuses(t *testing.T) {
	s := startTestSpawner(t)
	s.Close()
	if _, err := s.Spawn(context.Background(), initRequest(newChildPipes(t))); err == nil {
		t.Fatal("a closed spawner spawned")
	}
}

// The child is in its cgroups before init does anything: while it still
// waits for its setup.
func TestSpawnJoinsCgroupsBeforeInit(t *testing.T) {
	s := startTestSpawner(t)
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
	r := initRequest(p)
	r.CgroupProcs = g.ProcsFiles()
	proc, err := s.Spawn(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	p.closeChildEnds()
	cg := procFile(t, proc.Pid, "cgroup")
	if !strings.Contains(cg, fmt.Sprintf("scratchrun-spawner-test-%d/child", os.Getpid())) {
		t.Errorf("init was not in its cgroup when it started:\n%s", cg)
	}
	if !slices.Contains(g.Procs(), proc.Pid) {
		t.Errorf("the group does not hold init (%d): %v", proc.Pid, g.Procs())
	}
	proc.Kill()
	proc.Wait()
}

// Requests that would not isolate the child are refused, and so are those
// without a namespace init needs (a shared IPC namespace would reach the
// host's System V IPC).
func TestSpawnRefusesWeakRequests(t *testing.T) {
	s := startTestSpawner(t)
	for name, flags := range map[string]uintptr{
		"no user namespace":    namespaces &^ syscall.CLONE_NEWUSER,
		"no pid namespace":     namespaces &^ syscall.CLONE_NEWPID,
		"no mount namespace":   namespaces &^ syscall.CLONE_NEWNS,
		"no ipc namespace":     namespaces &^ syscall.CLONE_NEWIPC,
		"no uts namespace":     namespaces &^ syscall.CLONE_NEWUTS,
		"no network namespace": namespaces &^ syscall.CLONE_NEWNET,
		"CLONE_VM":             namespaces | syscall.CLONE_VM,
	} {
		p := newChildPipes(t)
		r := initRequest(p)
		r.CloneFlags = flags
		if proc, err := s.Spawn(context.Background(), r); err == nil {
			proc.Kill()
			proc.Wait()
			t.Errorf("%s: spawned", name)
		} else if !strings.Contains(err.Error(), "malformed request") {
			t.Errorf("%s: %v", name, err)
		}
	}
	// And the helper still serves good ones.
	p := newChildPipes(t)
	spawnInit(t, s, initRequest(p), p)
}

// A helper of another protocol version is refused at Start.
func TestStartRefusesOtherProtocol(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	dir := t.TempDir()
	for _, name := range sourceFiles() {
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
	if out, err := exec.Command("/bin/sh", filepath.Join(dir, "build.sh"), bin).CombinedOutput(); err != nil {
		t.Fatalf("build.sh: %v: %s", err, out)
	}
	if s, err := Start(bin); err == nil {
		s.Close()
		t.Fatal("started a helper of another protocol version")
	} else if !strings.Contains(err.Error(), "another protocol") {
		t.Fatalf("unexpected error: %v", err)
	}
}
