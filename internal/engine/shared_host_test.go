package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces"
)

// Engines on one host share the cgroup parent without waiting on each
// other: while one engine holds a sandbox, a second (a one-shot `exec`, say)
// starts, runs a call and closes, and its Close neither fails nor removes
// what the first one uses (it used to retry removing the busy parent for
// seconds and then report "device or resource busy"); the first engine goes
// on working.
func TestSecondEngineClosesBesideARunningOne(t *testing.T) {
	newTestEngine(t, nil)
	before := leakcheck.Take(leakOpts)
	if testNS.Cgroups() == nil {
		t.Fatal("no cgroups here: the test needs root and a writable hierarchy")
	}
	rt, err := testStore.Resolve("bash")
	if err != nil {
		t.Fatal(err)
	}
	held, err := testNS.Create(context.Background(), sandbox.Config{
		Image:       sandbox.Image{RootFS: rt.RootFS, UIDBase: rt.UIDBase},
		MemoryBytes: 64 << 20, MaxPids: 64, CPUs: 1, WritableBytes: 16 << 20, TmpBytes: 16 << 20, MaxInodes: 4096,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Destroy()

	stateDir := testStateDir + "-second"
	defer os.RemoveAll(stateDir)
	second, err := namespaces.New(namespaces.Options{StateDir: stateDir, CgroupParent: testCgroupParent})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(DefaultConfig(), testStore, second)
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, e, execapi.Request{Runtime: "bash", Code: "echo second", Limits: execapi.Limits{TimeoutMS: 5000, MemoryMB: 64}})
	if res.Stdout != "second\n" {
		t.Fatalf("second engine: %+v", res)
	}
	if err := e.Close(); err != nil {
		t.Errorf("the second engine's Close failed beside a running engine: %v", err)
	}
	for _, dir := range testNS.Cgroups().Parents() {
		if _, err := os.Stat(filepath.Join(dir, held.ID())); err != nil {
			t.Errorf("the running engine's group went: %v", err)
		}
	}

	// The first engine's held sandbox still runs its job, and new ones start.
	var out syncWriter
	outcome, err := held.Run(context.Background(), sandbox.Job{Argv: []string{"/bin/bash", "-c", "echo first"}, Dir: "/tmp",
		Env: []string{"PATH=/usr/bin:/bin"}, Timeout: 5 * time.Second, Stdout: &out, Stderr: &out})
	if err != nil || outcome.ExitCode != 0 || out.String() != "first\n" {
		t.Errorf("held sandbox after the second engine closed: %+v %v %q", outcome, err, out.String())
	}
	if td := held.Destroy(); !td.Purged {
		t.Errorf("teardown: %v", td.Err)
	}
	first := newTestEngine(t, nil)
	if res := run(t, first, execapi.Request{Runtime: "bash", Code: "echo again"}); res.Stdout != "again\n" {
		t.Errorf("first engine after the second closed: %+v", res)
	}
	if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// syncWriter collects a sandbox's output (written from the backend's
// goroutines) for reading after the run.
type syncWriter struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
