//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/scratchrun/scratchrun/internal/bench"
	"github.com/scratchrun/scratchrun/internal/engine"
)

// admissionBenchOptions are `bench --admission-load`'s settings.
type admissionBenchOptions struct {
	load    int    // sleeping sandboxes held for the loaded measurement
	runtime string // what they run
	count   int    // admissions per measurement
	rounds  int    // measurements per phase (the median is reported)
	setup   engineSetup
	json    bool
}

// admissionBenchReport is what `bench --admission-load --json` prints.
type admissionBenchReport struct {
	Idle   []bench.AdmissionRate `json:"idle"`
	Loaded []bench.AdmissionRate `json:"loaded"`
	After  []bench.AdmissionRate `json:"after"`
	// Ratio is the loaded median rate over the idle one, RatioAfter the
	// one after the sandboxes ended over the idle one.
	Ratio      float64 `json:"ratio_loaded_idle"`
	RatioAfter float64 `json:"ratio_after_idle"`
}

// sleeperTimeout is the sleeping calls' limit: longer than any run of the
// benchmark (they are cancelled when it ends).
const sleeperTimeout = time.Hour

// benchAdmission measures the rate of admission alone (Acquire, Started and Release
// of the engine's own controller, no sandbox) with nothing running, with
// o.load real sandboxes sleeping, and with nothing running again, in one
// engine: what the controller's bookkeeping of running calls costs each
// new one.
func benchAdmission(ctx context.Context, o admissionBenchOptions) int {
	s := o.setup
	// The sleepers arrive at once and wait as long as admission's steps
	// take; their calls outlast the measurement.
	s.engine.Admission.MaxQueue = max(s.engine.Admission.MaxQueue, o.load+16)
	s.engine.Admission.QueueWait = 0
	s.engine.Policy.MaxTimeout = max(s.engine.Policy.MaxTimeout, sleeperTimeout)
	eng, err := s.withPool(engine.PoolConfig{}).open(newLogger(s.debug))
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
		return exitInternal
	}
	defer eng.Close()
	c := eng.AdmissionController()
	// No more callers than may be starting at once: beyond that the
	// measurement would be of the queue's hand-offs, and the allowance
	// differs before and after sandboxes have settled.
	goroutines := min(4, c.Settings().MinStarting)
	if !o.json {
		fmt.Printf("admission alone: %d Acquire+Started+Release per measurement from %d goroutines, %d measurements per phase (median), %d sleeping %s sandboxes for the loaded phase\n%s\n",
			o.count, goroutines, o.rounds, o.load, o.runtime, admissionText(eng.Admission()))
		fmt.Printf("%-8s %8s %12s %14s %8s  %s\n", "phase", "running", "per second", "cpu µs/call", "refused", "load")
	}
	measure := func(phase string) ([]bench.AdmissionRate, bool) {
		var out []bench.AdmissionRate
		for range o.rounds {
			r, err := bench.MeasureAdmission(ctx, c, o.count, goroutines)
			if err != nil {
				fmt.Fprintf(os.Stderr, "scratchrun bench: %s: %v\n", phase, err)
				return nil, false
			}
			out = append(out, r)
			if !o.json {
				fmt.Printf("%-8s %8d %12.0f %14.2f %8d  %s\n", phase, r.Running, r.PerSecond, r.CPUPerCallUS, r.Refused, r.LoadAverage)
			}
		}
		return out, true
	}
	var rep admissionBenchReport
	var ok bool
	if rep.Idle, ok = measure("idle"); !ok {
		return exitInternal
	}
	start := time.Now()
	sleepers, err := bench.HoldSleepers(ctx, eng, o.runtime, o.load, sleeperTimeout, func() (int, int) {
		a := eng.Admission()
		return a.Running, a.Starting + a.Waiting
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun bench: holding %d sleeping sandboxes: %v\n", o.load, err)
		return exitInternal
	}
	if !o.json {
		fmt.Printf("(%d sleeping sandboxes admitted and settled in %.1f s)\n", o.load, time.Since(start).Seconds())
	}
	rep.Loaded, ok = measure("loaded")
	if err := sleepers.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun bench: sleeping calls: %v\n", err)
		return exitInternal
	}
	if !ok {
		return exitInternal
	}
	if rep.After, ok = measure("after"); !ok {
		return exitInternal
	}
	rep.Ratio = medianRate(rep.Loaded) / medianRate(rep.Idle)
	rep.RatioAfter = medianRate(rep.After) / medianRate(rep.Idle)
	if o.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
		return 0
	}
	fmt.Printf("median per second: idle %.0f, loaded %.0f, after %.0f;  ratio loaded/idle %.2fx, after/idle %.2fx\n",
		medianRate(rep.Idle), medianRate(rep.Loaded), medianRate(rep.After), rep.Ratio, rep.RatioAfter)
	return 0
}

// medianRate is the median of rs' rates.
func medianRate(rs []bench.AdmissionRate) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = r.PerSecond
	}
	sort.Float64s(v)
	if len(v) == 0 {
		return 0
	}
	return v[len(v)/2]
}

// defaultAdmissionLoad is --admission-load's N when the flag is given alone.
const defaultAdmissionLoad = 500

// loadFlag is --admission-load: alone it means defaultAdmissionLoad, as
// --admission-load=N it means N (0: off).
type loadFlag int

func (f *loadFlag) String() string { return fmt.Sprint(int(*f)) }

// IsBoolFlag lets the flag stand alone.
func (f *loadFlag) IsBoolFlag() bool { return true }

func (f *loadFlag) Set(v string) error {
	if v == "true" {
		*f = defaultAdmissionLoad
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 1000 {
		return fmt.Errorf("%q is not a number of sandboxes between 0 and 1000", v)
	}
	*f = loadFlag(n)
	return nil
}
