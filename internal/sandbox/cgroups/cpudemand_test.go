package cgroups

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// A runnable thread whose schedstat has not moved is waiting for a CPU:
// its wait counts from the reading that first saw the sum, and when it
// finally runs the kernel's own count takes over without going back.
func TestDemandMemoCountsAWaitStillGoingOn(t *testing.T) {
	var m demandMemo
	t0 := time.Unix(1000, 0)
	type task struct {
		sum      int64
		runnable bool
	}
	now := map[string]task{"1": {sum: 5e6, runnable: true}, "2": {sum: 7e6}}
	read := func(tid string) (int64, bool, bool) {
		s, ok := now[tid]
		return s.sum, s.runnable, ok
	}
	at := func(d time.Duration) time.Duration { return m.total([]string{"1", "2"}, t0.Add(d), read) }
	if got := at(0); got != 12*time.Millisecond {
		t.Fatalf("first reading: %s, want the sums (12ms)", got)
	}
	// Thread 1 starved for 300 ms, thread 2 asleep: only 1's wait counts.
	if got := at(300 * time.Millisecond); got != 312*time.Millisecond {
		t.Errorf("a starved runnable thread after 300ms: %s, want 312ms", got)
	}
	// It runs: the kernel adds its 310 ms wait and 2 ms run.
	now["1"] = task{sum: 5e6 + 310e6 + 2e6, runnable: true}
	got := at(320 * time.Millisecond)
	if got != 324*time.Millisecond {
		t.Errorf("after it ran: %s, want the kernel's 324ms", got)
	}
	if got < 312*time.Millisecond {
		t.Error("the demand went back when the estimate met the kernel's count")
	}
	// A sleeping thread whose sum does not move adds nothing.
	now["1"] = task{sum: now["1"].sum}
	if got := at(900 * time.Millisecond); got != 324*time.Millisecond {
		t.Errorf("both asleep: %s, want 324ms", got)
	}
	// A thread gone is forgotten.
	delete(now, "1")
	if got := at(time.Second); got != 7*time.Millisecond || len(m.seen) != 1 {
		t.Errorf("thread 1 gone: %s, %d remembered", got, len(m.seen))
	}
}

// A process starved of a CPU (in a group of the least CPU weight, on one
// CPU beside two spinning in a group of the most, which the scheduler
// lets run for a long time each) still demands the
// CPU in every window, although its schedstat does not move while it
// waits: admission would otherwise take a busy loop on a crowded machine
// for a call that waits by (two light readings in a row make it light).
func TestGroupCPUDemandOfAStarvedProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups and raise priorities")
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("no taskset")
	}
	m, err := New(fmt.Sprintf("scratchrun-cgtest-starved-%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	// Last of the cleanups: the groups below go first.
	t.Cleanup(func() {
		if err := m.RemoveParent(); err != nil {
			t.Error(err)
		}
		if left := m.Leftovers(); len(left) != 0 {
			t.Errorf("left behind: %v", left)
		}
	})
	group := func(name, weight string) *Group {
		g, err := m.Create(name, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			g.KillAll()
			if err := g.Destroy(); err != nil {
				t.Error(err)
			}
		})
		file := "cpu.shares" // v1: 2 to 262144
		if g.version == V2 {
			file, weight = "cpu.weight", map[string]string{"2": "1", "262144": "10000"}[weight]
		}
		if err := write(g.dir("cpu"), file, weight); err != nil {
			t.Skip("no CPU weights here: ", err)
		}
		return g
	}
	crowd, g := group("crowd", "262144"), group("starved", "2")
	// The crowd is stopped first: the starved one, killed, must get the
	// CPU to die.
	var spinners []*exec.Cmd
	t.Cleanup(func() {
		for _, cmd := range spinners {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	spin := func(in *Group) {
		cmd := exec.Command("taskset", "-c", "0", "sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		spinners = append(spinners, cmd)
		if err := in.AddProcess(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	spin(crowd)
	spin(crowd)
	spin(g)
	before, ok := g.CPUDemand()
	if !ok {
		t.Skip("this kernel keeps no schedstat")
	}
	const windows = 10
	light := 0
	for i := range windows {
		start := time.Now()
		time.Sleep(100 * time.Millisecond)
		demand, _ := g.CPUDemand()
		span := time.Since(start)
		if demand-before < span/2 {
			light++
			if light == 2 {
				t.Fatalf("window %d: a starved busy loop read light twice in a row (demanded %s of %s)", i, demand-before, span)
			}
		} else {
			light = 0
		}
		before = demand
	}
}
