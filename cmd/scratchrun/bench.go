//go:build linux

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/scratchrun/scratchrun/internal/bench"
	"github.com/scratchrun/scratchrun/internal/engine"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/settings"
)

func cmdBench(args []string) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	names := make([]string, 0, len(bench.Workloads))
	for n := range bench.Workloads {
		names = append(names, n)
	}
	sort.Strings(names)
	workload := fs.String("workload", "python-print", "what to run: "+strings.Join(names, "|"))
	n := fs.Int("n", 50, "runs per side")
	concurrency := fs.Int("concurrency", 1, "runs in flight at once")
	network := fs.String("network", "none", `"none" or "egress" (needs root; run it in a network namespace of its own to keep the host untouched)`)
	warmup := fs.Int("warmup", 3, "discarded runs per side before measuring")
	pool := fs.Bool("pool", true, "use the warm pool (false measures cold sandboxes)")
	builders := fs.Int("builders", 1, "warm sandboxes built at once (the pool's CPU budget)")
	interval := fs.Duration("interval", 0, "pause after each run, as an agent thinking between calls (lets the warm pool refill; not counted)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	idleMemory := fs.Bool("idle-memory", false, "instead of timing a workload, report the memory of idle warm sandboxes of every runtime next to each interpreter waiting bare")
	sweep := fs.String("sweep", "", "instead of timing a workload against bare, send bursts of this many calls at once (`LIST`, e.g. 1,100,200) through an engine with a server's defaults (admission, warm pool), and report successes, refusals, latency and memory")
	rounds := fs.Int("rounds", 2, "rounds of a workload against bare, sandbox and bare alternating (a machine whose speed drifts then slows both alike); bursts per concurrency of --sweep (the warm pool grows after the first); rounds of --create")
	pause := fs.Duration("pause", 15*time.Second, "pause between the bursts of --sweep (lets the warm pool refill)")
	session := fs.Bool("session", false, "instead of comparing with bare alone, measure a call in a warm session (one per concurrent caller) against the same code as a plain call and bare, and an idle session's memory (turns sessions on for this run)")
	create := fs.Int("create", 0, "instead of timing a workload, measure the CPU of creating and ending `N` waiting sandboxes (bash; python with its interpreter pre-started) and N python print(1) calls without a pool, against N bare processes in fresh namespaces (--rounds of each, interleaved)")
	clustered := fs.Bool("cluster", false, "instead of comparing with bare, measure what a cluster's hop adds: the same engine called directly and through a front end, NATS (--nats) and a worker in this process, alternately (--workload takes a list; default bash-echo,python-print)")
	cpuProfile := fs.String("cpuprofile", "", "write the engine's CPU profile over the whole run to `FILE` (go tool pprof)")
	var admissionLoad loadFlag
	fs.Var(&admissionLoad, "admission-load", "instead of timing a workload, measure admission alone (Acquire, Started and Release of the engine's controller, no sandbox) with no sandbox running, with N sleeping sandboxes running (--admission-load alone: 500; --admission-load=N), and with none again; --n is admissions per measurement, in thousands")
	set := withSettings(fs, "usage: scratchrun bench [--workload NAME] [--n N] [--cluster --nats URL] [flags]\n\nflags:\n", settings.Bench)
	if _, err := parseInterspersed(fs, args); err != nil {
		return flagExit(err)
	}
	v, err := set.Resolve(os.Getenv)
	var setup engineSetup
	if err == nil {
		setup, err = parseEngine(v, settings.Bench)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
		return exitUsage
	}
	if *network == execapi.NetworkEgress {
		setup = setup.withEgress(v)
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "scratchrun bench: --cpuprofile: %v\n", err)
			return exitUsage
		}
		defer stop()
	}
	nf := parseNATS(v)
	if *clustered {
		wls, err := clusterWorkloads(*workload, flagGiven(fs, "workload"))
		if err != nil {
			fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
			return exitUsage
		}
		if !nf.given() {
			fmt.Fprintln(os.Stderr, "scratchrun bench: --cluster needs --nats URL (a NATS server with JetStream, e.g. nats-server -js on loopback)")
			return exitUsage
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return benchCluster(ctx, clusterBenchOptions{workloads: wls, n: *n, warmup: *warmup, interval: *interval, network: *network, nats: nf, setup: setup, json: *asJSON})
	}
	if *create > 0 {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return benchCreate(ctx, createOptions{n: *create, rounds: *rounds, setup: setup, json: *asJSON})
	}
	if admissionLoad > 0 {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		count := 200_000
		if flagGiven(fs, "n") {
			count = *n * 1000
		}
		return benchAdmission(ctx, admissionBenchOptions{load: int(admissionLoad), runtime: "python3.13", count: count, rounds: 3, setup: setup, json: *asJSON})
	}
	if *idleMemory {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return benchIdleMemory(ctx, setup, *asJSON)
	}
	w, ok := bench.Workloads[*workload]
	if !ok {
		fmt.Fprintf(os.Stderr, "scratchrun bench: --workload %q: want one of %s\n", *workload, strings.Join(names, ", "))
		return exitUsage
	}
	if *network != execapi.NetworkNone && *network != execapi.NetworkEgress {
		fmt.Fprintf(os.Stderr, "scratchrun bench: --network %q: want none or egress\n", *network)
		return exitUsage
	}
	if *sweep != "" {
		levels, err := parseSweep(*sweep)
		if err != nil {
			fmt.Fprintf(os.Stderr, "scratchrun bench: --sweep: %v\n", err)
			return exitUsage
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return benchSweep(ctx, w, levels, sweepOptions{rounds: *rounds, pause: *pause, network: *network, pool: *pool, setup: setup, json: *asJSON})
	}
	if *session {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return benchSession(ctx, sessionBenchOptions{workload: w, pool: *pool, setup: setup, json: *asJSON,
			opts: bench.Options{N: *n, Concurrency: *concurrency, Network: *network, Warmup: *warmup, Interval: *interval}})
	}
	store, err := openStore(setup.dataDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
		return exitInternal
	}
	rt, err := store.Resolve(w.Runtime)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
		return exitInternal
	}
	pc := engine.PoolConfig{}
	if *pool {
		// Keep warm only what this workload uses, so building spares does not
		// compete with the measurement.
		pc = engine.PoolConfig{Floor: *concurrency, Max: *concurrency * 2, IdleAfter: time.Hour,
			Runtimes: []string{w.Runtime}, Networks: []string{*network}, Builders: *builders}
		if v := engine.WarmVariant(rt.Runtime, w.Code); v != "" {
			pc.Variants = []string{v}
		}
	}
	eng, err := setup.withPool(pc).open(newLogger(setup.debug))
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
		return exitInternal
	}
	defer eng.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *pool {
		eng.WaitWarm(ctx, 2*time.Minute)
	}
	r, err := bench.Run(ctx, eng, rt, w, bench.Options{N: *n, Concurrency: *concurrency, Network: *network, Warmup: *warmup, Interval: *interval, Rounds: *rounds})
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
		return exitInternal
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(r)
		return 0
	}
	fmt.Printf("workload %s  n=%d  concurrency=%d  network=%s  pool=%v  interval=%s  rounds=%d\n", r.Workload, r.N, r.Concurrency, r.Network, *pool, *interval, r.Rounds)
	fmt.Printf("%-8s %9s %9s %9s %12s %12s\n", "", "p50 ms", "p95 ms", "p99 ms", "runs/s", "cpu ms/run")
	for _, row := range []struct {
		name string
		s    bench.Stats
	}{{"sandbox", r.Sandbox}, {"bare", r.Bare}} {
		fmt.Printf("%-8s %9.1f %9.1f %9.1f %12.1f %12.1f\n", row.name, row.s.P50, row.s.P95, row.s.P99, row.s.Throughput, row.s.CPUPerRun)
	}
	fmt.Printf("ratio    p50 %.2fx   throughput %.2fx\n", r.RatioP50, r.RatioThroughput)
	return 0
}

// startCPUProfile profiles this process (the engine: its sandboxes'
// processes are not in it) into file until the returned stop.
func startCPUProfile(file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
