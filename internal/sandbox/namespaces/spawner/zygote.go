package spawner

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// ZygoteObjectName is the zygote's shared object (c/zygote.c with the
// spawner and the init, built by c/build.sh) next to scratchrun.
const ZygoteObjectName = "scratchrun-zygote.so"

// FindZygoteObject returns the zygote's shared object: next to the running
// executable, else a build of the embedded source in dir (made now if
// missing), as Find does for the helper.
func FindZygoteObject(dir string) (string, error) {
	if self, err := os.Executable(); err == nil {
		candidate := filepath.Join(filepath.Dir(self), ZygoteObjectName)
		if fi, err := os.Stat(candidate); err == nil && fi.Mode().IsRegular() {
			return candidate, nil
		}
	}
	target := filepath.Join(dir, "zygote-"+sourceHash()+".so")
	if _, err := os.Stat(target); err == nil {
		return target, nil
	}
	return Build(target)
}

// Zygote describes a zygote: the spawner's serve loop run inside an
// initialized interpreter (docs/zygotes.md), started by the helper's
// --zygote launcher (c/zygote_launch.c) in a root of its own.
type Zygote struct {
	// Launcher is scratchrun-spawn (Find), run as root.
	Launcher string
	// Object is the zygote's shared object (FindZygoteObject). It reaches
	// the interpreter as a sealed memfd on fd 4, never as a file of the
	// image's.
	Object string
	// Stage is an empty directory of the engine's that the launcher covers
	// with the zygote's root, in the zygote's mount namespace only.
	Stage string
	// Image is the image's root file system: its /usr and /etc are the
	// zygote's, read-only.
	Image string
	// ReadOnly and Dirs are the host paths the zygote sees, at the same
	// paths: read-only (the image view sandboxes are built on), and as
	// empty directories (the mount point sandboxes build on). Nothing is
	// writable: a sandbox's cgroup.procs files come with its request
	// (Request.CgroupProcsFiles).
	ReadOnly, Dirs []string
	// Argv is the interpreter's command line (an absolute path in the
	// image, and the bootstrap: warm.Zygote), Env its environment.
	Argv, Env []string
	// CgroupProcs are the cgroup.procs files of the group the launcher
	// joins before anything else (one per hierarchy on cgroup v1), so
	// that the zygote's memory and processes are counted there; none: it
	// stays in the engine's own.
	CgroupProcs []string
	// OwnerBase and OwnerCount are the block of host uids the zygote's
	// sandboxes' user namespaces are owned by: its seccomp filter lets it
	// take no other uid (c/zygote_seccomp.c).
	OwnerBase, OwnerCount uint32
}

// TestHookEnv names an environment variable whose value the zygote's
// bootstrap runs as python in the zygote itself, before serving (its
// output goes to the zygote's stderr: Spawner.Stderr). StartZygote
// refuses it outside a test binary.
const TestHookEnv = "SCRATCHRUN_ZYGOTE_TEST_HOOK"

// StartZygote starts z; the Spawner it returns speaks the helper's
// protocol, and its hello comes once the interpreter has loaded what it
// preloads and serves.
func StartZygote(z Zygote) (*Spawner, error) {
	if len(z.Argv) == 0 || !filepath.IsAbs(z.Argv[0]) {
		return nil, errors.New("zygote: the interpreter must be an absolute path")
	}
	for _, kv := range z.Env {
		if strings.HasPrefix(kv, TestHookEnv+"=") && !testing.Testing() {
			return nil, errors.New("zygote: " + TestHookEnv + " is for tests only")
		}
	}
	object, err := sealedCopy(z.Object)
	if err != nil {
		return nil, err
	}
	defer object.Close()
	args := []string{BinaryName, "--zygote", "--stage", z.Stage, "--image", z.Image}
	if z.OwnerCount > 0 {
		args = append(args, "--owners", fmt.Sprintf("%d:%d", z.OwnerBase, z.OwnerCount))
	}
	for _, l := range []struct {
		flag  string
		paths []string
	}{{"--cgroup", z.CgroupProcs}, {"--ro", z.ReadOnly}, {"--dir", z.Dirs}} {
		for _, p := range l.paths {
			args = append(args, l.flag, p)
		}
	}
	args = append(append(args, "--"), z.Argv...)
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("zygote socket: %w", err)
	}
	theirs := os.NewFile(uintptr(pair[1]), "zygote")
	defer theirs.Close()
	stderr := &tailBuffer{}
	cmd := &exec.Cmd{Path: z.Launcher, Args: args, Env: append([]string{}, z.Env...),
		ExtraFiles: []*os.File{object}, Stderr: stderr}
	s, err := start(cmd, theirs, pair[0])
	if err != nil {
		if why := stderr.String(); why != "" {
			err = fmt.Errorf("%w: %s", err, why)
		}
		return nil, fmt.Errorf("zygote: %w", err)
	}
	s.stderr = stderr
	return s, nil
}

// sealedCopy is the file at path in a memfd no one can change: the
// interpreter loads exactly what the engine read.
func sealedCopy(path string) (*os.File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fd, err := unix.MemfdCreate(ZygoteObjectName, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("zygote object: %w", err)
	}
	f := os.NewFile(uintptr(fd), ZygoteObjectName)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("zygote object: %w", err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, fmt.Errorf("zygote object: seal: %w", err)
	}
	return f, nil
}

// tailBuffer keeps the first few KiB a process writes, for an error
// message (the launcher says why it stopped on stderr).
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 4096 - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(b.buf.String())
}

// ExitCode is the helper's exit status once Wait returned (-1 if killed).
func (s *Spawner) ExitCode() int { return s.cmd.ProcessState.ExitCode() }

// Stderr is what a zygote wrote to its stderr so far (its first 4 KiB;
// empty for the helper).
func (s *Spawner) Stderr() string {
	if s.stderr == nil {
		return ""
	}
	return s.stderr.String()
}
