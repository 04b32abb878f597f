package testenv

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// What a backend's own suite does to run one job in one sandbox, below the
// engine: the image, a typical configuration, and create, run, destroy.

// Image resolves runtime's image in the store; a missing one fails t.
func (e *Env) Image(t testing.TB, runtime string) (sandbox.Image, images.Runtime) {
	t.Helper()
	r, err := e.Store(t).Resolve(runtime)
	if err != nil {
		t.Fatalf("%v (run `scratchrun images build`)", err)
	}
	return sandbox.Image{RootFS: r.RootFS, UIDBase: r.UIDBase}, r.Runtime
}

// SandboxConfig is a sandbox's configuration as the engine's defaults make
// it, on img.
func SandboxConfig(img sandbox.Image) sandbox.Config {
	return sandbox.Config{Image: img, MemoryBytes: 256 << 20, MaxPids: 256, CPUs: 1,
		WritableBytes: 128 << 20, TmpBytes: 128 << 20, MaxInodes: 65536}
}

// RealBackend is l's backend itself, opened on first use (t fails when it
// cannot be), for a backend's own suite, which calls its methods.
func RealBackend[B sandbox.Backend](t testing.TB, l *Level) B {
	t.Helper()
	l.Backend(t)
	return l.Real().(B)
}

// JobRun is what RunJob saw of one job.
type JobRun struct {
	sandbox.Outcome
	Stdout, Stderr string
	Teardown       sandbox.Teardown
}

// JobLimits bound RunJob on a level: Within the whole of creating, running
// and destroying the sandbox, Timeout a job that sets no timeout of its own
// (a level that boots a kernel under emulation needs more of both).
type JobLimits struct {
	Within  time.Duration
	Timeout time.Duration
}

// RunJob creates a sandbox of l's backend with cfg, runs job in it and
// destroys it, failing t on an error (not on a non-zero exit) and on a
// teardown that is not verified. What job leaves unset is filled as the
// engine would: limits.Timeout, 1 MiB of return files, /tmp, and a PATH,
// HOME and LANG.
func (l *Level) RunJob(t testing.TB, cfg sandbox.Config, job sandbox.Job, limits JobLimits) JobRun {
	t.Helper()
	b := l.Backend(t)
	ctx, cancel := context.WithTimeout(context.Background(), limits.Within)
	defer cancel()
	s, err := b.Create(ctx, cfg)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	var stdout, stderr bytes.Buffer
	job.Stdout, job.Stderr = &stdout, &stderr
	if job.Timeout == 0 {
		job.Timeout = limits.Timeout
	}
	if job.MaxReturnBytes == 0 {
		job.MaxReturnBytes = 1 << 20
	}
	if job.Dir == "" {
		job.Dir = "/tmp"
	}
	if job.Env == nil {
		job.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8"}
	}
	out, err := s.Run(ctx, job)
	td := s.Destroy()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !td.Purged {
		t.Errorf("teardown not verified: %v", td.Err)
	}
	return JobRun{Outcome: out, Stdout: stdout.String(), Stderr: stderr.String(), Teardown: td}
}
