package main

import (
	"os"
	"testing"
)

// serve's --capacity reaches the engine's configuration as a value: it wins
// over SCRATCHRUN_MAX_CONCURRENT and leaves the environment as it was (serve
// used to set the variable for the engine to read back).
func TestCapacityFlagIsAValue(t *testing.T) {
	t.Setenv("SCRATCHRUN_MAX_CONCURRENT", "3")
	cfg, err := engineConfig(newLogger(), engineOverrides{capacity: 1})
	if err != nil || cfg.Admission.Capacity != 1 {
		t.Errorf("with --capacity 1: %d, %v", cfg.Admission.Capacity, err)
	}
	if v := os.Getenv("SCRATCHRUN_MAX_CONCURRENT"); v != "3" {
		t.Errorf("SCRATCHRUN_MAX_CONCURRENT is %q now", v)
	}
	if cfg, err := engineConfig(newLogger(), engineOverrides{}); err != nil || cfg.Admission.Capacity != 3 {
		t.Errorf("without the flag: %d, %v", cfg.Admission.Capacity, err)
	}
}
