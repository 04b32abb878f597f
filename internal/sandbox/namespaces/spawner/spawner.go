// Package spawner starts namespaces sandboxes' inits through
// scratchrun-spawn, a small C helper (c/spawn.c) the engine keeps running: Go
// itself can only create a user namespace by forking the engine's whole
// address space, which cost several times more per sandbox than the helper's
// fork (see c/spawn.c for the numbers). The helper also carries the
// sandbox's init (c/init.c and the files it names), which its child becomes
// without an exec.
//
// The helper is found next to the running executable (scripts/install.sh
// builds it there), or built from the embedded source with the host's C
// compiler into the backend's state directory, cached by source hash. Both
// build it with c/build.sh, the one recipe.
package spawner

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
)

// sources are the helper's C files and its build recipe (c/build.sh).
//
//go:embed c
var sources embed.FS

// sourceFiles lists the embedded files, in a stable order.
func sourceFiles() []string {
	entries, _ := sources.ReadDir("c")
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// BinaryName is the helper's file name next to scratchrun.
const BinaryName = "scratchrun-spawn"

// protocolVersion must match PROTOCOL_VERSION in c/spawn.c.
const protocolVersion = 7

// replyTimeout bounds a spawn: the helper answers once the child runs init,
// a few milliseconds normally.
const replyTimeout = 30 * time.Second

// ErrDead means the helper is gone or stuck: it serves no more requests.
// The caller starts a new helper (namespaces.Backend does, once per death).
var ErrDead = errors.New("spawner helper gone")

// sourceHash identifies this build's sources.
func sourceHash() string {
	h := sha256.New()
	for _, name := range sourceFiles() {
		data, _ := sources.ReadFile("c/" + name)
		fmt.Fprintf(h, "%s %d\n", name, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)[:6])
}

// Find returns the helper to use: configured if set, else scratchrun-spawn
// next to the running executable, else a build of the embedded source in
// dir (made now if missing and a C compiler exists). It returns "" with the
// reason when there is none.
func Find(configured, dir string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	if self, err := os.Executable(); err == nil {
		candidate := filepath.Join(filepath.Dir(self), BinaryName)
		if fi, err := os.Stat(candidate); err == nil && fi.Mode().IsRegular() {
			return candidate, nil
		}
	}
	target := filepath.Join(dir, "spawn-"+sourceHash())
	if _, err := os.Stat(target); err == nil {
		return target, nil
	}
	return Build(target)
}

// Build compiles the embedded source into target with the host's C compiler
// (cc, else gcc), by the embedded c/build.sh.
func Build(target string) (string, error) {
	compiler := ""
	for _, c := range []string{"cc", "gcc"} {
		if p, err := exec.LookPath(c); err == nil {
			compiler = p
			break
		}
	}
	if compiler == "" {
		return "", errors.New("no C compiler (cc) to build " + BinaryName)
	}
	// A directory of its own: two engines may build at once.
	src, err := os.MkdirTemp(filepath.Dir(target), ".spawn-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	if err := writeSources(src); err != nil {
		return "", err
	}
	tmp := filepath.Join(src, filepath.Base(target)) // a name ending in .so builds the zygote's object
	cmd := exec.Command("/bin/sh", filepath.Join(src, "build.sh"), tmp)
	cmd.Env = append(os.Environ(), "CC="+compiler)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build %s: %v: %s", BinaryName, err, bytes.TrimSpace(out))
	}
	if err := os.Rename(tmp, target); err != nil {
		return "", err
	}
	return target, nil
}

// writeSources writes the embedded sources (and c/build.sh) into dir.
func writeSources(dir string) error {
	for _, name := range sourceFiles() {
		data, err := sources.ReadFile("c/" + name)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Spawner is a running helper. It is safe for concurrent use; requests are
// served one at a time.
type Spawner struct {
	mu   sync.Mutex
	sock int // our end of the SOCK_SEQPACKET pair
	cmd  *exec.Cmd
	dead error // wraps ErrDead once the helper is gone
	// gone mirrors dead != nil for Dead, which must not wait for s.mu:
	// a request holds it until the helper replies, and a zygote pool asks
	// Dead under its own lock.
	gone atomic.Bool
	// exited is closed once the helper has exited and been reaped.
	exited chan struct{}
	// stderr holds a zygote's first words on stderr (nil for the helper).
	stderr *tailBuffer
}

// Wait blocks until the helper has exited (after Close, or its death).
func (s *Spawner) Wait() { <-s.exited }

// Start runs the helper at path.
func Start(path string) (*Spawner, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("spawner socket: %w", err)
	}
	theirs := os.NewFile(uintptr(pair[1]), "spawner")
	defer theirs.Close()
	return start(&exec.Cmd{Path: path, Args: []string{BinaryName}, Env: []string{}}, theirs, pair[0])
}

// start runs cmd with theirs (the socket's other end) as its fd 3, then
// any ExtraFiles cmd has already, and checks the helper's hello on ours.
func start(cmd *exec.Cmd, theirs *os.File, ours int) (*Spawner, error) {
	path := cmd.Path
	cmd.ExtraFiles = append([]*os.File{theirs}, cmd.ExtraFiles...)
	// Dies with the engine, and every sandbox with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setsid: true}
	// PR_SET_PDEATHSIG fires when the thread that started the helper exits,
	// not the process: the starter's thread lives as long as the engine, so
	// no goroutine that exits while locked to its thread (they do, after
	// setns) can take the helper down.
	if err := hostside.StartChild(cmd); err != nil {
		unix.Close(ours)
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	// The child holds its end now: ours would keep the socket from ever
	// reaching EOF, and a helper that dies before its hello would be
	// waited for until replyTimeout.
	theirs.Close()
	s := &Spawner{sock: ours, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.exited) }() // reaped whenever it ends
	tv := unix.NsecToTimeval(replyTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(s.sock, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		s.Close()
		return nil, fmt.Errorf("spawner socket: %w", err)
	}
	// A helper of another build (an old one next to the binary) would
	// misread every request: check its protocol first.
	hello := make([]byte, 4)
	if n, err := retryEINTR(func() (int, error) { return unix.Read(s.sock, hello) }); err != nil || n != 4 || binary.NativeEndian.Uint32(hello) != protocolVersion {
		s.Close()
		// Gone before a sandbox could exist: none is left to kill with it,
		// and the caller finds nothing of it running.
		_ = cmd.Process.Kill()
		<-s.exited
		if err == nil && n == 0 {
			// It ended first (a zygote whose preloads failed, say): its
			// stderr, which the caller adds, says why.
			return nil, fmt.Errorf("%s ended before its hello", path)
		}
		return nil, fmt.Errorf("%s speaks another protocol than this engine (want version %d; rebuild it: scripts/install.sh)", path, protocolVersion)
	}
	return s, nil
}

// Close stops the helper; every process it started and that is still alive
// dies with it (their parent-death signal). Call it after the last sandbox
// is destroyed. It does not wait for a spawn in progress to answer.
func (s *Spawner) Close() error {
	_ = unix.Shutdown(s.sock, unix.SHUT_RDWR) // wakes a Spawn blocked on a reply
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sock >= 0 {
		unix.Close(s.sock) // EOF: the helper exits
		s.sock = -1
	}
	s.markDead(fmt.Errorf("%w: closed", ErrDead))
	return nil
}

// Pid is the helper's process id.
func (s *Spawner) Pid() int { return s.cmd.Process.Pid }

// Kill ends the helper at once (SIGKILL); every child that dies with it
// (a zygote launcher's whole pid namespace) goes too.
func (s *Spawner) Kill() { _ = s.cmd.Process.Kill() }

// Dead reports whether the helper is gone.
func (s *Spawner) Dead() bool { return s.gone.Load() }

// markDead records why the helper is gone; s.mu is held.
func (s *Spawner) markDead(err error) error {
	s.dead = err
	s.gone.Store(true)
	return err
}

// Request describes one sandbox init.
type Request struct {
	// CloneFlags are the CLONE_NEW* namespaces to create: every one but
	// the cgroup namespace (init makes that itself), the network one only
	// when not joined (JoinNetNS).
	CloneFlags uintptr
	// UIDMap and GIDMap are written to the child's uid_map and gid_map
	// (with CLONE_NEWUSER); DenySetgroups writes "deny" to its setgroups
	// first, as an unprivileged parent must.
	UIDMap, GIDMap string
	DenySetgroups  bool
	// CgroupProcs are cgroup.procs files the child is written into before
	// it runs init (so nothing it does escapes its limits or accounting).
	CgroupProcs []string
	// CgroupProcsFiles, instead of CgroupProcs, are those files opened for
	// writing by the engine (a zygote has no cgroup file system of its
	// own, and the kernel checks a write against the opener).
	CgroupProcsFiles []*os.File
	// The child's fds 1 and 2 (the sandbox's output) and its control and
	// status pipes (fds 3 and 4, initproto.ControlFD and StatusFD); fd 0
	// is /dev/null.
	Stdout, Stderr, Control, Status *os.File
	// JoinNetNS makes the child be born in the network namespace NetNSFD
	// (CloneFlags must not include CLONE_NEWNET then).
	JoinNetNS bool
	NetNSFD   int
	// OwnerUID, when not 0, is the host uid that owns the new user
	// namespace (the helper, root, clones with it as its effective uid):
	// what the kernel counts per user inside the namespace is charged to
	// that uid too, not to root. It needs a helper running as root.
	OwnerUID uint32
}

// Process is a spawned init, known by its pidfd (it is not our child: the
// helper's kernel-reaped child; the pidfd cannot name a recycled pid).
type Process struct {
	Pid      int
	mu       sync.Mutex
	pidfd    int // -1 once Wait closed it
	waitOnce sync.Once
}

// request mirrors struct request in c/spawn.c (TestRequestLayoutMatchesC
// compares the two).
type request struct {
	Version       uint32
	WantNetNS     uint32
	CloneFlags    uint64
	DenySetgroups uint32
	StringsLen    uint32
	Cgroupc       uint32
	OwnerUID      uint32
	CgroupFDs     uint32
	Reserved      uint32
}

// requestSize is sizeof(struct request) in c/spawn.c.
const requestSize = 40

// reply mirrors struct reply in c/spawn.c.
type reply struct {
	Pid  int32
	Err  int32
	Step [64]byte
}

// Spawn starts one init and returns once it runs (or failed to start).
func (s *Spawner) Spawn(ctx context.Context, r Request) (*Process, error) {
	var strs bytes.Buffer
	if len(r.CgroupProcs) > 8 || len(r.CgroupProcsFiles) > 8 || len(r.CgroupProcs) > 0 && len(r.CgroupProcsFiles) > 0 {
		return nil, errors.New("spawner: more than 8 cgroup.procs files, or both paths and files")
	}
	for _, v := range append([]string{r.UIDMap, r.GIDMap}, r.CgroupProcs...) {
		if bytes.IndexByte([]byte(v), 0) >= 0 {
			return nil, errors.New("spawner: NUL in an argument")
		}
		strs.WriteString(v)
		strs.WriteByte(0)
	}
	req := request{Version: protocolVersion, CloneFlags: uint64(r.CloneFlags),
		StringsLen: uint32(strs.Len()), Cgroupc: uint32(len(r.CgroupProcs)), OwnerUID: r.OwnerUID}
	if r.DenySetgroups {
		req.DenySetgroups = 1
	}
	fds := []int{int(r.Stdout.Fd()), int(r.Stderr.Fd()), int(r.Control.Fd()), int(r.Status.Fd())}
	if r.JoinNetNS {
		req.WantNetNS = 1
		fds = append(fds, r.NetNSFD)
	}
	if len(r.CgroupProcsFiles) > 0 {
		req.CgroupFDs, req.Cgroupc = 1, uint32(len(r.CgroupProcsFiles))
		for _, f := range r.CgroupProcsFiles {
			fds = append(fds, int(f.Fd()))
		}
	}
	var msg bytes.Buffer
	_ = binary.Write(&msg, binary.NativeEndian, req)
	if msg.Len() != requestSize {
		return nil, fmt.Errorf("spawner: request header is %d bytes, want %d", msg.Len(), requestSize)
	}
	msg.Write(strs.Bytes())

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead != nil {
		return nil, s.dead
	}
	if _, err := retryEINTR(func() (int, error) {
		return 0, unix.Sendmsg(s.sock, msg.Bytes(), unix.UnixRights(fds...), nil, unix.MSG_NOSIGNAL)
	}); err != nil {
		if errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.ENOTCONN) {
			return nil, s.markDead(fmt.Errorf("%w: %v", ErrDead, err))
		}
		return nil, fmt.Errorf("spawner: send request: %w", err)
	}
	// The message holds its own copies of the descriptors now.
	runtime.KeepAlive(&r)
	buf := make([]byte, unsafe.Sizeof(reply{}))
	oob := make([]byte, unix.CmsgSpace(4))
	var oobn, flags int
	n, err := retryEINTR(func() (int, error) {
		var n int
		var err error
		n, oobn, flags, _, err = unix.Recvmsg(s.sock, buf, oob, unix.MSG_CMSG_CLOEXEC)
		return n, err
	})
	if err != nil || n == 0 {
		// Gone, or stuck past replyTimeout: either way the conversation is
		// out of step now. (A stuck helper keeps its children until Close.)
		return nil, s.markDead(fmt.Errorf("%w: %v", ErrDead, err))
	}
	var rep reply
	if err := binary.Read(bytes.NewReader(buf[:n]), binary.NativeEndian, &rep); err != nil {
		return nil, fmt.Errorf("spawner: short reply: %w", err)
	}
	pidfd := -1
	if oobn > 0 {
		if cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, c := range cmsgs {
				if got, err := unix.ParseUnixRights(&c); err == nil {
					for _, fd := range got {
						if pidfd < 0 {
							pidfd = fd
						} else {
							unix.Close(fd)
						}
					}
				}
			}
		}
	}
	if flags&unix.MSG_CTRUNC != 0 && pidfd < 0 && rep.Err == 0 {
		// At our descriptor limit: the init started but we cannot track it.
		// It exits by itself once our ends of its pipes close.
		return nil, errors.New("spawner: the pidfd did not arrive (descriptor limit?)")
	}
	if rep.Err != 0 || rep.Pid <= 0 || pidfd < 0 {
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
		step := string(bytes.TrimRight(rep.Step[:], "\x00"))
		return nil, fmt.Errorf("spawn init: %s: %w", step, syscall.Errno(rep.Err))
	}
	// The reply's pid is of the spawner's pid namespace (a zygote has one
	// of its own); the pidfd names the process, and its fdinfo gives the
	// pid in ours.
	pid, err := pidfdPid(pidfd)
	if err != nil {
		unix.Close(pidfd)
		return nil, fmt.Errorf("spawn init: %w", err)
	}
	return &Process{Pid: pid, pidfd: pidfd}, nil
}

// pidfdPid is the pid (in the engine's pid namespace) of the process
// pidfd refers to, from the "Pid:" line of its fdinfo.
func pidfdPid(pidfd int) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", pidfd))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "Pid:"); ok {
			if pid, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil && pid > 0 {
				return pid, nil
			}
		}
	}
	return 0, errors.New("the pidfd's process has no pid here (gone already, or outside our pid namespace)")
}

// retryEINTR repeats a socket call the Go runtime's own signals interrupted:
// with SO_RCVTIMEO set, the kernel does not restart it.
func retryEINTR(call func() (int, error)) (int, error) {
	for {
		n, err := call()
		if err != unix.EINTR {
			return n, err
		}
	}
}

// Kill sends SIGKILL through the pidfd: never to a recycled pid, and
// never through a descriptor number reused after Wait closed the pidfd.
func (p *Process) Kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pidfd < 0 {
		return os.ErrProcessDone
	}
	return unix.PidfdSendSignal(p.pidfd, unix.SIGKILL, nil, 0)
}

// Wait blocks until the process has exited, then closes the pidfd. It may
// be called more than once, also concurrently.
func (p *Process) Wait() {
	p.waitOnce.Do(func() {
		fds := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err != unix.EINTR {
				break
			}
		}
		p.mu.Lock()
		unix.Close(p.pidfd)
		p.pidfd = -1
		p.mu.Unlock()
	})
}

// Exited reports, without waiting, whether the process has exited.
func (p *Process) Exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pidfd < 0 {
		return true
	}
	fds := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}
