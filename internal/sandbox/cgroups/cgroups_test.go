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
