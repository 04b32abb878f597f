package microvm

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// A session's guest is forked whole between jobs: QEMU saves the running
// machine (as a boot snapshot is saved, snapshot.go) into a file that is
// already unlinked, the parent runs on, and a new QEMU restores the copy
// on new sockets. The copy's processes and memory are the parent's at the
// fork; from then on the two diverge. The copy is told the time and a
// fresh seed (its restore helper applies them, goinit's microvm_fork.go),
// so that the two kernels draw different random numbers; what user
// processes seeded themselves before the fork they share, as after
// fork(2). Forks happen only between jobs (Session's methods are not
// called concurrently), after the job's output is drained, so nothing of
// the protocol is in flight on the ports.

// forkKindMemory is execapi.ForkMemory (the sandbox layer does not import
// the API's).
const forkKindMemory = "memory"

var _ sandbox.Forker = (*vmSession)(nil)

// ForkKind implements sandbox.Forker: a copy holds files and memory.
func (s *vmSession) ForkKind() string { return forkKindMemory }

// Fork implements sandbox.Forker. cfg must describe the parent's machine
// (image, memory, CPUs; no egress: the network device is not in a saved
// machine), as a restore needs the saved machine's shape.
func (s *vmSession) Fork(ctx context.Context, cfg sandbox.Config) (sandbox.Sandbox, error) {
	if !cfg.Session {
		return nil, errors.New("a fork is a session sandbox: cfg.Session must be set")
	}
	if !s.Alive() {
		return nil, sandbox.ErrSessionEnded
	}
	b := s.backend
	if cfg.Network != nil || s.link != nil {
		return nil, errors.New("a session with egress cannot be forked: its network device is not in a saved machine")
	}
	drive, err := b.images.path(cfg.Image)
	if err != nil {
		return nil, err
	}
	if drive != s.spec.Drive || b.guestMemoryMB(cfg) != s.spec.MemoryMB || vcpus(cfg.CPUs) != s.spec.CPUs {
		return nil, errors.New("a fork has its parent's machine: the same image, memory and CPUs")
	}
	state, err := s.saveRunning()
	if err != nil {
		return nil, err
	}
	defer state.Close()
	seq := b.seq.Add(1)
	child := &vmSandbox{id: fmt.Sprintf("%s_%d", b.instance, seq), seq: seq, backend: b, background: cfg.Background}
	if err := hostside.StartOrDestroy(child, "microVM", b.opts.Logger, func() error { return child.restoreFork(ctx, cfg, s.spec, state) }); err != nil {
		return nil, err
	}
	return &vmSession{vmSandbox: child}, nil
}

// saveRunning saves the running guest into an unlinked file in the
// snapshot directory (the cache disk: the guest's touched RAM is too large
// for /run) and lets the guest run on. It returns the file opened for
// reading from its start; the saved state is gone once that is closed.
func (s *vmSandbox) saveRunning() (*os.File, error) {
	dir := s.backend.opts.StateDir
	if s.backend.snapshots != nil {
		dir = s.backend.snapshots.dir
	}
	w, err := os.CreateTemp(dir, s.backend.instance+"-fork-*.vmstate")
	if err != nil {
		return nil, fmt.Errorf("fork: %w", err)
	}
	defer w.Close()
	r, err := os.Open(w.Name())
	os.Remove(w.Name())
	if err != nil {
		return nil, fmt.Errorf("fork: %w", err)
	}
	saveErr := s.vm.Save(w)
	// The parent runs on whether or not its state was written.
	if err := s.vm.Resume(); err != nil {
		r.Close()
		s.Kill()
		return nil, fmt.Errorf("fork: the session could not run on after its machine was saved: %w%s", err, s.Diagnostics())
	}
	if saveErr != nil {
		r.Close()
		return nil, fmt.Errorf("fork: save the session's machine: %w%s", saveErr, s.Diagnostics())
	}
	return r, nil
}

// restoreFork starts the copy: a machine of parent's shape restored from
// state, in a cgroup and under a QEMU uid of its own, then tells its guest
// the time and a fresh seed and makes its Conn a session's (the guest's
// agent is already set up: it waits for its next request).
func (s *vmSandbox) restoreFork(ctx context.Context, cfg sandbox.Config, parent MachineSpec, state *os.File) error {
	b := s.backend
	if b.cgroups != nil {
		limits := cgroups.Limits{MemoryBytes: parent.MemoryMB<<20 + b.hostOverhead, MaxPids: vmmPids, CPUs: cfg.CPUs, Background: cfg.Background}
		var err error
		if s.group, err = b.cgroups.Create(s.id, limits); err != nil {
			return err
		}
	}
	cred, err := s.vmmCredential()
	if err != nil {
		return err
	}
	spec := parent
	spec.Ports, spec.Console, spec.Stderr, spec.Tap, spec.Credential = nil, nil, nil, nil, cred
	spec.Incoming = state
	pipes, vmEnds, err := s.ports(&spec)
	if err != nil {
		return err
	}
	defer hostside.CloseAll(vmEnds...)
	s.conn = hostside.NewConnWith(s, timeouts, pipes)
	var join func(int) error
	if s.group != nil {
		join = s.group.AddProcess
	}
	s.restored = true
	s.spec = spec
	if s.vm, err = b.vmm.Start(spec, join); err != nil {
		return fmt.Errorf("%w%s", err, s.Diagnostics())
	}
	hostside.CloseAll(vmEnds...)
	wake := initproto.VMMessage{Now: time.Now(), Seed: make([]byte, seedBytes)}
	if _, err := rand.Read(wake.Seed); err != nil {
		return err
	}
	if err := initproto.WriteMessage(s.vmPort, wake); err != nil {
		return fmt.Errorf("send the fork its clock and seed: %w%s", err, s.Diagnostics())
	}
	var answer initproto.VMReport
	if err := s.readReport(ctx, timeouts.Setup, &answer); err != nil {
		return fmt.Errorf("the fork did not wake: %w%s", err, s.Diagnostics())
	}
	if answer.Error != "" {
		return fmt.Errorf("the fork could not take its clock and seed: %s", answer.Error)
	}
	s.conn.StartSession()
	return nil
}

// forkStateFiles lists this engine's fork states left in dir (none should
// be: each is unlinked before it is written).
func forkStateFiles(dir, instance string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, instance+"-fork-*.vmstate"))
	return m
}
