package cgroups

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// A group gets its limits, holds a process, and is removed without a trace.
func TestGroupLifecycle(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	parent := fmt.Sprintf("scratchrun-cgtest-%d", os.Getpid())
	m, err := New(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer m.RemoveParent()
	g, err := m.Create("g1", Limits{MemoryBytes: 64 << 20, MaxPids: 17, CPUs: 0.5, Background: true})
	if err != nil {
		t.Fatal(err)
	}
	read := func(controller, v1file, v2file string) string {
		file := v1file
		if m.Version() == V2 {
			file = v2file
		}
		data, err := os.ReadFile(g.dir(controller) + "/" + file)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	if got := read("memory", "memory.limit_in_bytes", "memory.max"); got != fmt.Sprintf("%d\n", 64<<20) {
		t.Errorf("memory limit %q", got)
	}
	if got := read("pids", "pids.max", "pids.max"); got != "17\n" {
		t.Errorf("pids.max %q", got)
	}
	// Built in the background: a tenth of the normal weight, until its job.
	if got := read("cpu", "cpu.shares", "cpu.weight"); got != map[Version]string{V1: "102\n", V2: "10\n"}[m.Version()] {
		t.Errorf("background CPU weight %q", got)
	}
	if err := g.SetBackground(false); err != nil {
		t.Fatal(err)
	}
	if got := read("cpu", "cpu.shares", "cpu.weight"); got != map[Version]string{V1: "1024\n", V2: "100\n"}[m.Version()] {
		t.Errorf("normal CPU weight %q", got)
	}
	if err := g.SetMemory(32 << 20); err != nil {
		t.Errorf("lowering memory: %v", err)
	}
	if err := g.SetMemory(128 << 20); err != nil {
		t.Errorf("raising memory: %v", err)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := g.AddProcess(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if procs := g.Procs(); len(procs) != 1 || procs[0] != cmd.Process.Pid {
		t.Errorf("procs %v, want [%d]", procs, cmd.Process.Pid)
	}
	if err := g.Destroy(); err == nil {
		t.Error("Destroy of a group with a live process succeeded")
	}
	go cmd.Wait()
	if !g.KillAll() {
		t.Fatal("KillAll left processes")
	}
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
	if left := m.Leftovers(); len(left) != 0 {
		t.Errorf("leftovers %v", left)
	}
	if g.OOMKills() != 0 {
		t.Error("OOM kills on a removed group")
	}
}

// Sweep-style removal of a group another engine left behind.
func TestSweepOneKillsAndRemoves(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	m, err := New(fmt.Sprintf("scratchrun-cgtest-%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer m.RemoveParent()
	g, err := m.Create("orphan", Limits{MaxPids: 10})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	cmd.Start()
	go cmd.Wait()
	g.AddProcess(cmd.Process.Pid)
	if n, err := m.SweepOne("orphan"); n != 1 || err != nil {
		t.Fatalf("SweepOne = %d, %v", n, err)
	}
	if left := m.Leftovers(); len(left) != 0 {
		t.Errorf("leftovers %v", left)
	}
}

// Two engines share one parent: the one that closes while the other still
// has a group leaves the parent to it at once, without an error (it used to
// retry removing it for a second per controller and then fail with EBUSY),
// and the other engine goes on creating groups there.
func TestRemoveParentLeavesAnotherEnginesGroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	parent := fmt.Sprintf("scratchrun-cgtest-shared-%d", os.Getpid())
	first, err := New(parent)
	if err != nil {
		t.Fatal(err)
	}
	second, err := New(parent)
	if err != nil {
		t.Fatal(err)
	}
	held, err := first.Create("e1_1_1", Limits{MaxPids: 8})
	if err != nil {
		t.Fatal(err)
	}
	g, err := second.Create("e2_1_1", Limits{MaxPids: 8})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := second.RemoveParent(); err != nil {
		t.Errorf("closing beside another engine's group: %v", err)
	}
	for _, dir := range first.Parents() {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("the shared parent went: %v", err)
		}
	}
	if left := first.Leftovers(); len(left) != len(first.Parents()) {
		t.Errorf("the first engine's group is not intact: %v", left)
	}
	again, err := first.Create("e1_1_2", Limits{MaxPids: 8})
	if err != nil {
		t.Fatalf("the first engine cannot create groups after the second closed: %v", err)
	}
	for _, x := range []*Group{again, held} {
		if err := x.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	if err := first.RemoveParent(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range first.Parents() {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the last engine out left %s (%v)", dir, err)
		}
	}
}

// While an engine is creating a group (it holds the parent's lock), no
// engine removes the parent under it; and a parent removed while an engine
// waited for the lock is re-created for it.
func TestParentLockKeepsCreatorsSafe(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	parent := fmt.Sprintf("scratchrun-cgtest-lock-%d", os.Getpid())
	m, err := New(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer m.RemoveParent()
	dir := m.Parents()[0]
	lock, err := m.lockParent(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.RemoveParent(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the parent was removed under a creator's lock: %v", err)
	}
	lock.Close()
	if err := m.RemoveParent(); err != nil {
		t.Fatal(err)
	}
	for _, d := range m.Parents() {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("unused parent %s not removed: %v", d, err)
		}
	}
	g, err := m.Create("after-removal", Limits{MaxPids: 8, MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatalf("create after the parent was removed: %v", err)
	}
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
}
