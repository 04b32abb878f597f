package cgroups

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// hogEnv makes the test binary a memory hog (see TestMain): it waits for
// a line on stdin, then touches that many MiB and holds them.
const hogEnv = "SCRATCHRUN_CGROUPS_TEST_HOG_MIB"

func TestMain(m *testing.M) {
	if v := os.Getenv(hogEnv); v != "" {
		mib, _ := strconv.Atoi(v)
		bufio.NewReader(os.Stdin).ReadString('\n')
		held := make([][]byte, 0, mib)
		for range mib {
			b := make([]byte, 1<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			held = append(held, b)
		}
		fmt.Println("holding", len(held))
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// hog starts a process in g that takes mib MiB once released.
type hog struct {
	cmd   *exec.Cmd
	start io.WriteCloser
	lines *bufio.Reader
	done  chan error
}

func startHog(t *testing.T, g *Group, mib int) *hog {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", hogEnv, mib))
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := g.AddProcess(cmd.Process.Pid); err != nil {
		cmd.Process.Kill()
		t.Fatal(err)
	}
	h := &hog{cmd: cmd, start: in, lines: bufio.NewReader(out), done: make(chan error, 1)}
	t.Cleanup(func() { cmd.Process.Kill(); <-h.done })
	// Wait closes the output pipe: a test reading it then sees the end.
	go func() { h.done <- cmd.Wait() }()
	return h
}

// The kernel kills in a sandbox's group either at the group's own limit
// or at its parent's (the machine's budget for every sandbox), and the
// group's oom_kill counter rises either way; OwnLimitReached tells them
// apart. Measured here: a group over its own 64 MiB, and two groups of
// 96 MiB each within a parent of 128 MiB that together take 140.
func TestOOMCauseOwnLimitOrParent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	m, err := New(fmt.Sprintf("scratchrun-cgtest-oom-%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer m.RemoveParent()
	if err := m.SetParentMemoryLimit(128 << 20); err != nil {
		t.Fatal(err)
	}
	destroy := func(g *Group) {
		g.KillAll()
		if err := g.Destroy(); err != nil {
			t.Error(err)
		}
	}

	own, err := m.Create("own", Limits{MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	h := startHog(t, own, 100)
	io.WriteString(h.start, "go\n")
	if err := <-h.done; err == nil {
		t.Fatal("a hog of 100 MiB in a 64 MiB group was not killed")
	}
	h.done <- nil // for the cleanup
	if own.OOMKills() == 0 || !own.OwnLimitReached() {
		t.Errorf("at its own limit: oom kills %d, own limit reached %v", own.OOMKills(), own.OwnLimitReached())
	}
	destroy(own)

	a, err := m.Create("a", Limits{MemoryBytes: 96 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer destroy(a)
	b, err := m.Create("b", Limits{MemoryBytes: 96 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer destroy(b)
	ha := startHog(t, a, 70)
	io.WriteString(ha.start, "go\n")
	if line, err := ha.lines.ReadString('\n'); err != nil {
		t.Fatalf("the first hog: %q %v", line, err)
	}
	if used := m.ParentMemoryInUse(); used < 70<<20 || used > 128<<20 {
		t.Errorf("the parent uses %d MiB with a hog of 70 MiB in it", used>>20)
	}
	hb := startHog(t, b, 70)
	io.WriteString(hb.start, "go\n")
	// One of the two is the kernel's victim, whichever it picks.
	var victim *Group
	select {
	case <-ha.done:
		victim = a
		ha.done <- nil
	case <-hb.done:
		victim = b
		hb.done <- nil
	case <-time.After(time.Minute):
		t.Fatal("140 MiB in a parent of 128 MiB: nobody was killed")
	}
	if victim.OOMKills() == 0 || victim.OwnLimitReached() {
		t.Errorf("killed for the parent: oom kills %d, own limit reached %v", victim.OOMKills(), victim.OwnLimitReached())
	}
}

// A group's CPU demand counts what its processes ran and waited to run: a
// process that spins has it, even beside three more spinning in other
// groups, and only in its own group.
func TestGroupCPUDemand(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	m, err := New(fmt.Sprintf("scratchrun-cgtest-cpu-%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer m.RemoveParent()
	busy, err := m.Create("busy", Limits{CPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	idle, err := m.Create("idle", Limits{CPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, g := range []*Group{busy, idle} {
			g.KillAll()
			if err := g.Destroy(); err != nil {
				t.Error(err)
			}
		}
	}()
	spin := func() *exec.Cmd {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	// Three more spinning outside, to crowd the CPUs.
	for range 3 * runtime.NumCPU() {
		spin()
	}
	if err := busy.AddProcess(spin().Process.Pid); err != nil {
		t.Fatal(err)
	}
	before, ok := busy.CPUDemand()
	if !ok {
		t.Skip("this kernel keeps no schedstat")
	}
	start := time.Now()
	time.Sleep(300 * time.Millisecond)
	demand, _ := busy.CPUDemand()
	if got, span := demand-before, time.Since(start); got < span/2 {
		t.Errorf("a spinning process among %d demanded %s of %s", 3*runtime.NumCPU()+1, got, span)
	}
	if none, ok := idle.CPUDemand(); none != 0 || !ok {
		t.Errorf("an empty group demanded %s (%v)", none, ok)
	}
}
