package gvisor

import (
	"context"
	"encoding"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
	"github.com/scratchrun/scratchrun/internal/sandbox/initbin"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces/nsinit"
)

// Time allowed for steps the engine waits on. They bound how long a broken or
// hostile sandbox can hold the engine, not how long user code may run.
const (
	// setupTimeout covers runsc starting the Sentry and gofer and init
	// answering; generous, as a loaded machine makes this slow.
	setupTimeout = 60 * time.Second
	// collectGrace is how long init may take after the job's timeout to kill,
	// reap and read return files before the engine kills the whole sandbox.
	collectGrace = 5 * time.Second
	// exitTimeout bounds waiting for runsc to tear the sandbox down by
	// itself after init has exited.
	exitTimeout = 10 * time.Second
	// drainTimeout bounds waiting for output pipes once runsc is gone.
	drainTimeout = 5 * time.Second
	// maxStatusOverhead is room in a status message beyond return files.
	maxStatusOverhead = 1 << 20
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

	control        *os.File // engine's end: write
	status         *os.File // engine's end: read
	stdout, stderr *os.File // engine's ends: read
	// statusMax bounds the next message read from init.
	statusMax int64
	diag      *boundedBuffer // runsc's own stdout and stderr

	ran bool
	// background: built at background CPU weight, restored in Run.
	background bool
	destroyed  bool
	teardown   sandbox.Teardown // the first Destroy's, repeated by later calls
	waitDone   chan struct{}
	waitErr    error
}

func (s *gvSandbox) ID() string { return s.id }

// start writes the bundle, creates the cgroup, starts `runsc run` and waits
// until init inside reports the sandbox ready.
func (s *gvSandbox) start(ctx context.Context, cfg sandbox.Config, platform string) error {
	b := s.backend
	in := specInput{cfg: cfg, initCaps: b.initCaps}
	if cfg.MemoryBytes > 0 {
		in.memory = cfg.MemoryBytes + b.overhead
	}
	if cfg.MaxPids > 0 {
		// The host sees the Sentry's and gofer's threads and systrap's stub
		// threads (about one per application thread): the backstop is set
		// well above what RLIMIT_NPROC lets user code create inside.
		in.hostPids = 2*cfg.MaxPids + 256
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
	setup := nsinit.SetupMessage{
		MaskPaths:        nsinit.MaskedPaths,
		ReadOnlyPaths:    nsinit.ReadOnlyPaths,
		TmpBytes:         cfg.TmpBytes,
		MaxInodes:        cfg.MaxInodes,
		Hostname:         "sandbox",
		Seccomp:          b.seccomp,
		KeepCapabilities: b.keepCaps,
		LockDownEarly:    true,
	}
	if p := cfg.Prestart; p != nil {
		setup.Prestart = &nsinit.PrestartSpec{Argv: p.Argv, Env: p.Env, Dir: p.Dir}
	}
	if cfg.Network != nil {
		setup.JoinedNetwork = true
		setup.DNS = cfg.Network.DNS
	}
	if err := nsinit.WriteMessage(s.control, setup); err != nil {
		return fmt.Errorf("send setup to init: %w%s", err, s.diagnostics())
	}
	s.statusMax = maxStatusOverhead
	var ready nsinit.ReadyMessage
	if err := s.decodeStatus(ctx, setupTimeout, &ready); err != nil {
		return fmt.Errorf("wait for init: %w%s", err, s.diagnostics())
	}
	if !ready.Ready {
		return fmt.Errorf("init could not prepare the sandbox: %s", ready.Error)
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
	var files []*os.File // child ends, closed once runsc holds them
	defer func() { _ = initbin.CloseAll(files...) }()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w) // both closed on error paths below
		}
		return r, w, err
	}
	controlR, controlW, err := pipe()
	if err != nil {
		return err
	}
	statusR, statusW, err := pipe()
	if err != nil {
		return err
	}
	outR, outW, err := pipe()
	if err != nil {
		return err
	}
	errR, errW, err := pipe()
	if err != nil {
		return err
	}
	initFile, err := os.Open(b.initPath)
	if err != nil {
		return fmt.Errorf("open init program: %w", err)
	}
	// The engine's ends stay open; only the child's are closed after start.
	files = []*os.File{controlR, statusW, outW, errW, initFile}
	s.control, s.status, s.stdout, s.stderr = controlW, statusR, outR, errR

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
		ExtraFiles: []*os.File{controlR, statusW, outW, errW, initFile},
		SysProcAttr: &syscall.SysProcAttr{
			// If the engine dies, runsc dies, and with it (attached mode)
			// the Sentry and gofer.
			Pdeathsig: syscall.SIGKILL,
			// Out of the engine's process group and session.
			Setsid: true,
		},
	}
	s.waitDone = make(chan struct{})
	if err := s.cmd.Start(); err != nil {
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

// decodeStatus reads one message from init within timeout (see
// initbin.DecodeStatus), killing the sandbox when it gives up.
func (s *gvSandbox) decodeStatus(ctx context.Context, timeout time.Duration, v encoding.BinaryUnmarshaler) error {
	return initbin.DecodeStatus(ctx, s.status, s.statusMax, timeout, v, s.kill)
}

// kill ends the sandbox at once: every process in its cgroup (Sentry, gofer,
// stubs) and runsc itself get SIGKILL. runsc's state is cleaned up later, by
// Destroy.
func (s *gvSandbox) kill() {
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

// exited reports whether runsc has exited.
func (s *gvSandbox) exited() bool {
	select {
	case <-s.waitDone:
		return true
	default:
		return false
	}
}

// waitExit waits up to timeout for runsc to exit by itself (it then has
// removed the container), and kills the sandbox otherwise.
func (s *gvSandbox) waitExit(timeout time.Duration) {
	if s.cmd == nil {
		return
	}
	select {
	case <-s.waitDone:
	case <-time.After(timeout):
		s.kill()
		<-s.waitDone
	}
}

// Run implements sandbox.Sandbox.
func (s *gvSandbox) Run(ctx context.Context, job sandbox.Job) (sandbox.Outcome, error) {
	if s.ran {
		return sandbox.Outcome{}, errors.New("sandbox already ran a job; sandboxes are used once")
	}
	s.ran = true
	if len(job.Argv) == 0 {
		return sandbox.Outcome{}, errors.New("job has no command")
	}
	if s.destroyed || s.cmd == nil || s.exited() {
		return sandbox.Outcome{}, fmt.Errorf("sandbox %s is no longer running%s", s.id, s.diagnostics())
	}
	memory := int64(0)
	if job.MemoryBytes > 0 {
		memory = job.MemoryBytes + s.backend.overhead
	}
	if err := initbin.PrepareGroup(s.group, s.background, memory); err != nil {
		return sandbox.Outcome{}, err
	}
	drained := initbin.Drain(job, s.stdout, s.stderr)
	if err := nsinit.WriteMessage(s.control, initbin.JobMessage(job)); err != nil {
		s.kill()
		<-s.waitDone
		return sandbox.Outcome{}, fmt.Errorf("send job to init: %w%s", err, s.diagnostics())
	}
	s.control.Close()
	s.control = nil

	// A hostile sandbox may send anything; it may not send more than the
	// return budget allows.
	s.statusMax = 2*job.MaxReturnBytes + maxStatusOverhead
	var res nsinit.ResultMessage
	decodeErr := s.decodeStatus(ctx, job.Timeout+collectGrace, &res)
	if ctx.Err() != nil {
		<-s.waitDone
		return sandbox.Outcome{}, ctx.Err()
	}
	engineTimedOut := errors.Is(decodeErr, initbin.ErrNoAnswer)
	// Init exits after its result; runsc then removes the container and
	// exits, which closes the last copies of the output pipes.
	s.waitExit(exitTimeout)
	initbin.WaitDrained(drained, drainTimeout)

	// The host cgroup's process limit is only a backstop for the Sentry's
	// own threads; what caps user code is RLIMIT_NPROC inside the Sentry,
	// which only init can see reached (and which counts no refusals).
	out := sandbox.Outcome{Files: res.Files, Notes: res.Notes, Duration: res.Duration, PidsLimitHit: res.ProcessLimitHit}
	if s.group != nil && s.group.OOMKills() > 0 {
		out.OOMKilled = true
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
		// On the host the memory limit's victim is the Sentry: the whole
		// sandbox went with it.
		out.ExitCode, out.Signal = 128+int(syscall.SIGKILL), int(syscall.SIGKILL)
		out.Notes = append(out.Notes, "The whole sandbox was killed at the memory limit; return files are lost.")
	default:
		return sandbox.Outcome{}, fmt.Errorf("sandbox init ended without a result: %v%s", decodeErr, s.diagnostics())
	}
	if out.Files == nil {
		out.Files = map[string][]byte{}
	}
	return out, nil
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
	if s.control != nil {
		s.control.Close()
		s.control = nil
	}
	if s.cmd != nil {
		s.waitExit(exitTimeout)
	}
	s.closeFiles()
	b := s.backend
	if err := b.deleteContainer(s.id); err != nil {
		errs = append(errs, err)
	}
	if s.group != nil {
		if !s.group.KillAll() {
			errs = append(errs, fmt.Errorf("processes still in cgroup after SIGKILL: %v", s.group.Procs()))
		}
		if err := s.group.Destroy(); err != nil {
			errs = append(errs, err)
		}
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
	err := errors.Join(errs...)
	s.teardown = sandbox.Teardown{Purged: err == nil, Err: err}
	return s.teardown
}

// closeFiles closes the engine's ends of the sandbox's pipes.
func (s *gvSandbox) closeFiles() {
	_ = initbin.CloseAll(s.control, s.status, s.stdout, s.stderr)
	s.control, s.status, s.stdout, s.stderr = nil, nil, nil, nil
}

// MemoryUsage reports the memory the sandbox's cgroup uses now, the Sentry
// and gofer included (0 when unknown). The warm pool measures its budget
// with it.
func (s *gvSandbox) MemoryUsage() int64 {
	if s.group == nil {
		return 0
	}
	return s.group.MemoryUsage()
}
