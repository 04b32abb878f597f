// Package sandboxtest is a fake sandbox.Backend for tests of what sits above
// the backends (the engine's pool and admission, front ends): the real
// types, each sandbox's Create, Run and Destroy scripted (outcomes, errors,
// delays, output, memory), and counts of what was created, run and
// destroyed. Such tests run in milliseconds, without root or images.
//
// It runs nothing and isolates nothing: the real backends are tested with
// real sandboxes, and nothing but tests may import this package.
package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// Step is what one sandbox does.
type Step struct {
	// CreateDelay is how long Create takes (cut short by its context);
	// CreateErr, when set, is its error.
	CreateDelay time.Duration
	CreateErr   error
	// RunDelay is how long the job runs. Past the job's Timeout the run
	// ends as a real one does: timed out, killed (exit 137). Cancelling
	// Run's context ends it with the context's error.
	RunDelay time.Duration
	// RunErr, when set, is Run's error (sandbox.ErrLimitBelowUsage, say).
	RunErr error
	// Outcome is the run's outcome when it ends in time (Files nil is
	// made empty, as the real backends do).
	Outcome sandbox.Outcome
	// Stdout and Stderr are written to the job's writers.
	Stdout, Stderr string
	// Do, when set, runs the job in place of RunErr, Outcome and the
	// output above (after RunDelay): a script that depends on the job.
	Do func(ctx context.Context, job sandbox.Job) (sandbox.Outcome, error)
	// Memory is what MemoryUsage reports.
	Memory int64
	// CPURate, when set, makes the sandbox a sandbox.CPUMeter whose tasks
	// have demanded this many CPUs' worth of time since its job began (1:
	// one task computing all along).
	CPURate float64
	// TeardownErr, when set, makes Destroy report an unverified teardown.
	TeardownErr error
}

// Backend is the fake. Its zero value works: every sandbox runs its job at
// once with exit code 0.
type Backend struct {
	// Steps script the sandboxes in the order they are created; once they
	// are used up the last one repeats.
	Steps []Step
	// Script, when set, decides the step of sandbox n (from 0) instead.
	Script func(n int, cfg sandbox.Config) Step
	// Unenforced is what UnenforcedLimits reports.
	Unenforced []sandbox.Limit
	// UnenforcedReason is what UnenforcedWhy reports.
	UnenforcedReason string
	// OtherMemory is memory the parent holds beside the live sandboxes
	// (another engine's, say): MemoryInUse adds it to theirs.
	OtherMemory atomic.Int64
	// Zygotes is what MakesZygotes reports (the fake makes every sandbox
	// alike, Config.Zygote or not; Configs shows what it was asked).
	Zygotes bool

	mu        sync.Mutex
	created   int
	destroyed int
	runs      int
	closed    int
	retired   int
	configs   []sandbox.Config
	jobs      []sandbox.Job
	live      map[*Sandbox]bool
	budget    int64
}

var _ sandbox.Backend = (*Backend)(nil)
var _ sandbox.MemoryBudget = (*Backend)(nil)
var _ sandbox.ZygoteMaker = (*Backend)(nil)

// MakesZygotes implements sandbox.ZygoteMaker: Zygotes.
func (b *Backend) MakesZygotes() bool { return b.Zygotes }

// RetireZygotes implements sandbox.ZygoteMaker, counting the calls.
func (b *Backend) RetireZygotes() { b.mu.Lock(); defer b.mu.Unlock(); b.retired++ }

// Retired counts the calls of RetireZygotes.
func (b *Backend) Retired() int { b.mu.Lock(); defer b.mu.Unlock(); return b.retired }

// SetMemoryBudget implements sandbox.MemoryBudget: it records the limit
// (Budget).
func (b *Backend) SetMemoryBudget(bytes int64) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.budget = bytes
	return true, nil
}

// Budget is what SetMemoryBudget was last given.
func (b *Backend) Budget() int64 { b.mu.Lock(); defer b.mu.Unlock(); return b.budget }

// MemoryInUse implements sandbox.MemoryBudget: the Memory of every
// sandbox created and not yet destroyed, plus OtherMemory.
func (b *Backend) MemoryInUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	total := b.OtherMemory.Load()
	for s := range b.live {
		total += s.step.Memory
	}
	return total
}

// Name implements sandbox.Backend.
func (b *Backend) Name() string { return "fake" }

// Limitations implements sandbox.Backend.
func (b *Backend) Limitations() []string { return nil }

// UnenforcedLimits implements sandbox.Backend.
func (b *Backend) UnenforcedLimits() []sandbox.Limit { return b.Unenforced }

// UnenforcedWhy implements sandbox.UnenforcedReason: UnenforcedReason.
func (b *Backend) UnenforcedWhy() string { return b.UnenforcedReason }

// Close implements sandbox.Backend, counting the calls.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed++
	return nil
}

// Create implements sandbox.Backend: it follows the sandbox's step.
func (b *Backend) Create(ctx context.Context, cfg sandbox.Config) (sandbox.Sandbox, error) {
	b.mu.Lock()
	n := len(b.configs)
	b.configs = append(b.configs, cfg)
	b.mu.Unlock()
	step := b.step(n, cfg)
	if err := sleep(ctx, step.CreateDelay); err != nil {
		return nil, err
	}
	if step.CreateErr != nil {
		return nil, step.CreateErr
	}
	sb := &Sandbox{id: fmt.Sprintf("fake-%d", n), backend: b, step: step}
	b.mu.Lock()
	b.created++
	if b.live == nil {
		b.live = map[*Sandbox]bool{}
	}
	b.live[sb] = true
	b.mu.Unlock()
	return sb, nil
}

func (b *Backend) step(n int, cfg sandbox.Config) Step {
	switch {
	case b.Script != nil:
		return b.Script(n, cfg)
	case len(b.Steps) == 0:
		return Step{}
	case n < len(b.Steps):
		return b.Steps[n]
	}
	return b.Steps[len(b.Steps)-1]
}

// Created counts the sandboxes Create returned.
func (b *Backend) Created() int { b.mu.Lock(); defer b.mu.Unlock(); return b.created }

// Destroyed counts the sandboxes destroyed (each once, however often its
// Destroy was called).
func (b *Backend) Destroyed() int { b.mu.Lock(); defer b.mu.Unlock(); return b.destroyed }

// Live counts the sandboxes created and not yet destroyed.
func (b *Backend) Live() int { b.mu.Lock(); defer b.mu.Unlock(); return b.created - b.destroyed }

// Runs counts the jobs run.
func (b *Backend) Runs() int { b.mu.Lock(); defer b.mu.Unlock(); return b.runs }

// Closed counts the calls of Close.
func (b *Backend) Closed() int { b.mu.Lock(); defer b.mu.Unlock(); return b.closed }

// Configs are the configurations Create was called with, in order.
func (b *Backend) Configs() []sandbox.Config {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]sandbox.Config(nil), b.configs...)
}

// Jobs are the jobs run, in the order they started.
func (b *Backend) Jobs() []sandbox.Job {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]sandbox.Job(nil), b.jobs...)
}

// Sandbox is one fake sandbox.
type Sandbox struct {
	id      string
	backend *Backend
	step    Step

	mu        sync.Mutex
	ran       bool
	runSince  time.Time
	destroyed bool
}

var _ sandbox.Sandbox = (*Sandbox)(nil)
var _ sandbox.CPUMeter = (*Sandbox)(nil)

// CPUDemand implements sandbox.CPUMeter from the step's CPURate (no count
// when it is 0).
func (s *Sandbox) CPUDemand() (time.Duration, bool) {
	if s.step.CPURate == 0 {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runSince.IsZero() {
		return 0, true
	}
	return time.Duration(s.step.CPURate * float64(time.Since(s.runSince))), true
}

// ID implements sandbox.Sandbox.
func (s *Sandbox) ID() string { return s.id }

// MemoryUsage implements sandbox.Sandbox: the step's Memory.
func (s *Sandbox) MemoryUsage() int64 { return s.step.Memory }

// Run implements sandbox.Sandbox: once, and only before Destroy, as the
// real ones.
func (s *Sandbox) Run(ctx context.Context, job sandbox.Job) (sandbox.Outcome, error) {
	s.mu.Lock()
	switch {
	case s.destroyed:
		s.mu.Unlock()
		return sandbox.Outcome{}, errors.New("sandbox already destroyed")
	case s.ran:
		s.mu.Unlock()
		return sandbox.Outcome{}, errors.New("sandbox already ran a job; sandboxes are used once")
	}
	s.ran = true
	s.runSince = time.Now()
	s.mu.Unlock()
	b := s.backend
	b.mu.Lock()
	b.runs++
	b.jobs = append(b.jobs, job)
	b.mu.Unlock()
	if s.step.RunErr != nil {
		return sandbox.Outcome{}, s.step.RunErr
	}
	if s.step.Do == nil {
		write(job.Stdout, s.step.Stdout)
		write(job.Stderr, s.step.Stderr)
	}
	delay := s.step.RunDelay
	timedOut := job.Timeout > 0 && delay > job.Timeout
	if timedOut {
		delay = job.Timeout
	}
	if err := sleep(ctx, delay); err != nil {
		return sandbox.Outcome{}, err
	}
	out := s.step.Outcome
	if s.step.Do != nil && !timedOut {
		var err error
		if out, err = s.step.Do(ctx, job); err != nil {
			return sandbox.Outcome{}, err
		}
	}
	if timedOut {
		killed := int(syscall.SIGKILL)
		out = sandbox.Outcome{TimedOut: true, ExitCode: 128 + killed, Signal: killed, Duration: job.Timeout}
	}
	if out.Files == nil {
		out.Files = map[string][]byte{}
	}
	return out, nil
}

// Destroy implements sandbox.Sandbox.
func (s *Sandbox) Destroy() sandbox.Teardown {
	s.mu.Lock()
	first := !s.destroyed
	s.destroyed = true
	s.mu.Unlock()
	if first {
		b := s.backend
		b.mu.Lock()
		b.destroyed++
		delete(b.live, s)
		b.mu.Unlock()
	}
	if s.step.TeardownErr != nil {
		return sandbox.Teardown{Err: s.step.TeardownErr}
	}
	return sandbox.Teardown{Purged: true}
}

func write(w io.Writer, s string) {
	if w != nil && s != "" {
		_, _ = io.WriteString(w, s)
	}
}

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
