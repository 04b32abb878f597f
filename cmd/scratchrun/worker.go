package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/cluster/worker"
	"github.com/scratchrun/scratchrun/internal/httpapi"
)

// workerDrainAllowance is what a worker's drain waits beyond the longest
// run: a sandbox's set-up and teardown, and its result's delivery.
const workerDrainAllowance = 15 * time.Second

// cmdWorker serves a cluster's calls with the local engine until SIGTERM
// or SIGINT, then drains: it leaves the registry, refuses new calls (front
// ends place them elsewhere), finishes the runs in flight and delivers
// their results, and exits 0 with no sandbox left. A second signal cancels
// the runs still going.
func cmdWorker(args []string) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	nf := addNATSFlags(fs, "the NATS servers of the cluster")
	id := fs.String("id", "", "the worker's `ID` in the cluster: letters, digits, '-' and '_' (env SCRATCHRUN_WORKER_ID; default the NATS user, else the host name, with other characters made '-')")
	runtimes := fs.String("runtimes", "", "offer only these runtimes (`LIST`, comma-separated; env SCRATCHRUN_WORKER_RUNTIMES; default every installed one)")
	engineFlags := addEngineFlags(fs)
	healthAddr := fs.String("health-addr", "", "serve /healthz and /readyz on `HOST:PORT` for probes (env SCRATCHRUN_HEALTH_ADDR; off by default)")
	addOperatorFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: scratchrun worker --nats URL[,URL...] [--id ID] [--runtimes LIST] [flags]

Runs the local engine (warm pool, admission, the isolation level chosen) and
serves the calls a cluster's front ends (scratchrun serve --nats) place on
it. It publishes itself to the registry of live workers every second and
refuses at once what its admission has no room for. SIGTERM: leave the
registry, finish the runs in flight, exit.

flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parseFlagsOnly(fs, args, workerUsageError); !ok {
		return code
	}
	if !nf.given() {
		return workerUsageError("--nats (or SCRATCHRUN_NATS) is required: the NATS servers of the cluster")
	}
	log := newLogger()
	connOpts, err := nf.options("", log)
	if err != nil {
		return workerUsageError(err.Error())
	}
	workerID := firstNonEmpty(*id, os.Getenv("SCRATCHRUN_WORKER_ID"), asWorkerID(connOpts.User), hostWorkerID())
	if err := cluster.ValidateWorkerID(workerID); err != nil {
		return workerUsageError("--id: " + err.Error())
	}
	offered := splitList(firstNonEmpty(*runtimes, os.Getenv("SCRATCHRUN_WORKER_RUNTIMES")))
	overrides, err := engineFlags.overrides(fs)
	if err != nil {
		return workerUsageError(err.Error())
	}
	// A worker refuses at once what it has no room for: the front ends
	// wait (their queue wait), trying other workers meanwhile.
	noWait := time.Duration(0)
	overrides.queueWait = &noWait
	images, err := openStore()
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun worker: %v\n", err)
		return exitInternal
	}
	for _, rt := range offered {
		if _, err := images.Resolve(rt); err != nil {
			return workerUsageError("--runtimes: " + err.Error())
		}
	}

	connOpts.Name = "scratchrun worker " + workerID
	nc, err := cluster.Connect(connOpts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun worker: %v\n", err)
		return exitInternal
	}
	defer nc.Close()
	pool, err := poolConfig()
	if err != nil {
		return workerUsageError(err.Error())
	}
	pool.Runtimes = offered
	eng, err := newEngineWithPool(log, overrides, pool)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun worker: %v\n", err)
		return exitInternal
	}
	closeEngine := func() {
		if err := eng.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "scratchrun worker: release the engine: %v\n", err)
		}
	}
	w, err := worker.Start(worker.Config{ID: workerID, Conn: nc, Engine: eng, Runtimes: offered, Aliases: images.Aliases,
		Version: version, Logger: log})
	if err != nil {
		closeEngine()
		fmt.Fprintf(os.Stderr, "scratchrun worker: %v\n", err)
		return exitInternal
	}
	var draining atomic.Bool
	if addr := firstNonEmpty(*healthAddr, os.Getenv("SCRATCHRUN_HEALTH_ADDR")); addr != "" {
		stop, err := serveWorkerHealth(addr, nc, &draining, log)
		if err != nil {
			w.Close()
			closeEngine()
			fmt.Fprintf(os.Stderr, "scratchrun worker: --health-addr %s: %v\n", addr, err)
			return exitInternal
		}
		defer stop()
	}
	shown := "every installed runtime"
	if len(offered) > 0 {
		shown = strings.Join(offered, ", ")
	}
	fmt.Fprintf(os.Stderr, "scratchrun worker: %s serving calls from NATS at %s (%s; %s)\n", workerID, nc.ConnectedUrlRedacted(), shown, admissionText(eng.Admission()))

	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(signals)
	sig := <-signals
	draining.Store(true)
	fmt.Fprintf(os.Stderr, "scratchrun worker: %s: leaving the registry; runs in flight finish (signal again to cancel them)\n", sig)
	ctx, cancel := context.WithTimeout(context.Background(), eng.Policy().MaxTimeout+workerDrainAllowance)
	defer cancel()
	go func() {
		select {
		case <-signals:
			fmt.Fprintln(os.Stderr, "scratchrun worker: second signal: cancelling the runs in flight")
			cancel()
		case <-ctx.Done():
		}
	}()
	err = w.Shutdown(ctx)
	closeEngine()
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun worker: %v\n", err)
		return exitInternal
	}
	fmt.Fprintln(os.Stderr, "scratchrun worker: drained; exiting")
	return 0
}

// serveWorkerHealth answers probes: /healthz while the process lives,
// /readyz while it is connected to NATS and not draining.
func serveWorkerHealth(addr string, nc *nats.Conn, draining *atomic.Bool, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, `{"status":"ok"}`)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case draining.Load():
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, `{"status":"draining"}`)
		case !nc.IsConnected():
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, `{"status":"not connected to NATS"}`)
		default:
			fmt.Fprintln(w, `{"status":"ready"}`)
		}
	})
	hs, bounded := httpapi.NewBoundedServer(ln, mux, httpapi.ConnLimits{MaxConns: 64}, slog.NewLogLogger(log.Handler(), slog.LevelDebug))
	go func() {
		if err := hs.Serve(bounded); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "scratchrun worker: health listener: %v\n", err)
		}
	}()
	return func() { hs.Close() }, nil
}

// hostWorkerID is the host's name as a worker id: its first label, with
// what an id may not hold replaced.
func hostWorkerID() string {
	host, err := os.Hostname()
	if err != nil {
		return "worker"
	}
	host, _, _ = strings.Cut(host, ".")
	return firstNonEmpty(asWorkerID(host), "worker")
}

// asWorkerID makes a name (a NATS user, a Kubernetes node's name) an id:
// what an id may not hold becomes '-' ("ip-10-0-0-1.ec2.internal" is
// "ip-10-0-0-1-ec2-internal"); "" for a name with nothing usable.
func asWorkerID(name string) string {
	name = regexp.MustCompile(`[^A-Za-z0-9_-]`).ReplaceAllString(name, "-")
	name = strings.TrimLeft(name, "-_")
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}

func workerUsageError(msg string) int {
	fmt.Fprintf(os.Stderr, "scratchrun worker: %s\n", msg)
	return exitUsage
}
