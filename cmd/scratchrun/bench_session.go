//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/scratchrun/scratchrun/internal/bench"
	"github.com/scratchrun/scratchrun/internal/engine"
	"github.com/scratchrun/scratchrun/internal/execapi"
)

// sessionBenchOptions are `scratchrun bench --session`'s.
type sessionBenchOptions struct {
	workload bench.Workload
	opts     bench.Options
	pool     bool
	setup    engineSetup
	json     bool
}

// benchSession measures a call in a warm session against the same code as
// a plain call and bare, in one engine, and an idle session's memory.
// --session turns sessions on for this engine whatever --sessions says:
// asking for the measurement is asking for sessions.
func benchSession(ctx context.Context, o sessionBenchOptions) int {
	if !o.setup.engine.Sessions.Policy.Enabled {
		p := execapi.DefaultSessionPolicy()
		p.Enabled = true
		o.setup.engine.Sessions.Policy = p
	}
	store, err := openStore(o.setup.dataDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
		return exitInternal
	}
	rt, err := store.Resolve(o.workload.Runtime)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
		return exitInternal
	}
	setup := o.setup
	if o.pool {
		// The plain calls get a warm pool as a server's would; the
		// sessions keep their own sandboxes.
		pc := engine.PoolConfig{Floor: o.opts.Concurrency, Max: o.opts.Concurrency * 2, IdleAfter: time.Hour,
			Runtimes: []string{o.workload.Runtime}, Networks: []string{o.opts.Network}, Builders: 1}
		if v := engine.WarmVariant(rt.Runtime, o.workload.Code); v != "" {
			pc.Variants = []string{v}
		}
		setup = setup.withPool(pc)
	}
	eng, err := setup.open(newLogger(setup.debug))
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
		return exitInternal
	}
	defer eng.Close()
	if o.pool {
		eng.WaitWarm(ctx, 2*time.Minute)
	}
	r, err := bench.RunSession(ctx, eng, rt, o.workload, o.opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
		return exitInternal
	}
	if o.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(r)
		return 0
	}
	fmt.Printf("workload %s  n=%d  concurrency=%d  network=%s  pool=%v  interval=%dms  (session: one per concurrent caller)\n",
		r.Workload, r.N, r.Concurrency, r.Network, o.pool, r.IntervalMS)
	fmt.Printf("%-8s %9s %9s %9s %12s %12s\n", "", "p50 ms", "p95 ms", "p99 ms", "runs/s", "cpu ms/run")
	for _, row := range []struct {
		name string
		s    bench.Stats
	}{{"exec", r.Exec}, {"session", r.Session}, {"bare", r.Bare}} {
		fmt.Printf("%-8s %9.1f %9.1f %9.1f %12.1f %12.1f\n", row.name, row.s.P50, row.s.P95, row.s.P99, row.s.Throughput, row.s.CPUPerRun)
	}
	fmt.Printf("ratio    session/exec p50 %.2fx   session/bare p50 %.2fx   session/exec throughput %.2fx\n",
		r.RatioSessionToExecP50, r.RatioSessionToBareP50, r.RatioSessionToExecThroughput)
	fmt.Printf("idle     session %.1f MiB   bare interpreter %.1f MiB   ratio %.2fx\n",
		float64(r.IdleSessionBytes)/(1<<20), float64(r.BareIdleBytes)/(1<<20), r.RatioIdleMemory)
	return 0
}
