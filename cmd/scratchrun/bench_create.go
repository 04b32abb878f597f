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

// createOptions are `bench --create`'s.
type createOptions struct {
	n, rounds int
	setup     engineSetup
	json      bool
}

// benchCreate measures the CPU of creating and ending N waiting sandboxes
// (bash, no interpreter; python, its interpreter pre-started as the warm
// pool builds one) and of N whole python print(1) calls without a pool,
// against N bare processes in fresh namespaces, all in one run. CPU is
// what the engine, the spawner and the sandboxes were charged (one
// accounting cgroup holds them all) plus the kernel's threads: other load
// on the machine changes the machine column, hardly these.
func benchCreate(ctx context.Context, o createOptions) int {
	acct, err := bench.JoinProcessAccount(o.setup.backend.cgroupParent)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
		return exitInternal
	}
	defer func() {
		if err := acct.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
		}
	}()
	// It measures what a call costs, not whether the machine has room for
	// one: other load must not refuse its calls.
	o.setup.engine.Admission.CPUThreshold = 0
	eng, err := o.setup.withPool(engine.PoolConfig{}).open(newLogger(o.setup.debug))
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
		return exitInternal
	}
	defer eng.Close()
	w := bench.Workloads["python-print"]
	// kept makes a creator of sandboxes that wait unused until ended.
	kept := func(create func(context.Context) (*engine.IdleSandbox, error)) bench.Creator {
		return func(ctx context.Context) (func() error, error) {
			s, err := create(ctx)
			if err != nil {
				return nil, err
			}
			return func() error {
				if t := s.Destroy(); !t.Purged {
					return fmt.Errorf("teardown of %s: %v", s.ID(), t.Err)
				}
				return nil
			}, nil
		}
	}
	idle := func(runtime string, warm bool) bench.Creator {
		return kept(func(ctx context.Context) (*engine.IdleSandbox, error) { return eng.CreateIdle(ctx, runtime, warm) })
	}
	fromZygote := kept(func(ctx context.Context) (*engine.IdleSandbox, error) { return eng.CreateIdleZygote(ctx, w.Runtime) })
	call := func(ctx context.Context) (func() error, error) {
		res, err := eng.Exec(ctx, execapi.Request{Runtime: w.Runtime, Code: w.Code, Network: execapi.NetworkNone}, nil)
		if err != nil {
			return nil, err
		}
		if res.ExitCode != 0 {
			return nil, fmt.Errorf("%s exited %d: %s", w.Name, res.ExitCode, res.Stderr)
		}
		return func() error { return nil }, nil
	}
	kinds := []bench.CreateKind{
		{Name: "unshare (baseline)", Create: bench.BareNamespaces, Baseline: true},
		{Name: "bash sandbox", Create: idle("bash", false)},
		{Name: "python warm sandbox", Create: idle(w.Runtime, true)},
		{Name: "python print(1) call", Create: call},
	}
	if o.setup.engine.Zygote {
		kinds = append(kinds, bench.CreateKind{Name: "python zygote fork", Create: fromZygote})
	}
	// One of each first, discarded: the page cache, the images' views.
	for _, k := range kinds {
		end, err := k.Create(ctx)
		if err == nil {
			err = end()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "scratchrun bench: %s: %v\n", k.Name, err)
			return exitInternal
		}
	}
	r, err := bench.MeasureCreate(ctx, acct, kinds, bench.CreateOptions{N: o.n, Rounds: o.rounds, Settle: time.Second})
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
	fmt.Printf("CPU per thing, ms: %d created and kept waiting, then ended; median of %d rounds; load before: %s\n", r.N, r.Rounds, r.Load)
	fmt.Println("(total = create + end; of it: kernel threads, the engine, the spawner helper; machine: all busy time, other load included)")
	fmt.Printf("%-22s %7s %7s %7s %7s %7s %7s %8s %7s\n", "", "create", "end", "total", "kthr", "engine", "spawner", "machine", "ratio")
	for _, row := range r.Rows {
		fmt.Printf("%-22s %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %8.1f %6.2fx\n", row.Name, row.Create, row.End, row.Total, row.KernelThreads, row.Engine, row.Spawner, row.Machine, row.Ratio)
	}
	return 0
}
