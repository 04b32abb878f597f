//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/scratchrun/scratchrun/internal/bench"
	"github.com/scratchrun/scratchrun/internal/buildinfo"
	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/cluster/frontend"
	"github.com/scratchrun/scratchrun/internal/cluster/worker"
	"github.com/scratchrun/scratchrun/internal/engine"
	"github.com/scratchrun/scratchrun/internal/execapi"
)

// clusterBenchOptions are `bench --cluster`'s settings.
type clusterBenchOptions struct {
	workloads []bench.Workload
	n, warmup int
	interval  time.Duration
	network   string
	nats      natsSetup
	setup     engineSetup
	json      bool
}

// benchCluster measures what the cluster's hop adds: one engine, with a
// warm pool, served by a worker in this process over the NATS servers
// given, and called both directly and through a front end (also in this
// process) that places every call on that worker, alternately, one call
// at a time, for each workload.
func benchCluster(ctx context.Context, o clusterBenchOptions) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
		return exitInternal
	}
	log := newLogger(o.setup.debug)
	connOpts, err := o.nats.options("scratchrun bench", log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
		return exitUsage
	}
	store, err := openStore(o.setup.dataDir)
	if err != nil {
		return fail(err)
	}
	pc := engine.PoolConfig{Floor: 1, Max: 2, IdleAfter: time.Hour, Networks: []string{o.network}, Builders: 1}
	for _, w := range o.workloads {
		rt, err := store.Resolve(w.Runtime)
		if err != nil {
			return fail(err)
		}
		pc.Runtimes = append(pc.Runtimes, w.Runtime)
		if v := engine.WarmVariant(rt.Runtime, w.Code); v != "" {
			pc.Variants = append(pc.Variants, v)
		}
	}
	eng, err := o.setup.withPool(pc).open(log)
	if err != nil {
		return fail(err)
	}
	defer eng.Close()
	eng.WaitWarm(ctx, 2*time.Minute)

	id := fmt.Sprintf("bench-%s-%d", hostWorkerID(), os.Getpid())
	if len(id) > 63 {
		id = id[len(id)-63:]
	}
	workerConn, err := cluster.Connect(withName(connOpts, "scratchrun bench worker"))
	if err != nil {
		return fail(err)
	}
	defer workerConn.Close()
	w, err := worker.Start(worker.Config{ID: id, Conn: workerConn, Engine: eng, Runtimes: pc.Runtimes, Version: buildinfo.Get().Version, Logger: log})
	if err != nil {
		return fail(err)
	}
	defer w.Close()
	feConn, err := cluster.Connect(withName(connOpts, "scratchrun bench front end"))
	if err != nil {
		return fail(err)
	}
	defer feConn.Close()
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	fe, err := frontend.New(startCtx, frontend.Config{Conn: feConn, Policy: eng.Policy(), Only: []string{id}, Logger: log})
	if err != nil {
		return fail(err)
	}
	defer fe.Close()
	for len(fe.Workers()) == 0 {
		select {
		case <-startCtx.Done():
			return fail(fmt.Errorf("the front end never saw the bench's worker in the registry"))
		case <-time.After(20 * time.Millisecond):
		}
	}
	var reports []bench.HopReport
	for _, wl := range o.workloads {
		r, err := bench.Hop(ctx, eng, fe, wl, bench.Options{N: o.n, Warmup: o.warmup, Interval: o.interval, Network: o.network})
		if err != nil {
			return fail(err)
		}
		reports = append(reports, r)
	}
	if o.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(reports)
		return 0
	}
	fmt.Printf("cluster hop (front end -> NATS at %s -> worker, same machine)  n=%d per side  interval=%s\n", feConn.ConnectedUrlRedacted(), o.n, o.interval)
	fmt.Printf("%-14s %10s %10s %12s %12s %11s %11s %12s\n", "workload", "local p50", "local p99", "cluster p50", "cluster p99", "added p50", "added p99", "paired p50")
	for _, r := range reports {
		fmt.Printf("%-14s %10.2f %10.2f %12.2f %12.2f %11.2f %11.2f %12.2f\n", r.Workload, r.Local.P50, r.Local.P99, r.Cluster.P50, r.Cluster.P99,
			r.AddedP50, r.AddedP99, r.PairedP50)
	}
	fmt.Println("(ms; added = cluster less local; paired = median of each pair's difference)")
	return 0
}

func withName(o cluster.ConnOptions, name string) cluster.ConnOptions {
	o.Name = name
	return o
}

// clusterWorkloads reads --workload for --cluster: a comma-separated list
// (default bash-echo and python-print).
func clusterWorkloads(given string, set bool) ([]bench.Workload, error) {
	if !set {
		given = "bash-echo,python-print"
	}
	var out []bench.Workload
	for _, name := range strings.Split(given, ",") {
		w, ok := bench.Workloads[strings.TrimSpace(name)]
		if !ok {
			return nil, fmt.Errorf("--workload %q: no such workload", name)
		}
		out = append(out, w)
	}
	return out, nil
}

var _ execapi.Executor = (*frontend.Frontend)(nil)
