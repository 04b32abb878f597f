package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/scratchrun/scratchrun/internal/admission"
)

// engineFlags are the flags that size a local engine's admission, the
// same for `serve` and `worker` (a worker is the engine a cluster's front
// end has not).
type engineFlags struct {
	capacity     *int
	memoryBudget *string
	cpuThreshold *float64
}

// The names of the flags addEngineFlags defines, which serve's
// engineOnlyFlags lists too: one spelling, so the two cannot drift apart.
const (
	capacityFlag     = "capacity"
	memoryBudgetFlag = "memory-budget"
	cpuThresholdFlag = "cpu-threshold"
)

// addEngineFlags defines --capacity, --memory-budget and --cpu-threshold.
func addEngineFlags(fs *flag.FlagSet) engineFlags {
	return engineFlags{
		capacity:     fs.Int(capacityFlag, 0, fmt.Sprintf("at most this many sandboxes at once, whatever the machine has room for (env SCRATCHRUN_MAX_CONCURRENT; default %d, a safety bound)", admission.HardCapacity)),
		memoryBudget: fs.String(memoryBudgetFlag, "", "memory all sandboxes may use together (`SIZE`, e.g. 16GiB; 0: no budget; env SCRATCHRUN_MEMORY_BUDGET_MB; default: the machine's memory less the larger of 1 GiB and a tenth)"),
		cpuThreshold: fs.Float64(cpuThresholdFlag, admission.DefaultCPUThreshold, "CPU pressure (the share of time some task waits for a CPU, 0 to 1) at which no more sandboxes start (env SCRATCHRUN_CPU_THRESHOLD; 0: no CPU condition)"),
	}
}

// overrides checks the flags once fs is parsed and turns them into the
// engine's overrides; only flags given on the command line override
// (the environment and the machine's defaults stand for the others).
// The error names the flag.
func (e engineFlags) overrides(fs *flag.FlagSet) (engineOverrides, error) {
	o := engineOverrides{capacity: *e.capacity}
	if *e.capacity < 0 {
		return o, errors.New("--capacity must not be negative")
	}
	if flagGiven(fs, cpuThresholdFlag) {
		o.cpuThreshold = e.cpuThreshold
	}
	if o.cpuThreshold != nil && (*e.cpuThreshold < 0 || *e.cpuThreshold > 1) {
		return o, errors.New("--cpu-threshold: want a share of time between 0 and 1, e.g. 0.8 (0: no CPU condition)")
	}
	if *e.memoryBudget != "" {
		n := int64(0)
		if *e.memoryBudget != "0" {
			var err error
			if n, err = parseSize(*e.memoryBudget); err != nil {
				return o, errors.New("--memory-budget: " + err.Error())
			}
		}
		o.memoryBudget = &n
	}
	return o, nil
}
