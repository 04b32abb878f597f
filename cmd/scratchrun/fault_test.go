//go:build hostile

package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// kill -9 of engines in the middle of runs: their sandboxes die with them,
// and the next engine to start removes every cgroup they left.
func TestHostileKilledEngineIsCleanedUpAtStart(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	before := leakcheck.Take(leakOpts)
	var engines []*exec.Cmd
	for i := 0; i < 4; i++ {
		cmd := exec.Command(binary, "exec", "--runtime", "bash", "--timeout-ms", "30000", "--code", "sleep 25.3 & sleep 25.3")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		engines = append(engines, cmd)
	}
	// Wait until the user code of all four sandboxes runs (both sleeps of
	// each): a cgroup alone is there before its sandbox is.
	deadline := time.Now().Add(30 * time.Second)
	for {
		running := processesRunning("sleep", "25.3")
		if len(running) >= 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandboxes never started: %d of 8 sleeps running", len(running))
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, cmd := range engines {
		cmd.Process.Signal(syscall.SIGKILL) // only the engine: its sandboxes are on their own
		cmd.Wait()
	}
	// The sandboxes die with their engine (parent-death signal on init).
	deadline = time.Now().Add(10 * time.Second)
	for {
		left := leakcheck.NewSince(before, leakcheck.Take(leakOpts))
		procs := 0
		for _, l := range left {
			if strings.HasPrefix(l, "process ") {
				procs++
			}
		}
		if procs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox processes outlived their killed engine: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	groups, _ := filepath.Glob("/sys/fs/cgroup/memory/" + cgroupParent + "/*")
	if len(groups) == 0 {
		t.Log("no cgroup left by the killed engines (nothing to sweep)")
	}
	// A new engine starts, sweeps, and serves normally.
	r := scratchrun(t, t.TempDir(), "", "exec", "--runtime", "bash", "--code", "echo fresh")
	if r.code != 0 || r.stdout != "fresh\n" {
		t.Fatalf("engine after the crash: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	// Every engine has ended: the image views the killed ones kept for
	// their life count as leaks too, unless the new one swept them.
	ended := leakOpts
	ended.BackendMounts = nil
	if left := leakcheck.WaitClean(before, ended, 5*time.Second); len(left) > 0 {
		t.Errorf("left after restart: %v", left)
	}
}
