package namespaces

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces/nsinit"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces/spawner"
)

// initProcess is a running sandbox init, however it was started.
type initProcess interface {
	pid() int
	// kill sends SIGKILL; the kernel then kills the whole pid namespace.
	kill()
	// wait blocks until init has exited; it may be called more than once.
	wait()
}

// initFiles are the descriptors init gets: fds 1-4.
type initFiles struct{ stdout, stderr, control, status *os.File }

// initEnv is init's whole environment. Init and user code start from
// nothing of the engine's environment: it may hold API keys. GODEBUG keeps
// init's Go runtime from opening the host's cgroup files to size itself; one
// P is all init needs (fewer threads to start, and fewer counted against
// pids.max).
var initEnv = []string{"GODEBUG=containermaxprocs=0,updatemaxprocs=0", "GOMAXPROCS=1"}

// sandboxNamespaces are the namespaces a sandbox's init is born in (the
// cgroup namespace comes later, from init, once it is in its cgroup).
const sandboxNamespaces = syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS |
	syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS

// UsesSpawner reports whether sandboxes start through the spawner helper
// now (false: from Go, because it is disabled, missing or gone).
func (b *Backend) UsesSpawner() bool { return b.spawner != nil && !b.spawner.Dead() }

// startSpawner finds (or builds) and starts the spawner helper, unless
// Options.Spawner is "none".
func (b *Backend) startSpawner() error {
	if b.opts.Spawner == "none" {
		return errors.New("disabled (Options.Spawner is \"none\")")
	}
	path, err := spawner.Find(b.opts.Spawner, b.opts.StateDir)
	if err != nil {
		return err
	}
	b.spawner, err = spawner.Start(path)
	return err
}

// startInit starts init in new namespaces and in group (when not nil):
// through the spawner helper when the backend has a live one, else from Go
// (slower: see package spawner).
func (b *Backend) startInit(ctx context.Context, files initFiles, uidBase uint32, network *sandbox.Network, group *cgroups.Group) (initProcess, error) {
	uids, gids, setgroups := b.idMappings(uidBase)
	flags := uintptr(sandboxNamespaces)
	if network != nil {
		// Join the prepared namespace instead of making an empty one.
		flags &^= syscall.CLONE_NEWNET
	}
	if b.spawner != nil && !b.spawner.Dead() {
		req := spawner.Request{
			Path: b.initPath, Argv: []string{nsinit.Arg0}, Env: initEnv, CloneFlags: flags,
			UIDMap: idMapText(uids), GIDMap: idMapText(gids), DenySetgroups: !setgroups,
			Stdout: files.stdout, Stderr: files.stderr, FD3: files.control, FD4: files.status,
		}
		if network != nil {
			req.JoinNetNS, req.NetNSFD = true, network.NetNSFD
		}
		if group != nil {
			// Joined by the helper before init runs: init is not our child,
			// so once it died its pid could name another process.
			req.CgroupProcs = group.ProcsFiles()
		}
		p, err := b.spawner.Spawn(ctx, req)
		if err == nil {
			return &spawnedInit{p: p}, nil
		}
		if !errors.Is(err, spawner.ErrDead) {
			return nil, err
		}
		b.spawnerLost.Do(func() {
			b.opts.Logger.Error("the spawner helper is gone; sandboxes start from Go from now on, more slowly", "err", err)
		})
	}
	cmd := &exec.Cmd{
		Path:       b.initPath,
		Args:       []string{nsinit.Arg0},
		Env:        initEnv,
		Stdout:     files.stdout,
		Stderr:     files.stderr,
		ExtraFiles: []*os.File{files.control, files.status},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:                 flags,
			UidMappings:                uids,
			GidMappings:                gids,
			GidMappingsEnableSetgroups: setgroups,
			// Become the namespace's root: without this the child keeps the
			// engine's host uid, unmapped inside, and loses every capability
			// at execve.
			Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: !setgroups},
			// If the engine dies, the sandbox dies with it (killing pid 1 of a
			// pid namespace kills every process in it).
			Pdeathsig: syscall.SIGKILL,
			// A session and process group of its own: otherwise init and user
			// code would stay in the engine's process group, where kill(0, sig)
			// from one sandbox reaches every other sandbox's init (they share
			// a host uid), namespaces notwithstanding.
			Setsid: true,
		},
	}
	if err := startIn(cmd, network); err != nil {
		return nil, err
	}
	c := &cmdInit{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(c.done)
	}()
	// Init waits for its setup message, sent only after this, before it
	// does anything; our child, its pid stays its own until we reap it.
	if group != nil {
		if err := group.AddProcess(cmd.Process.Pid); err != nil {
			c.kill()
			c.wait()
			return nil, err
		}
	}
	return c, nil
}

// idMapText renders mappings as /proc/PID/uid_map wants them.
func idMapText(m []syscall.SysProcIDMap) string {
	var b strings.Builder
	for _, e := range m {
		fmt.Fprintf(&b, "%d %d %d\n", e.ContainerID, e.HostID, e.Size)
	}
	return b.String()
}

// cmdInit is init started from Go, our child.
type cmdInit struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (c *cmdInit) pid() int { return c.cmd.Process.Pid }
func (c *cmdInit) kill()    { _ = c.cmd.Process.Signal(syscall.SIGKILL) }
func (c *cmdInit) wait()    { <-c.done }

// spawnedInit is init started by the spawner helper, known by its pidfd.
type spawnedInit struct{ p *spawner.Process }

func (s *spawnedInit) pid() int { return s.p.Pid }
func (s *spawnedInit) kill()    { _ = s.p.Kill() }
func (s *spawnedInit) wait()    { s.p.Wait() }
