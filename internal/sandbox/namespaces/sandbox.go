package namespaces

import (
	"context"
	"fmt"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
	"github.com/scratchrun/scratchrun/internal/sandbox/idmap"
	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces/spawner"
)

// timeouts bound the steps the engine waits on in a namespaces sandbox.
var timeouts = hostside.Timeouts{
	Setup: 15 * time.Second,
	// Init kills, reaps and reads return files within this after the
	// job's timeout.
	Grace: 3 * time.Second,
	Drain: 5 * time.Second,
}

type nsSandbox struct {
	id      string
	backend *Backend
	group   *cgroups.Group
	init    *spawner.Process
	// via is the zygote that starts init (nil: the backend's helper).
	via  *zygoteProcess
	conn *hostside.Conn
	// owner is the host uid owning the sandbox's user namespace (0: the
	// engine's own uid).
	owner uint32

	ran bool
	// background: built at background CPU weight, restored in Run.
	background bool
}

var _ hostside.Host = (*nsSandbox)(nil)
var _ sandbox.CPUMeter = (*nsSandbox)(nil)

func (s *nsSandbox) ID() string { return s.id }

// start creates the cgroup and init, and waits until init has built the
// sandbox's file system.
func (s *nsSandbox) start(ctx context.Context, cfg sandbox.Config) error {
	b := s.backend
	if b.cgroups != nil {
		g, err := b.cgroups.Create(s.id, cgroups.Limits{MemoryBytes: cfg.MemoryBytes, MaxPids: cfg.MaxPids, CPUs: cfg.CPUs, Background: cfg.Background})
		if err != nil {
			return err
		}
		s.group = g
	}
	conn, err := hostside.NewConn(s, timeouts)
	if err != nil {
		return err
	}
	s.conn = conn
	rootfs := cfg.Image.RootFS
	if s.via != nil && s.via.ownerCount > 0 {
		if s.owner, err = s.via.takeOwner(); err != nil {
			return err
		}
	} else if b.owners != nil {
		if s.owner, err = b.owners.take(); err != nil {
			return err
		}
		if inRange(s.owner, cfg.Image.UIDBase) || inRange(s.owner, idmap.SandboxBase) {
			return fmt.Errorf("user namespace owner %d lies among the image's uids (from %d) or the sandbox's (from %d)", s.owner, cfg.Image.UIDBase, idmap.SandboxBase)
		}
	}
	if b.views != nil {
		if rootfs, err = b.views.Path(cfg.Image.RootFS, cfg.Image.UIDBase); err != nil {
			return err
		}
	}
	proc, startErr := b.startInit(ctx, s.via, conn.Pipes, s.owner, cfg.Network, s.group)
	// The child holds its own copies now (or failed to start).
	conn.CloseChildEnds()
	if startErr != nil {
		return fmt.Errorf("start init: %w", startErr)
	}
	// startInit put init in the cgroup before it could do anything, so
	// nothing it does is charged elsewhere and the cgroup namespace it makes
	// later is rooted here.
	s.init = proc
	setup := hostside.Setup(cfg, b.confinement)
	setup.RootFS = rootfs
	setup.MountDir = b.mountDir
	setup.WritableBytes = cfg.WritableBytes
	setup.MapsGroups = !b.rootless
	setup.CopyHome = b.rootless
	// The kernel counts these per user, not per cgroup: bound each
	// sandbox (see initproto.KernelRlimits).
	setup.UserNamespaceLimits = initproto.UserNamespaceLimits
	setup.Rlimits = initproto.KernelRlimits
	setup.Session = cfg.Session
	if err := conn.Setup(ctx, setup); err != nil {
		return err
	}
	if cfg.Session {
		conn.StartSession()
	}
	return nil
}

// Kill ends init with SIGKILL; the kernel then kills every process of the
// sandbox's pid namespace.
func (s *nsSandbox) Kill() {
	if s.init != nil {
		_ = s.init.Kill()
	}
}

// Settle implements hostside.Host: init is done (or broken) once it
// reported; make sure everything is gone.
func (s *nsSandbox) Settle() {
	s.Kill()
	if s.init != nil {
		s.init.Wait()
	}
}

// Measure implements hostside.Host: the sandbox's cgroup counts memory
// kills (at its own limit or its parent's) and every fork the process
// limit refused.
func (s *nsSandbox) Measure(out *sandbox.Outcome, _ initproto.ResultMessage) {
	if s.group != nil {
		hostside.MeasureOOM(s.group, out)
		out.ForkFailures = s.group.PidsLimitHits()
		out.PidsLimitHit = out.ForkFailures > 0
	}
}

// Diagnostics implements hostside.Host: the spawner and init say nothing
// beyond the protocol.
func (s *nsSandbox) Diagnostics() string { return "" }

// Run implements sandbox.Sandbox.
func (s *nsSandbox) Run(ctx context.Context, job sandbox.Job) (sandbox.Outcome, error) {
	if err := hostside.UseOnce(&s.ran, job); err != nil {
		return sandbox.Outcome{}, err
	}
	if err := hostside.PrepareGroup(s.group, s.background, job.MemoryBytes); err != nil {
		return sandbox.Outcome{}, err
	}
	return s.conn.Run(ctx, job)
}

// Destroy implements sandbox.Sandbox.
func (s *nsSandbox) Destroy() sandbox.Teardown {
	var errs []error
	s.Settle()
	if s.conn != nil {
		_ = s.conn.Close()
	}
	if err := hostside.DestroyGroup(s.group); err != nil {
		errs = append(errs, err)
	}
	if s.owner != 0 {
		if s.via != nil && s.via.ownerCount > 0 {
			s.via.releaseOwner(s.owner)
		} else {
			s.backend.owners.release(s.owner)
		}
		s.owner = 0
	}
	return hostside.TeardownOf(errs...)
}

// MemoryUsage implements sandbox.Sandbox: what the sandbox's cgroup uses.
func (s *nsSandbox) MemoryUsage() int64 { return hostside.GroupMemory(s.group) }

// CPUDemand implements sandbox.CPUMeter: the tasks of the sandbox's cgroup.
func (s *nsSandbox) CPUDemand() (time.Duration, bool) { return hostside.GroupCPUDemand(s.group) }

// inRange reports whether uid lies among the idmap.Size uids from base.
func inRange(uid, base uint32) bool { return uid >= base && uid-base < idmap.Size }
