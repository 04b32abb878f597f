package gvisor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// These tests run real gVisor sandboxes (runsc, built by
// scripts/install-runsc.sh) on the real images (`scratchrun images build`).
// Missing pieces fail the tests rather than skip them.

var (
	testStateDir     = fmt.Sprintf("/run/scratchrun-gvisortest-%d", os.Getpid())
	testCgroupParent = fmt.Sprintf("scratchrun-gvisortest-%d", os.Getpid())
	leakOpts         = leakcheck.Options{CgroupParent: testCgroupParent, MountMarkers: []string{testStateDir, "/var/lib/scratchrun"}}

	testBackend *Backend
	testStore   *images.Store
	suiteBefore leakcheck.Snapshot
)

func TestMain(m *testing.M) {
	RunInitIfRequested()
	suiteBefore = leakcheck.Take(leakOpts)
	code := m.Run()
	if testBackend != nil {
		if err := testBackend.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "close backend:", err)
			code = 1
		}
	}
	if code == 0 {
		if left := leakcheck.WaitClean(suiteBefore, leakOpts, 10*time.Second); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "leak check after the gvisor suite failed:\n  %s\n", strings.Join(left, "\n  "))
			code = 1
		}
		if left := leftoverState(true); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "runsc state or bundles left: %v\n", left)
			code = 1
		}
	}
	os.RemoveAll(testStateDir)
	os.Exit(code)
}

// backend returns the suite's backend, created once.
func backend(t testing.TB) *Backend {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the gvisor backend needs root")
	}
	if testBackend == nil {
		b, err := New(Options{StateDir: testStateDir, CgroupParent: testCgroupParent, DebugLogDir: os.Getenv("SCRATCHRUN_TEST_RUNSC_DEBUG")})
		if err != nil {
			t.Fatalf("gvisor backend: %v", err)
		}
		testBackend = b
	}
	return testBackend
}

func dataDir() string {
	if d := os.Getenv("SCRATCHRUN_DATA_DIR"); d != "" {
		return d
	}
	return "/var/lib/scratchrun"
}

// image resolves a runtime's image; a missing one fails the test.
func image(t testing.TB, runtime string) (sandbox.Image, images.Runtime) {
	t.Helper()
	if testStore == nil {
		st, err := images.OpenStore(images.Options{Root: dataDir(), UIDBase: 1_000_000_000})
		if err != nil {
			t.Fatalf("open image store: %v", err)
		}
		testStore = st
	}
	r, err := testStore.Resolve(runtime)
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := b.Create(ctx, cfg)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	var stdout, stderr bytes.Buffer
	job.Stdout, job.Stderr = &stdout, &stderr
	if job.Timeout == 0 {
		job.Timeout = 20 * time.Second
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
	return result{Outcome: out, stdout: stdout.String(), stderr: stderr.String(), teardown: td}
}

// leftoverState lists runsc state files and bundles still in the test's
// state directory; withPin counts runsc's pinned network namespace too,
// which lives as long as the backend.
func leftoverState(withPin bool) []string {
	var out []string
	for _, pattern := range []string{"runsc/*", "bundles/*"} {
		m, _ := filepath.Glob(filepath.Join(testStateDir, pattern))
		for _, p := range m {
			if withPin || filepath.Base(p) != "null-netns" {
				out = append(out, p)
			}
		}
	}
	return out
}
