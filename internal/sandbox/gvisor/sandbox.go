package gvisor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// timeouts bound the steps the engine waits on in a gVisor sandbox.
var timeouts = hostside.Timeouts{
	// runsc starting the Sentry and gofer and init answering; generous, as
	// a loaded machine makes this slow.
	Setup: 60 * time.Second,
	// Init kills, reaps and reads return files within this after the
	// job's timeout.
	Grace: 5 * time.Second,
	Drain: 5 * time.Second,
}

const (
	// exitTimeout bounds waiting for runsc to tear the sandbox down by
	// itself after init has exited.
	exitTimeout = 10 * time.Second
	// maxDiagnostics caps what is kept of runsc's own messages.
	maxDiagnostics = 8 << 10
)

// gvSandbox is one runsc container: `runsc run` is started at Create and
// stays attached; the container's process is ScratchRun's init, which waits
// on its control pipe for the job exactly as a namespaces init does.
type gvSandbox struct {
	id      string
	backend *Backend
	bundle  string
	group   *cgroups.Group
	cmd     *exec.Cmd
	conn    *hostside.Conn
	diag    *boundedBuffer // runsc's own stdout and stderr

	ran bool
	// background: built at background CPU weight, restored in Run.
	background bool
	destroyed  bool
	teardown   sandbox.Teardown // the first Destroy's, repeated by later calls
	waitDone   chan struct{}
	waitErr    error
}

var _ hostside.Host = (*gvSandbox)(nil)
var _ sandbox.CPUMeter = (*gvSandbox)(nil)

func (s *gvSandbox) ID() string { return s.id }

// start writes the bundle, creates the cgroup, starts `runsc run` and waits
// until init inside reports the sandbox ready.
func (s *gvSandbox) start(ctx context.Context, cfg sandbox.Config, platform string) error {
	b := s.backend
	in := specInput{cfg: cfg, initCaps: b.initCaps}
	// The probe of a dynamically linked init runs on the host's "/", which
	// holds no image file and cannot be idmapped (proc, sysfs below it).
	if b.views != nil && cfg.Image.UIDBase != 0 && cfg.Image.RootFS != "/" {
		var err error
		if in.view, err = b.views.Path(cfg.Image.RootFS, cfg.Image.UIDBase); err != nil {
			return err
		}
	}
	if cfg.MemoryBytes > 0 {
		in.memory = cfg.MemoryBytes + b.overhead
	}
	if cfg.MaxPids > 0 {
		// The host sees the Sentry's and gofer's threads and systrap's
		// stub processes and threads (two or more per application
		// process, and those of processes just gone linger): a fork bomb
		// held at RLIMIT_NPROC 256 inside was measured at 662 host tasks.
		// Where the Sentry cannot clone a thread it needs it panics and
		// the whole sandbox ends without a result (seen at the old
		// backstop, 768), so the backstop is set far above that: it is
		// for a Sentry taken over, not for user code.
		in.hostPids = 4*cfg.MaxPids + 512
	}
	if b.cgroups != nil {
		g, err := b.cgroups.Create(s.id, cgroups.Limits{MemoryBytes: in.memory, MaxPids: in.hostPids, CPUs: cfg.CPUs, Background: cfg.Background})
		if err != nil {
			return err
		}
		s.group = g
		in.cgroupPath = "/" + b.opts.CgroupParent + "/" + s.id
	}
	if cfg.Network != nil {
		// runsc joins the slot's namespace by path; the engine holds the
		// descriptor open until the sandbox is destroyed.
		in.netnsPath = fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), cfg.Network.NetNSFD)
	}
	s.bundle = filepath.Join(b.bundles, s.id)
	if err := os.Mkdir(s.bundle, 0o700); err != nil {
		return fmt.Errorf("create bundle: %w", err)
	}
	if err := writeSpec(s.bundle, buildSpec(in)); err != nil {
		return err
	}
	if err := s.startRunsc(platform, cfg); err != nil {
		return err
	}
	// Init locks itself down before it reports ready, warm or not: one
	// order of steps. The Sentry implements inotify, signal queues and
	// message queues itself: no kernel limits are sent.
	setup := hostside.Setup(cfg, b.confinement)
	setup.LockDownEarly = true
	setup.Session = cfg.Session
	if err := s.conn.Setup(ctx, setup); err != nil {
		return err
	}
	if cfg.Session {
		s.conn.StartSession()
	}
	return nil
}

// startRunsc starts `runsc run` attached, with the control and status pipes
// as the container's fds 3 and 4 and the output pipes as its fds 1 and 2
// (runsc hands host descriptors to the Sentry, so user output goes straight
// into the engine's pipes, as in a namespaces sandbox), and the init program
// as the file the container's process is executed from.
func (s *gvSandbox) startRunsc(platform string, cfg sandbox.Config) error {
	b := s.backend
	conn, err := hostside.NewConn(s, timeouts)
	if err != nil {
		return err
	}
	s.conn = conn
	// The child's ends are closed once runsc holds them (or failed to
	// start).
	defer conn.CloseChildEnds()
	initFile, err := os.Open(b.initPath)
	if err != nil {
		return fmt.Errorf("open init program: %w", err)
	}
	defer initFile.Close()

	args := append(b.runFlags(platform, cfg.Network != nil, cfg.WritableBytes),
		"run", "--bundle="+s.bundle,
		"--pass-fd=3:3", "--pass-fd=4:4", "--pass-fd=5:1", "--pass-fd=6:2", "--exec-fd=7",
		s.id)
	s.diag = &boundedBuffer{max: maxDiagnostics}
	s.cmd = &exec.Cmd{
		Path:       b.runsc,
		Args:       append([]string{b.runsc}, args...),
		Env:        runscEnv,
		Dir:        s.bundle,
		Stdout:     s.diag,
		Stderr:     s.diag,
		ExtraFiles: []*os.File{conn.ChildControl, conn.ChildStatus, conn.ChildStdout, conn.ChildStderr, initFile},
		SysProcAttr: &syscall.SysProcAttr{
			// If the engine dies, runsc dies, and with it (attached mode)
			// the Sentry and gofer.
			Pdeathsig: syscall.SIGKILL,
			// Out of the engine's process group and session.
			Setsid: true,
		},
	}
	s.waitDone = make(chan struct{})
	// The parent-death signal must follow the engine, not this thread.
	if err := hostside.StartChild(s.cmd); err != nil {
		close(s.waitDone)
		s.cmd = nil
		return fmt.Errorf("start runsc: %w", err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.waitDone)
	}()
	return nil
}

// diagnostics returns runsc's own messages, for errors ("" when none).
func (s *gvSandbox) diagnostics() string {
	if s.diag == nil {
		return ""
	}
	if s.waitDone != nil {
		// runsc's output is complete once it has exited; a failing runsc
		// exits right after printing why.
		select {
		case <-s.waitDone:
		case <-time.After(time.Second):
		}
	}
	if msg := s.diag.String(); msg != "" {
		return " (runsc: " + msg + ")"
	}
	return ""
}

// Kill ends the sandbox at once: every process in its cgroup (Sentry,
// gofer, stubs) and runsc itself get SIGKILL. runsc's state is cleaned up
// later, by Destroy.
func (s *gvSandbox) Kill() {
	if s.group != nil {
		for _, pid := range s.group.Procs() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
	}
	if s.group != nil {
		s.group.KillAll()
	}
}

// Settle implements hostside.Host: init exits after its result; runsc then
// removes the container and exits, which closes the last copies of the
// output pipes. A sandbox that does not end by itself is killed.
func (s *gvSandbox) Settle() { s.waitExit(exitTimeout) }

// Measure implements hostside.Host. The host cgroup's process limit is
// only a backstop for the Sentry's own threads; what caps user code is
// RLIMIT_NPROC inside the Sentry, which only init can see reached (and
// which counts no refusals). On the host the memory limit's victim is the
// Sentry: the whole sandbox goes with it.
func (s *gvSandbox) Measure(out *sandbox.Outcome, res initproto.ResultMessage) {
	out.PidsLimitHit = res.ProcessLimitHit
	hostside.MeasureOOM(s.group, out)
}

// Diagnostics implements hostside.Host: runsc's own messages (see
// diagnostics).
func (s *gvSandbox) Diagnostics() string {
	msg := s.diagnostics()
	if s.group != nil && s.group.PidsLimitHits() > 0 {
		// The Sentry panics where it cannot clone a thread it needs.
		msg += " (the host's task limit for the Sentry and its stubs was hit)"
	}
	return msg
}

// exited reports whether runsc has exited.
func (s *gvSandbox) exited() bool { return hostside.Ended(s.waitDone) }

// waitExit waits up to timeout for runsc to exit by itself (it then has
// removed the container), and kills the sandbox otherwise.
func (s *gvSandbox) waitExit(timeout time.Duration) {
	if s.cmd == nil {
		return
	}
	hostside.WaitOrKill(s.waitDone, timeout, s.Kill)
}

// Run implements sandbox.Sandbox.
func (s *gvSandbox) Run(ctx context.Context, job sandbox.Job) (sandbox.Outcome, error) {
	if err := hostside.UseOnce(&s.ran, job); err != nil {
		return sandbox.Outcome{}, err
	}
	if s.destroyed || s.cmd == nil || s.exited() {
		return sandbox.Outcome{}, fmt.Errorf("sandbox %s is no longer running%s", s.id, s.diagnostics())
	}
	memory := int64(0)
	if job.MemoryBytes > 0 {
		memory = job.MemoryBytes + s.backend.overhead
	}
	if err := hostside.PrepareGroup(s.group, s.background, memory); err != nil {
		return sandbox.Outcome{}, err
	}
	return s.conn.Run(ctx, job)
}

// Destroy implements sandbox.Sandbox. An unused sandbox is asked to end (its
// init sees the control pipe close and exits, and runsc removes the
// container); anything still running after that is killed, runsc's state is
// force-deleted, and every cgroup and the bundle are removed. Purged is true
// only when all of that is verified gone.
func (s *gvSandbox) Destroy() sandbox.Teardown {
	if s.destroyed {
		return s.teardown
	}
	s.destroyed = true
	var errs []error
	if s.conn != nil && s.conn.Control != nil {
		s.conn.Control.Close()
		s.conn.Control = nil
	}
	if s.cmd != nil {
		s.waitExit(exitTimeout)
	}
	s.closeFiles()
	b := s.backend
	if err := b.deleteContainer(s.id); err != nil {
		errs = append(errs, err)
	}
	if err := hostside.DestroyGroup(s.group); err != nil {
		errs = append(errs, err)
	}
	if err := removeGroupDirs(b.opts.CgroupParent, s.id); err != nil {
		errs = append(errs, err)
	}
	if s.bundle != "" {
		if err := os.RemoveAll(s.bundle); err != nil {
			errs = append(errs, fmt.Errorf("remove bundle: %w", err))
		}
	}
	if left := b.stateFiles(s.id); len(left) > 0 {
		errs = append(errs, fmt.Errorf("runsc state left: %v", left))
	}
	s.teardown = hostside.TeardownOf(errs...)
	return s.teardown
}

// closeFiles closes the engine's ends of the sandbox's pipes.
func (s *gvSandbox) closeFiles() {
	if s.conn != nil {
		_ = s.conn.Close()
	}
}

// MemoryUsage implements sandbox.Sandbox: what the sandbox's cgroup uses,
// the Sentry and gofer included.
func (s *gvSandbox) MemoryUsage() int64 { return hostside.GroupMemory(s.group) }

// CPUDemand implements sandbox.CPUMeter: the tasks of the sandbox's cgroup
// (the Sentry, the gofer and what runs under them).
func (s *gvSandbox) CPUDemand() (time.Duration, bool) { return hostside.GroupCPUDemand(s.group) }
