//go:build linux

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

	"github.com/nats-io/nats.go"

	"github.com/scratchrun/scratchrun/internal/buildinfo"
	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/cluster/worker"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/settings"
)

// cmdWorker serves a cluster's calls with the local engine until SIGTERM
// or SIGINT, then drains: it leaves the registry, refuses new calls (front
// ends place them elsewhere), finishes the runs in flight and delivers
// their results, and exits 0 with no sandbox left. A second signal cancels
// the runs still going.
func cmdWorker(args []string) int {
	c, code, ok := parseWorker(args)
	if !ok {
		return code
	}
	images, err := openStore(c.local.dataDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun worker: %v\n", err)
		return exitInternal
	}
	// From the start: a SIGTERM while the worker pulls, connects or
	// publishes its first registration must not kill it by the default
	// action (it would leave its registration behind, undrained).
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(signals)
	if err := pullImagesFrom(images, c.imagesFrom); err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun worker: %v\n", err)
		return exitInternal
	}
	for _, rt := range c.runtimes {
		if _, err := images.Resolve(rt); err != nil {
			return workerUsageError("--runtimes: " + err.Error())
		}
	}
	log := newLogger(c.local.debug)
	c.conn.Logger, c.conn.Name = log, "scratchrun worker "+c.id
	nc, err := cluster.Connect(c.conn)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun worker: %v\n", err)
		return exitInternal
	}
	defer nc.Close()
	eng, err := c.local.open(log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun worker: %v\n", err)
		return exitInternal
	}
	closeEngine := func() {
		if err := eng.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "scratchrun worker: release the engine: %v\n", err)
		}
	}
	w, err := worker.Start(worker.Config{ID: c.id, Conn: nc, Engine: eng, Sessions: codeSessions(eng), Runtimes: c.runtimes,
		Aliases: images.Aliases, Version: buildinfo.Get().Version, Logger: log})
	if err != nil {
		closeEngine()
		fmt.Fprintf(os.Stderr, "scratchrun worker: %v\n", err)
		return exitInternal
	}
	var draining atomic.Bool
	if c.healthAddr != "" {
		stop, err := serveWorkerHealth(c.healthAddr, nc, &draining, log)
		if err != nil {
			w.Close()
			closeEngine()
			fmt.Fprintf(os.Stderr, "scratchrun worker: --health-addr %s: %v\n", c.healthAddr, err)
			return exitInternal
		}
		defer stop()
	}
	shown := "every installed runtime"
	if len(c.runtimes) > 0 {
		shown = strings.Join(c.runtimes, ", ")
	}
	fmt.Fprintf(os.Stderr, "scratchrun worker: %s serving calls from NATS at %s (%s; %s)\n", c.id, nc.ConnectedUrlRedacted(), shown, admissionText(eng.Admission()))

	sig := <-signals
	draining.Store(true)
	fmt.Fprintf(os.Stderr, "scratchrun worker: %s: leaving the registry; runs in flight finish (signal again to cancel them)\n", sig)
	ctx, cancel := context.WithTimeout(context.Background(), eng.Policy().MaxTimeout+httpapi.DrainAllowance)
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

// workerConfig is `scratchrun worker` as its flags and environment
// describe it.
type workerConfig struct {
	id         string
	runtimes   []string
	imagesFrom []imageSource
	healthAddr string
	// conn is how to reach NATS (its Name and Logger set when used).
	conn  cluster.ConnOptions
	local engineSetup
}

const workerHelp = `usage: scratchrun worker --nats URL[,URL...] [--id ID] [--runtimes LIST] [flags]

Runs the local engine (warm pool, admission, the isolation level chosen) and
serves the calls a cluster's front ends (scratchrun serve --nats) place on
it. It publishes itself to the registry of live workers every second and
refuses at once what its admission has no room for. SIGTERM: leave the
registry, finish the runs in flight, exit.

flags:
`

// parseWorker reads worker's command line and environment. When it
// returns false the command ends with code (0 after -h).
func parseWorker(args []string) (workerConfig, int, bool) {
	var c workerConfig
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	set := withSettings(fs, workerHelp, settings.Worker)
	if code, ok := parseFlagsOnly(fs, args, workerUsageError); !ok {
		return c, code, false
	}
	v, code, ok := resolveSettings(set, workerUsageError)
	if !ok {
		return c, code, false
	}
	n := parseNATS(v)
	if !n.given() {
		return c, workerUsageError("--nats (or SCRATCHRUN_NATS) is required: the NATS servers of the cluster"), false
	}
	var err error
	if c.conn, err = n.options("", nil); err != nil {
		return c, workerUsageError(err.Error()), false
	}
	c.id = firstNonEmpty(v.String(settings.WorkerID), asWorkerID(c.conn.User), hostWorkerID())
	if err := cluster.ValidateWorkerID(c.id); err != nil {
		return c, workerUsageError("--id: " + err.Error()), false
	}
	c.runtimes, c.healthAddr = v.List(settings.WorkerRuntimes), v.String(settings.HealthAddr)
	if c.imagesFrom, err = parseImagesFrom(v.List(settings.ImagesFrom)); err != nil {
		return c, workerUsageError(err.Error()), false
	}
	if c.local, err = parseEngine(v, settings.Worker); err != nil {
		return c, workerUsageError(err.Error()), false
	}
	c.local.engine.Pool.Runtimes = c.runtimes
	return c, 0, true
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

// codeSessions is the engine's sessions when it holds them (--sessions):
// the worker then serves them, and ends them as it stops, before the
// engine is closed. Asked of the engine by the contract, so that a worker
// built before the engine holds sessions simply serves none.
func codeSessions(eng any) execapi.SessionService {
	if s, ok := eng.(execapi.SessionService); ok && s.SessionPolicy().Enabled {
		return s
	}
	return nil
}
