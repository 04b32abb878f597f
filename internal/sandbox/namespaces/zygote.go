package namespaces

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces/spawner"
)

// A zygote (docs/zygotes.md) is a spawner running inside an initialized
// interpreter: sandboxes made through it run the same init, with the same
// namespaces, maps, cgroups, root and confinement, but their pre-started
// interpreter is a fork of the zygote's instead of a new program.

// zygoteOwners is the size of a zygote's block of owner uids: more than
// the sandboxes one zygote makes in its life (the engine retires it after
// fewer), so its sandboxes never share an owner.
const zygoteOwners = 1024

// zygoteLimits are the limits of a zygote's own cgroup, below the
// sandboxes' parent (so the engine's admission and memory budget count
// what it holds): a heavy zygote holds about 94 MB and its home up to
// 20 MiB, plus the image files' cache it read; its processes are the
// launcher, pid 1, the zygote, and each sandbox for the moment between
// its fork and its move into its own group. A zygote taken over can
// spend no more than this.
var zygoteLimits = cgroups.Limits{MemoryBytes: 512 << 20, MaxPids: 64}

// zygoteProcess is a running zygote, the stage directory it covers and
// the owner uids its sandboxes take.
type zygoteProcess struct {
	*spawner.Spawner
	stage string
	// group is the cgroup it runs in (nil: the engine's own; zygoteGroup).
	group *cgroups.Group
	// gone is closed once the zygote and every sandbox it made have ended
	// (its launcher exited), its stage removed and its owners released.
	gone    chan struct{}
	goneErr error

	ownerBase, ownerCount uint32 // 0, 0: the backend's owners (a test's stand-in)
	mu                    sync.Mutex
	nextOwner             uint32
	ownerInUse            map[uint32]bool
}

// takeOwner returns an owner uid of the zygote's block no live sandbox of
// it holds.
func (z *zygoteProcess) takeOwner() (uint32, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	for range z.ownerCount {
		uid := z.ownerBase + z.nextOwner
		z.nextOwner = (z.nextOwner + 1) % z.ownerCount
		if !z.ownerInUse[uid] {
			z.ownerInUse[uid] = true
			return uid, nil
		}
	}
	return 0, errors.New("every owner uid of the zygote's block is in use")
}

func (z *zygoteProcess) releaseOwner(uid uint32) {
	z.mu.Lock()
	defer z.mu.Unlock()
	delete(z.ownerInUse, uid)
}

// Retire stops the zygote serving: it exits, and the sandboxes it made
// run on (the pid 1 of its namespace holds them) until destroyed.
func (z *zygoteProcess) Retire() { _ = z.Spawner.Close() }

// Close retires the zygote and waits until it and its sandboxes are gone
// (destroy them first).
func (z *zygoteProcess) Close() error {
	z.Retire()
	<-z.gone
	return z.goneErr
}

// startZygote starts a zygote for sandboxes on img whose interpreter runs
// argv (warm.Zygote's command line) with env. It needs root: the zygote
// keeps CAP_SETUID and CAP_SETGID of the host's.
func (b *Backend) startZygote(img sandbox.Image, argv, env []string) (*zygoteProcess, error) {
	if b.rootless || b.views == nil {
		return nil, errors.New("a zygote needs an engine running as root")
	}
	object, err := spawner.FindZygoteObject(b.opts.StateDir)
	if err != nil {
		return nil, err
	}
	view, err := b.views.Path(img.RootFS, img.UIDBase)
	if err != nil {
		return nil, err
	}
	stage, err := os.MkdirTemp(b.opts.StateDir, zygoteStagePrefix+b.instance+"-") // the instance: for sweepZygoteStages
	if err != nil {
		return nil, err
	}
	base, err := b.owners.takeBlock(zygoteOwners)
	if err != nil {
		os.Remove(stage)
		return nil, err
	}
	group, err := b.zygoteGroup()
	if err != nil {
		os.Remove(stage)
		b.owners.releaseBlock(base, zygoteOwners)
		return nil, err
	}
	z := spawner.Zygote{Launcher: b.spawnerPath, Object: object, Stage: stage, Image: img.RootFS,
		ReadOnly: []string{view}, Dirs: []string{b.mountDir}, Argv: argv, Env: env,
		OwnerBase: base, OwnerCount: zygoteOwners}
	if group != nil {
		z.CgroupProcs = group.ProcsFiles()
	}
	sp, err := spawner.StartZygote(z)
	if err != nil {
		os.Remove(stage)
		b.owners.releaseBlock(base, zygoteOwners)
		return nil, errors.Join(err, endZygoteGroup(group))
	}
	zp := &zygoteProcess{Spawner: sp, stage: stage, group: group, gone: make(chan struct{}),
		ownerBase: base, ownerCount: zygoteOwners, ownerInUse: map[uint32]bool{}}
	go func() {
		sp.Wait()
		zp.goneErr = errors.Join(os.Remove(stage), endZygoteGroup(group))
		b.owners.releaseBlock(base, zygoteOwners)
		close(zp.gone)
	}()
	return zp, nil
}

// zygoteGroup makes the cgroup a new zygote runs in (nil where the
// backend enforces no limits), named as a sandbox's is (newID), so that a
// dead engine's is swept with its sandboxes' (hostside.SweepDeadEngines).
func (b *Backend) zygoteGroup() (*cgroups.Group, error) {
	if b.cgroups == nil {
		return nil, nil
	}
	g, err := b.cgroups.Create(b.newID(), zygoteLimits)
	if err != nil {
		return nil, fmt.Errorf("zygote cgroup: %w", err)
	}
	return g, nil
}

// endZygoteGroup removes a zygote's group once its launcher has ended:
// what is left in it (pid 1's namespace is going) is killed first.
func endZygoteGroup(g *cgroups.Group) error {
	if g == nil {
		return nil
	}
	g.KillAll()
	return g.Destroy()
}

// startZygoteFor starts the zygote zc names, for the backend's pool.
func (b *Backend) startZygoteFor(zc sandbox.Zygote, img sandbox.Image) (*zygoteProcess, error) {
	return b.startZygote(img, zc.Argv, zc.Env)
}

// retiredLinger bounds how long a retired zygote's launcher may outlive
// its retirement: its sandboxes, which it holds, run at most their
// lifetime (a session's is an hour at most), and then something the
// engine does not know of keeps its pid namespace alive (a zygote taken
// over, say): it is killed, namespace and all, so that Close cannot wait
// forever (it waits this long at most, in that case: the bound is the
// sandboxes' own, since a retired zygote's are still someone's).
const retiredLinger = 2 * time.Hour

// retireZygote retires z and counts it until it and its sandboxes are
// gone (Close waits for that, and kills it after retiredLinger).
func (b *Backend) retireZygote(z *zygoteProcess) {
	z.Retire()
	b.zygotesGone.Add(1)
	go func() {
		defer b.zygotesGone.Done()
		linger := time.NewTimer(retiredLinger)
		defer linger.Stop()
		select {
		case <-z.gone:
		case <-linger.C:
			b.opts.Logger.Warn("killing a retired zygote still running", "pid", z.Pid())
			z.Kill()
			<-z.gone
		}
		if z.goneErr != nil {
			b.opts.Logger.Warn("removing a retired zygote's stage", "err", z.goneErr)
		}
	}()
}

// MakesZygotes implements sandbox.ZygoteMaker: as root only.
func (b *Backend) MakesZygotes() bool { return b.zygotes != nil }

// RetireZygotes implements sandbox.ZygoteMaker.
func (b *Backend) RetireZygotes() {
	if b.zygotes == nil {
		return
	}
	b.zygotes.retireAll()
	b.zygotes.wait()
	b.zygotesGone.Wait()
}
