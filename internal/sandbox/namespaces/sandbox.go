package namespaces

import (
	"context"
	"encoding"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
	"github.com/scratchrun/scratchrun/internal/sandbox/initbin"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces/nsinit"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces/spawner"
)

// Time allowed for steps the engine waits on. They bound how long a broken or
// hostile init can hold the engine, not how long user code may run.
const (
	setupTimeout = 15 * time.Second
	// collectGrace is how long init may take after the job's timeout to kill,
	// reap and read return files before the engine kills the whole sandbox.
	collectGrace = 3 * time.Second
	// drainTimeout bounds waiting for output pipes after init is gone.
	drainTimeout = 5 * time.Second
	// maxStatusOverhead is room in a status message beyond return files.
	maxStatusOverhead = 1 << 20
)

type nsSandbox struct {
	id      string
	backend *Backend
	group   *cgroups.Group
	init    *spawner.Process
	// owner is the host uid owning the sandbox's user namespace (0: the
	// engine's own uid).
	owner uint32

	control        *os.File // engine's end: write
	status         *os.File // engine's end: read
	stdout, stderr *os.File // engine's ends: read
	// statusMax bounds the next message read from init.
	statusMax int64

	ran bool
	// background: built at background CPU weight, restored in Run.
	background bool
}

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
	controlR, controlW, err := os.Pipe()
	if err != nil {
		return err
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		controlR.Close()
		controlW.Close()
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return errors.Join(err, initbin.CloseAll(controlR, controlW, statusR, statusW))
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return errors.Join(err, initbin.CloseAll(controlR, controlW, statusR, statusW, outR, outW))
	}
	s.control, s.status, s.stdout, s.stderr = controlW, statusR, outR, errR

	if b.owners != nil {
		if s.owner, err = b.owners.take(); err != nil {
			return errors.Join(err, initbin.CloseAll(controlR, statusW, outW, errW))
		}
		if s.owner >= cfg.Image.UIDBase && s.owner-cfg.Image.UIDBase < 65536 {
			_ = initbin.CloseAll(controlR, statusW, outW, errW)
			return fmt.Errorf("user namespace owner %d lies among the image's uids (from %d)", s.owner, cfg.Image.UIDBase)
		}
	}
	proc, startErr := b.startInit(ctx, initFiles{stdout: outW, stderr: errW, control: controlR, status: statusW}, cfg.Image.UIDBase, s.owner, cfg.Network, s.group)
	// The child holds its own copies now (or failed to start).
	_ = initbin.CloseAll(controlR, statusW, outW, errW)
	if startErr != nil {
		return fmt.Errorf("start init: %w", startErr)
	}
	// startInit put init in the cgroup before it could do anything, so
	// nothing it does is charged elsewhere and the cgroup namespace it makes
	// later is rooted here.
	s.init = proc
	setup := nsinit.SetupMessage{
		MaskPaths:     nsinit.MaskedPaths,
		ReadOnlyPaths: nsinit.ReadOnlyPaths,
		RootFS:        cfg.Image.RootFS,
		MountDir:      b.mountDir,
		WritableBytes: cfg.WritableBytes,
		TmpBytes:      cfg.TmpBytes,
		MaxInodes:     cfg.MaxInodes,
		Hostname:      "sandbox",
		MapsGroups:    !b.rootless,
		CopyHome:      b.rootless,
		// Compiled once in the engine; init only installs it.
		Seccomp:          b.seccomp,
		KeepCapabilities: b.keepCaps,
		// The kernel counts these per user, not per cgroup: bound each
		// sandbox (see nsinit.KernelRlimits).
		UserNamespaceLimits: nsinit.UserNamespaceLimits,
		Rlimits:             nsinit.KernelRlimits,
	}
	setup.LockDownEarly = cfg.Warm
	if p := cfg.Prestart; p != nil {
		setup.Prestart = &nsinit.PrestartSpec{Argv: p.Argv, Env: p.Env, Dir: p.Dir}
	}
	if cfg.Network != nil {
		setup.JoinedNetwork = true
		setup.DNS = cfg.Network.DNS
	}
	if err := nsinit.WriteMessage(s.control, setup); err != nil {
		return fmt.Errorf("send setup to init: %w", err)
	}
	s.statusMax = maxStatusOverhead
	var ready nsinit.ReadyMessage
	if err := s.decodeStatus(ctx, setupTimeout, &ready); err != nil {
		return fmt.Errorf("wait for init: %w", err)
	}
	if !ready.Ready {
		return fmt.Errorf("init could not build the sandbox: %s", ready.Error)
	}
	return nil
}

// decodeStatus reads one message from init within timeout (see
// initbin.DecodeStatus), killing the sandbox when it gives up.
func (s *nsSandbox) decodeStatus(ctx context.Context, timeout time.Duration, v encoding.BinaryUnmarshaler) error {
	return initbin.DecodeStatus(ctx, s.status, s.statusMax, timeout, v, s.kill)
}

// kill ends init with SIGKILL; the kernel then kills every process of the
// sandbox's pid namespace.
func (s *nsSandbox) kill() {
	if s.init != nil {
		_ = s.init.Kill()
	}
}

// Run implements sandbox.Sandbox.
func (s *nsSandbox) Run(ctx context.Context, job sandbox.Job) (sandbox.Outcome, error) {
	if s.ran {
		return sandbox.Outcome{}, errors.New("sandbox already ran a job; sandboxes are used once")
	}
	s.ran = true
	if len(job.Argv) == 0 {
		return sandbox.Outcome{}, errors.New("job has no command")
	}
	if err := initbin.PrepareGroup(s.group, s.background, job.MemoryBytes); err != nil {
		return sandbox.Outcome{}, err
	}
	drained := initbin.Drain(job, s.stdout, s.stderr)
	if err := nsinit.WriteMessage(s.control, initbin.JobMessage(job)); err != nil {
		s.kill()
		return sandbox.Outcome{}, fmt.Errorf("send job to init: %w", err)
	}
	s.control.Close()
	s.control = nil

	// A hostile init may send anything; it may not send more than the return
	// budget allows.
	s.statusMax = 2*job.MaxReturnBytes + maxStatusOverhead
	var res nsinit.ResultMessage
	decodeErr := s.decodeStatus(ctx, job.Timeout+collectGrace, &res)
	if ctx.Err() != nil {
		return sandbox.Outcome{}, ctx.Err()
	}
	engineTimedOut := errors.Is(decodeErr, initbin.ErrNoAnswer)
	s.kill() // init is done (or broken); make sure everything is gone
	s.init.Wait()
	initbin.WaitDrained(drained, drainTimeout)

	out := sandbox.Outcome{Files: res.Files, Notes: res.Notes, Duration: res.Duration}
	if s.group != nil {
		out.OOMKilled = s.group.OOMKills() > 0
		out.ForkFailures = s.group.PidsLimitHits()
		out.PidsLimitHit = out.ForkFailures > 0
	}
	switch {
	case decodeErr == nil && res.Error != "" && !res.Started:
		return sandbox.Outcome{}, fmt.Errorf("sandbox could not start the program: %s", res.Error)
	case decodeErr == nil:
		out.ExitCode, out.Signal, out.TimedOut = res.ExitCode, res.Signal, res.TimedOut
	case engineTimedOut:
		out.TimedOut = true
		out.ExitCode, out.Signal = 128+int(syscall.SIGKILL), int(syscall.SIGKILL)
		out.Duration = job.Timeout
		out.Notes = append(out.Notes, "The sandbox did not finish within its timeout plus a grace period and was killed whole; return files are lost.")
	case out.OOMKilled:
		// The kernel chose init as the memory limit's victim: everything died.
		out.ExitCode, out.Signal = 128+int(syscall.SIGKILL), int(syscall.SIGKILL)
		out.Notes = append(out.Notes, "The whole sandbox was killed at the memory limit; return files are lost.")
	default:
		return sandbox.Outcome{}, fmt.Errorf("sandbox init ended without a result: %v", decodeErr)
	}
	if out.Files == nil {
		out.Files = map[string][]byte{}
	}
	return out, nil
}

// Destroy implements sandbox.Sandbox.
func (s *nsSandbox) Destroy() sandbox.Teardown {
	var errs []error
	if s.init != nil {
		s.kill()
		s.init.Wait()
	}
	_ = initbin.CloseAll(s.control, s.status, s.stdout, s.stderr)
	s.control, s.status, s.stdout, s.stderr = nil, nil, nil, nil
	if s.group != nil {
		if !s.group.KillAll() {
			errs = append(errs, fmt.Errorf("processes still in cgroup after SIGKILL: %v", s.group.Procs()))
		}
		if err := s.group.Destroy(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.owner != 0 {
		s.backend.owners.release(s.owner)
		s.owner = 0
	}
	err := errors.Join(errs...)
	return sandbox.Teardown{Purged: err == nil, Err: err}
}

// MemoryUsage reports the memory the sandbox's cgroup uses now (0 when
// unknown). The warm pool measures its budget with it.
func (s *nsSandbox) MemoryUsage() int64 {
	if s.group == nil {
		return 0
	}
	return s.group.MemoryUsage()
}
