package main

import (
	"os"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/admission"
	"github.com/scratchrun/scratchrun/internal/settings"
)

// serve's --capacity reaches the engine's configuration as a value: it wins
// over SCRATCHRUN_MAX_CONCURRENT and leaves the environment as it was (serve
// used to set the variable for the engine to read back).
func TestCapacityFlagIsAValue(t *testing.T) {
	t.Setenv("SCRATCHRUN_MAX_CONCURRENT", "3")
	cfg, err := engineFor(settings.Serve, "--capacity", "1")
	if err != nil || cfg.Admission.Capacity != 1 {
		t.Errorf("with --capacity 1: %d, %v", cfg.Admission.Capacity, err)
	}
	if v := os.Getenv("SCRATCHRUN_MAX_CONCURRENT"); v != "3" {
		t.Errorf("SCRATCHRUN_MAX_CONCURRENT is %q now", v)
	}
	if cfg, err := engineFor(settings.Serve); err != nil || cfg.Admission.Capacity != 3 {
		t.Errorf("without the flag: %d, %v", cfg.Admission.Capacity, err)
	}
}

// Admission's settings come from the environment too (for mcp, which has
// no flags for them), each bad value refused naming its variable, and the
// servers' defaults apply otherwise.
func TestAdmissionEnvironment(t *testing.T) {
	t.Setenv("SCRATCHRUN_CPU_THRESHOLD", "") // TestMain's
	cfg, err := engineFor(settings.MCP)
	if err != nil || cfg.Admission.MemoryBudget <= 0 || cfg.Admission.CPUThreshold != admission.DefaultCPUThreshold ||
		cfg.Admission.QueueWait != admission.DefaultQueueWait || cfg.Admission.MaxQueue != admission.DefaultMaxQueue {
		t.Errorf("defaults: %+v %v", cfg.Admission, err)
	}
	t.Setenv("SCRATCHRUN_MEMORY_BUDGET_MB", "0")
	t.Setenv("SCRATCHRUN_CPU_THRESHOLD", "0.3")
	t.Setenv("SCRATCHRUN_QUEUE_WAIT", "0")
	t.Setenv("SCRATCHRUN_QUEUE", "5")
	t.Setenv("SCRATCHRUN_CALL_FLOOR_MB", "8")
	cfg, err = engineFor(settings.MCP)
	if err != nil || cfg.Admission.MemoryBudget != 0 || cfg.Admission.CPUThreshold != 0.3 || cfg.Admission.QueueWait >= 0 ||
		cfg.Admission.MaxQueue != 5 || cfg.Admission.CallFloor != 8<<20 {
		t.Errorf("from the environment: %+v %v", cfg.Admission, err)
	}
	cfg, _ = engineFor(settings.Serve, "--memory-budget", "1GiB", "--cpu-threshold", "0")
	if cfg.Admission.MemoryBudget != 1<<30 || cfg.Admission.CPUThreshold != 0 {
		t.Errorf("flags over the environment: %+v", cfg.Admission)
	}
	for name, bad := range map[string]string{"SCRATCHRUN_MEMORY_BUDGET_MB": "lots", "SCRATCHRUN_CPU_THRESHOLD": "1.5", "SCRATCHRUN_QUEUE_WAIT": "-1s"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, bad)
			if _, err := engineFor(settings.MCP); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%s: %v", name, bad, err)
			}
		})
	}
}
