// Package testenv is the sandbox environment of one test binary, in place
// of the setup every suite that runs real sandboxes used to repeat: a state
// directory and cgroup parent of the binary's own per isolation level (so
// that its leak checks see only its own sandboxes), the image store (a
// missing image fails the tests, never skips them), each level's backend
// opened once and shared, and at the end the backends closed, their
// directories removed and the leak check that proves nothing is left.
// Under -short (the fast tier, an ordinary user: docs/design.md, "Test
// tiers") Store and Backend skip the tests that need them instead.
//
// A suite declares its Env in a package variable, its levels with Level (or
// levels.All for the whole table), and calls Main from TestMain. It only
// prepares and checks: it never hides what a test left by cleaning it up
// before the check.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
	"github.com/scratchrun/scratchrun/internal/sandbox/goinit"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
	"github.com/scratchrun/scratchrun/internal/sandbox/idmap"
)

// cleanWait bounds the wait, at the end, for what sandboxes leave to go
// (the kernel tears some of it down after the processes are gone).
const cleanWait = 10 * time.Second

// Opener opens a level's backend in the given state directory and under the
// given cgroup parent.
type Opener func(stateDir, cgroupParent string) (sandbox.Backend, error)

// Env is one test binary's environment.
type Env struct {
	suite  string
	levels []*Level
	checks []func() []string
	atEnd  []func() error

	storeOnce sync.Once
	store     *images.Store
	storeErr  error
}

// New returns the environment of the suite named suite ("engine",
// "httpapi", ...): its directories are named after it and the binary's pid.
func New(suite string) *Env { return &Env{suite: suite} }

// Level declares an isolation level (open may be nil for a suite that only
// runs sandboxes in other processes, such as the CLI's binaries). Declare
// levels before Main runs.
func (e *Env) Level(name string, open Opener) *Level {
	id := fmt.Sprintf("scratchrun-%s-%d-%s", e.suite, os.Getpid(), name)
	l := &Level{
		Name: name, StateDir: filepath.Join("/run", id), CgroupParent: id, open: open,
	}
	l.Leak = leakcheck.Options{CgroupParent: l.CgroupParent, MountMarkers: []string{l.StateDir, DataDir()},
		BackendMounts: viewDirs(l.StateDir)}
	e.levels = append(e.levels, l)
	return l
}

// AfterAll adds a check run at the end, when every test passed, after the
// backends are closed: it returns what is left, if anything.
func (e *Env) AfterAll(check func() []string) { e.checks = append(e.checks, check) }

// AtEnd adds f, run once the tests are done and before the leak check, to
// stop what the suite started besides sandboxes (a database server): its
// processes are not the sandboxes' leftovers. An error fails the suite.
func (e *Env) AtEnd(f func() error) { e.atEnd = append(e.atEnd, f) }

// Main runs the tests and ends the process with their status (see Run).
func (e *Env) Main(m *testing.M) { os.Exit(e.Run(m)) }

// Run runs the tests and returns their status, made a failure when
// closing a backend fails or anything of the suite's sandboxes is left. It
// first lets the binary serve as a gVisor sandbox's init (the Go init runs
// as the test binary when no scratchrun-init is installed next to it).
func (e *Env) Run(m *testing.M) int {
	goinit.RunIfRequested()
	if short() {
		// The fast tier (go test -short, as an ordinary user): Store and
		// Backend skip the tests that need them, so no sandbox runs and
		// there is nothing to sweep or check, and an ordinary user could
		// not read what the sweep and the leak check look at.
		code := m.Run()
		for _, f := range e.atEnd {
			if err := f(); err != nil {
				fmt.Fprintf(os.Stderr, "the %s suite's end: %v\n", e.suite, err)
				code = 1
			}
		}
		return code
	}
	e.sweepDeadRuns()
	for _, l := range e.levels {
		l.before = leakcheck.Take(l.Leak)
	}
	code := m.Run()
	for _, f := range e.atEnd {
		if err := f(); err != nil {
			fmt.Fprintf(os.Stderr, "the %s suite's end: %v\n", e.suite, err)
			code = 1
		}
	}
	for _, l := range e.levels {
		if err := l.close(); err != nil {
			fmt.Fprintf(os.Stderr, "close the %s backend: %v\n", l.Name, err)
			code = 1
		}
	}
	if code == 0 {
		for _, l := range e.levels {
			// The backend is closed: what it kept for its life must be
			// gone too.
			closed := l.Leak
			closed.BackendMounts = nil
			if left := leakcheck.WaitClean(l.before, closed, cleanWait); len(left) > 0 {
				fmt.Fprintf(os.Stderr, "the %s suite left behind (%s):\n  %s\n", e.suite, l.Name, strings.Join(left, "\n  "))
				code = 1
			}
		}
		for _, check := range e.checks {
			if left := check(); len(left) > 0 {
				fmt.Fprintf(os.Stderr, "the %s suite left behind:\n  %s\n", e.suite, strings.Join(left, "\n  "))
				code = 1
			}
		}
	}
	for _, l := range e.levels {
		os.RemoveAll(l.StateDir)
	}
	return code
}

// DataDir is where the images are: $SCRATCHRUN_DATA_DIR, else
// /var/lib/scratchrun.
func DataDir() string {
	if d := os.Getenv("SCRATCHRUN_DATA_DIR"); d != "" {
		return d
	}
	return "/var/lib/scratchrun"
}

// Store opens the image store once and fails t when no image, or any of
// runtimes, is installed: a suite that silently tests nothing is worse than
// a red one.
func (e *Env) Store(t testing.TB, runtimes ...string) *images.Store {
	t.Helper()
	SkipIfShort(t, "runs on the installed runtime images")
	e.storeOnce.Do(func() {
		e.store, e.storeErr = images.OpenStore(images.Options{Root: DataDir(), UIDBase: images.DefaultUIDBase})
		if e.storeErr == nil && len(e.store.Installed()) == 0 {
			e.storeErr = fmt.Errorf("no runtime images in %s: run `scratchrun images build` first", DataDir())
		}
	})
	if e.storeErr != nil {
		t.Fatalf("open image store: %v", e.storeErr)
	}
	for _, rt := range runtimes {
		if _, err := e.store.Resolve(rt); err != nil {
			t.Fatalf("%v (run `scratchrun images build`)", err)
		}
	}
	return e.store
}

// Level is one isolation level of a test binary: its directories, its leak
// check and its shared backend.
type Level struct {
	// Name is the isolation level's name ("namespaces", "gvisor").
	Name string
	// StateDir and CgroupParent are the binary's own for this level.
	StateDir, CgroupParent string
	// Leak tells leakcheck where this level's sandboxes live.
	Leak leakcheck.Options

	open   Opener
	before leakcheck.Snapshot
	once   sync.Once
	real   sandbox.Backend
	shared *Shared
	err    error
}

// Backend returns the level's backend, opened on first use and shared by
// the binary's tests; t fails when it cannot be opened.
func (l *Level) Backend(t testing.TB) *Shared {
	t.Helper()
	SkipIfShort(t, "runs real sandboxes ("+l.Name+"), as root")
	l.once.Do(func() {
		if l.open == nil {
			l.err = errors.New("no backend for this level in this suite")
			return
		}
		l.real, l.err = l.open(l.StateDir, l.CgroupParent)
		if l.err == nil {
			l.shared = &Shared{Backend: l.real}
		}
	})
	if l.err != nil {
		t.Fatalf("%s backend: %v", l.Name, l.err)
	}
	return l.shared
}

// Real is the level's backend itself (nil until Backend opened it), for
// tests that need its own methods.
func (l *Level) Real() sandbox.Backend { return l.real }

// Snapshot records what exists now where this level's sandboxes live.
func (l *Level) Snapshot() leakcheck.Snapshot { return leakcheck.Take(l.Leak) }

// CheckClean fails t when something this level's sandboxes leave is still
// there, a while after before was taken.
func (l *Level) CheckClean(t testing.TB, before leakcheck.Snapshot) {
	t.Helper()
	if left := leakcheck.WaitClean(before, l.Leak, cleanWait); len(left) > 0 {
		t.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
	}
}

// close closes the backend, if opened. A level without one runs its
// sandboxes in other processes (the CLI's binaries), which may leave the
// cgroup parent they shared (one killed on purpose does): its empty parent
// directories are removed; one that cannot be is a leak, and an error.
func (l *Level) close() error {
	if l.open != nil {
		if l.real == nil {
			return nil
		}
		return l.real.Close()
	}
	// A killed engine's image views are what the next engine would sweep.
	for _, dir := range viewStateDirs(l.StateDir) {
		if _, err := idmap.SweepViews(dir, hostside.InstanceAlive); err != nil {
			return err
		}
	}
	return removeCgroupDirs(l.CgroupParent)
}

// viewStateDirs are the state directories below which a level's engines
// keep their image views (idmap.ViewsDir): the level's own, and the
// gVisor backend's of the CLI's binaries (cmd/scratchrun's newBackend).
func viewStateDirs(stateDir string) []string {
	return []string{stateDir, filepath.Join(stateDir, "gvisor")}
}

// viewDirs are the prefixes of those views' mount points.
func viewDirs(stateDir string) []string {
	var out []string
	for _, d := range viewStateDirs(stateDir) {
		out = append(out, filepath.Join(d, idmap.ViewsDir)+"/")
	}
	return out
}

// Shared is a level's backend as the binary's tests share it: it counts the
// sandboxes created through it, and its Close does nothing (an engine
// closes its backend; the Env closes the real one when the binary ends).
type Shared struct {
	sandbox.Backend
	created atomic.Int64
}

// Create implements sandbox.Backend, counting.
func (s *Shared) Create(ctx context.Context, cfg sandbox.Config) (sandbox.Sandbox, error) {
	s.created.Add(1)
	return s.Backend.Create(ctx, cfg)
}

// Created counts the sandboxes created through s so far.
func (s *Shared) Created() int64 { return s.created.Load() }

// Close implements sandbox.Backend: it leaves the shared backend open.
func (s *Shared) Close() error { return nil }

// Unwrap is the level's backend: its optional interfaces (a memory budget,
// emulation) are the engine's to find (sandbox.BackendAs).
func (s *Shared) Unwrap() sandbox.Backend { return s.Backend }

// removeCgroupDirs removes the empty directories named name on every
// cgroup hierarchy (those the Manager uses and those it does not, such as
// v1's named systemd one); one that cannot be removed is an error.
func removeCgroupDirs(name string) error {
	var errs []error
	for _, dir := range cgroups.HierarchyDirs(name) {
		if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
			errs = append(errs, fmt.Errorf("remove cgroup parent: %w", err))
		}
	}
	return errors.Join(errs...)
}
