package namespaces

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces/spawner"
)

// sandboxNamespaces are the namespaces a sandbox's init is born in (the
// cgroup namespace comes later, from init, once it is in its cgroup).
const sandboxNamespaces = syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS |
	syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS

// startSpawner finds (or builds) and starts the spawner helper.
func (b *Backend) startSpawner() error {
	path, err := spawner.Find(b.opts.Spawner, b.opts.StateDir)
	if err != nil {
		return err
	}
	sp, err := spawner.Start(path)
	if err != nil {
		return err
	}
	b.spawnerMu.Lock()
	b.spawnerPath, b.spawner = path, sp
	b.spawnerMu.Unlock()
	return nil
}

// currentSpawner is the live helper (or the last one, if it just died).
func (b *Backend) currentSpawner() *spawner.Spawner {
	b.spawnerMu.Lock()
	defer b.spawnerMu.Unlock()
	return b.spawner
}

// replaceSpawner starts a new helper in place of dead, unless another call
// already has. The sandboxes the dead one started died with it (their
// parent-death signal); new ones must still start.
func (b *Backend) replaceSpawner(dead *spawner.Spawner, why error) error {
	b.spawnerMu.Lock()
	defer b.spawnerMu.Unlock()
	if b.spawner != dead {
		return nil
	}
	if b.closed {
		return fmt.Errorf("backend closed: %w", why)
	}
	sp, err := spawner.Start(b.spawnerPath)
	if err != nil {
		return fmt.Errorf("restart the spawner helper after %v: %w", why, err)
	}
	b.opts.Logger.Error("the spawner helper died and was restarted; sandboxes it had started were lost", "err", why)
	_ = dead.Close()
	b.spawner = sp
	b.spawnerRestarts++
	return nil
}

// SpawnerRestarts counts how often the spawner helper had to be replaced.
func (b *Backend) SpawnerRestarts() int {
	b.spawnerMu.Lock()
	defer b.spawnerMu.Unlock()
	return b.spawnerRestarts
}

// startInit starts a sandbox's init (the spawner's built-in one, see
// spawner/c/init.c) in new namespaces with the child ends of pipes as its
// fds 1-4, its user namespace owned by owner (when not 0), and in group
// (when not nil).
// A zygote (via, when not nil) starts it instead of the helper; it is not
// replaced when it died.
func (b *Backend) startInit(ctx context.Context, via *zygoteProcess, pipes *hostside.Pipes, owner uint32, network *sandbox.Network, group *cgroups.Group) (*spawner.Process, error) {
	uids, gids, setgroups := b.idMappings()
	flags := uintptr(sandboxNamespaces)
	if network != nil {
		// Join the prepared namespace instead of making an empty one.
		flags &^= syscall.CLONE_NEWNET
	}
	req := spawner.Request{
		CloneFlags: flags,
		UIDMap:     idMapText(uids), GIDMap: idMapText(gids), DenySetgroups: !setgroups,
		Stdout: pipes.ChildStdout, Stderr: pipes.ChildStderr, Control: pipes.ChildControl, Status: pipes.ChildStatus,
		OwnerUID: owner,
	}
	if network != nil {
		req.JoinNetNS, req.NetNSFD = true, network.NetNSFD
	}
	if group != nil {
		// Joined by the helper before init runs: init is not our child, so
		// once it died its pid could name another process.
		req.CgroupProcs = group.ProcsFiles()
	}
	if via != nil {
		// A zygote sees no cgroup file system: it writes the child into
		// files the engine opened.
		for _, path := range req.CgroupProcs {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			req.CgroupProcsFiles = append(req.CgroupProcsFiles, f)
		}
		req.CgroupProcs = nil
		return via.Spawn(ctx, req)
	}
	for attempt := 0; ; attempt++ {
		sp := b.currentSpawner()
		p, err := sp.Spawn(ctx, req)
		if err == nil || attempt > 0 || !errors.Is(err, spawner.ErrDead) {
			return p, err
		}
		if err := b.replaceSpawner(sp, err); err != nil {
			return nil, err
		}
	}
}

// idMapText renders mappings as /proc/PID/uid_map wants them.
func idMapText(m []syscall.SysProcIDMap) string {
	var b strings.Builder
	for _, e := range m {
		fmt.Fprintf(&b, "%d %d %d\n", e.ContainerID, e.HostID, e.Size)
	}
	return b.String()
}

// SpawnerPid is the current spawner helper's pid (for tests and
// diagnostics).
func (b *Backend) SpawnerPid() int { return b.currentSpawner().Pid() }
