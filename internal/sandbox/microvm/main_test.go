package microvm

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// These tests boot real microVMs (QEMU and the guest kernel, installed by
// scripts/install-microvm.sh) on the real images (`scratchrun images
// build`), under software emulation on this project's machines. Missing
// pieces fail the tests rather than skip them. The environment
// (directories of the binary's own, the image store, the final leak check)
// is package testenv's.

var (
	env   = testenv.New("microvmtest")
	level = env.Level("microvm", func(stateDir, cgroupParent string) (sandbox.Backend, error) {
		b, err := New(Options{StateDir: stateDir, CgroupParent: cgroupParent})
		if err != nil {
			return nil, err
		}
		return b, nil
	})
)

func TestMain(m *testing.M) {
	// Once the backend is closed, nothing of it may be left in its state
	// directory, and no QEMU of this binary's may run.
	env.AfterAll(leftovers)
	env.Main(m)
}

// backend returns the suite's backend, created once.
func backend(t testing.TB) *Backend {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the microvm backend needs root")
	}
	level.Backend(t)
	return level.Real().(*Backend)
}

// image resolves a runtime's image; a missing one fails the test.
func image(t testing.TB, runtime string) (sandbox.Image, images.Runtime) {
	t.Helper()
	r, err := env.Store(t).Resolve(runtime)
	if err != nil {
		t.Fatalf("%v (run `scratchrun images build`)", err)
	}
	return sandbox.Image{RootFS: r.RootFS, UIDBase: r.UIDBase}, r.Runtime
}

// config is a typical sandbox configuration (the engine's defaults).
func config(img sandbox.Image) sandbox.Config {
	return sandbox.Config{Image: img, MemoryBytes: 256 << 20, MaxPids: 256, CPUs: 1,
		WritableBytes: 128 << 20, TmpBytes: 128 << 20, MaxInodes: 65536}
}

// result is what a test run produced.
type result struct {
	sandbox.Outcome
	stdout, stderr string
	teardown       sandbox.Teardown
}

// run creates a sandbox, runs job in it and destroys it, failing the test on
// errors (not on a non-zero exit) and on an unverified teardown.
func run(t testing.TB, cfg sandbox.Config, job sandbox.Job) result {
	t.Helper()
	b := backend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := b.Create(ctx, cfg)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	var stdout, stderr bytes.Buffer
	job.Stdout, job.Stderr = &stdout, &stderr
	if job.Timeout == 0 {
		job.Timeout = 30 * time.Second
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
	if job.MemoryBytes == 0 {
		job.MemoryBytes = cfg.MemoryBytes
	}
	out, err := s.Run(ctx, job)
	td := s.Destroy()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !td.Purged {
		t.Errorf("teardown not verified: %v", td.Err)
	}
	return result{Outcome: out, stdout: stdout.String(), stderr: stderr.String(), teardown: td}
}

// leftovers lists what the suite's backend left in its state directory,
// and any QEMU still running with a file of it (its initramfs).
func leftovers() []string {
	var out []string
	entries, _ := os.ReadDir(level.StateDir)
	for _, e := range entries {
		out = append(out, level.StateDir+"/"+e.Name())
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if data, err := os.ReadFile(p); err == nil && strings.Contains(string(data), level.StateDir+"/") {
			out = append(out, "process "+filepath.Base(filepath.Dir(p))+": "+strings.ReplaceAll(string(data), "\x00", " "))
		}
	}
	return out
}
