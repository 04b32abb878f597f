//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/scratchrun/scratchrun/internal/bench"
	"github.com/scratchrun/scratchrun/internal/engine"
)

// sweepOptions are `bench --sweep`'s settings.
type sweepOptions struct {
	rounds  int
	pause   time.Duration
	network string
	pool    bool
	setup   engineSetup
	json    bool
}

// parseSweep reads "1,100,200".
func parseSweep(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 10000 {
			return nil, fmt.Errorf("%q is not a concurrency between 1 and 10000", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// benchSweep sends bursts of w at each concurrency of levels through an
// engine set up as `scratchrun serve` sets its own (admission's defaults,
// the default warm pool), rounds times each, pausing between them.
func benchSweep(ctx context.Context, w bench.Workload, levels []int, o sweepOptions) int {
	pc := o.setup.engine.Pool
	if !o.pool {
		pc = engine.PoolConfig{}
	}
	eng, err := o.setup.withPool(pc).open(newLogger(o.setup.debug))
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
		return exitInternal
	}
	defer eng.Close()
	if o.pool {
		eng.WaitWarm(ctx, 2*time.Minute)
	}
	a := eng.Admission()
	if !o.json {
		fmt.Printf("workload %s  network=%s  pool=%v  %s\n", w.Name, o.network, o.pool, admissionText(a))
		fmt.Printf("%6s %5s %5s %-22s %5s %9s %9s %9s %9s %9s %9s %10s %10s %7s %s\n", "conc", "round", "ok", "refused", "fail",
			"p50 ms", "p95 ms", "max ms", "wait p95", "wall ms", "cpu/call", "peak MiB", "mach MiB", "m-kill", "load before")
	}
	var reports []bench.BurstReport
	for _, n := range levels {
		for round := 1; round <= o.rounds; round++ {
			if len(reports) > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(o.pause):
				}
			}
			r, err := bench.Burst(ctx, eng, w, bench.BurstOptions{Concurrency: n, Round: round, Network: o.network,
				SandboxMemory: func() int64 { return eng.Admission().MemoryUsedBytes }})
			if err != nil {
				if errors.Is(err, context.Canceled) {
					return exitInternal
				}
				fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
				return exitInternal
			}
			reports = append(reports, r)
			if !o.json {
				fmt.Printf("%6d %5d %5d %-22s %5d %9.0f %9.0f %9.0f %9.0f %9.0f %9.1f %10.1f %10.1f %7d %s\n", r.Concurrency, r.Round, r.Succeeded,
					refusedText(r.Refused, r.RetryAfterMax), r.Failed, r.P50, r.P95, r.Max, r.WaitP95, r.WallMS, r.CPUPerCall, r.PeakMemoryMiB,
					r.MachineMemoryMiB, r.MachineMemoryKills, r.LoadAverage)
				if r.FirstError != "" {
					fmt.Printf("       first failure: %s\n", r.FirstError)
				}
			}
		}
	}
	if o.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(map[string]any{"admission": eng.Admission(), "bursts": reports})
	}
	return 0
}

// refusedText is "12 cpu (Retry-After ≤ 3 s)", or "-".
func refusedText(refused map[string]int, retryMax float64) string {
	if len(refused) == 0 {
		return "-"
	}
	var parts []string
	for reason, n := range refused {
		parts = append(parts, fmt.Sprintf("%d %s", n, reason))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%s (RA<=%.0fs)", strings.Join(parts, ","), retryMax)
}
