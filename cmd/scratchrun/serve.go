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
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scratchrun/scratchrun/internal/admission"
	"github.com/scratchrun/scratchrun/internal/console"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/mcpserver"
	"github.com/scratchrun/scratchrun/internal/store"
)

// defaultServeAddr is loopback: exposing the server is a deliberate choice.
const defaultServeAddr = "127.0.0.1:8722"

// cmdServe runs the HTTP API (and MCP at /mcp) over the local engine until
// SIGTERM or SIGINT, then drains: new requests get 503, runs in flight finish,
// and the process exits 0 with no sandbox left. A second signal cancels the
// runs still going (killing their sandboxes) and exits once they are gone.
func cmdServe(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", "", "listen on `HOST:PORT` (env SCRATCHRUN_ADDR; default "+defaultServeAddr+")")
	dbPath := fs.String("db", "", dbFlagUsage)
	engineFlags := addEngineFlags(fs)
	queueWait := fs.Duration("queue-wait", admission.DefaultQueueWait, "how long a request waits for room before a 429 (env SCRATCHRUN_QUEUE_WAIT; 0: no waiting)")
	queueLen := fs.Int("queue", 0, fmt.Sprintf("requests that may wait for room at once (env SCRATCHRUN_QUEUE; default %d)", admission.DefaultMaxQueue))
	maxBody := fs.String("max-body", "10MiB", "largest request body accepted (`SIZE`: bytes, or with KiB/MiB)")
	allowNoAuth := fs.Bool("allow-no-auth", false, "serve without API keys on a non-loopback address (dangerous: anyone who reaches it runs code)")
	maxConns := addMaxConnsFlag(fs)
	mcpSessions := addMCPSessionFlags(fs)
	metricsAddr := fs.String("metrics-addr", "", "also serve /metrics, without keys, on `HOST:PORT` (env SCRATCHRUN_METRICS_ADDR; loopback unless --allow-public-metrics)")
	allowPublicMetrics := fs.Bool("allow-public-metrics", false, "let --metrics-addr listen beyond loopback (anyone who reaches it reads the metrics)")
	consoleFlag := fs.String("console-token", "", "serve the web console at /console, signed in with this `TOKEN` (env SCRATCHRUN_CONSOLE_TOKEN, preferred: a flag shows in ps; at least 16 characters)")
	nf := addNATSFlags(fs, "serve as a cluster's front end, with no engine here: place calls on the workers (scratchrun worker) registered at these NATS servers")
	addOperatorFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: scratchrun serve [--addr HOST:PORT] [--db FILE|postgres://...] [--nats URL[,URL...]] [flags]

Serves the HTTP API (POST /v1/exec, GET /v1/runtimes, /healthz, /readyz,
/metrics) and the MCP tool at /mcp, with the API keys of 'scratchrun keys'
(/healthz and /readyz need none). While no key has ever been created it
serves without authentication, and then only on a loopback address unless
--allow-no-auth is given. --metrics-addr serves /metrics alone, without keys,
for a Prometheus scraper. Servers that share a --db (a postgres:// URL, or
one SQLite file on one machine) hold each key to its limits together.
With --console-token (or SCRATCHRUN_CONSOLE_TOKEN) it also serves a web
console at /console: keys, usage, live state and a playground. With --nats
it is a cluster's front end: no engine of its own, calls placed on the
workers registered there (several front ends may run side by side over one
postgres:// --db).

flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parseFlagsOnly(fs, args, serveUsageError); !ok {
		return code
	}
	listenAddr := firstNonEmpty(*addr, os.Getenv("SCRATCHRUN_ADDR"), defaultServeAddr)
	metricsListen := firstNonEmpty(*metricsAddr, os.Getenv("SCRATCHRUN_METRICS_ADDR"))
	limits, err := connLimits(*maxConns)
	if err != nil {
		return serveUsageError(err.Error())
	}
	db := firstNonEmpty(*dbPath, os.Getenv("SCRATCHRUN_DB"), defaultDBPath())
	// db may be a URL with a password: only its redacted form is printed.
	dbShown := store.Redact(db)
	bodyLimit, err := parseSize(*maxBody)
	if err != nil {
		return serveUsageError("--max-body: " + err.Error())
	}
	if *queueLen < 0 || *queueWait < 0 {
		return serveUsageError("--queue and --queue-wait must not be negative")
	}
	if err := mcpSessions.check(); err != nil {
		return serveUsageError(err.Error())
	}
	consoleToken := firstNonEmpty(*consoleFlag, os.Getenv("SCRATCHRUN_CONSOLE_TOKEN"))
	if consoleToken != "" {
		if err := console.CheckToken(consoleToken); err != nil {
			return serveUsageError("--console-token (SCRATCHRUN_CONSOLE_TOKEN): " + err.Error())
		}
	}
	overrides, err := engineFlags.overrides(fs)
	if err != nil {
		return serveUsageError(err.Error())
	}
	overrides.queue = *queueLen
	clustered := nf.given()
	if flagGiven(fs, "queue-wait") {
		overrides.queueWait = queueWait
	}
	// The flag named is the first given in fs's (alphabetical) order.
	var engineFlag string
	fs.Visit(func(f *flag.Flag) {
		if engineFlag == "" && slices.Contains(engineOnlyFlags, f.Name) {
			engineFlag = f.Name
		}
	})
	if clustered && engineFlag != "" {
		return serveUsageError(fmt.Sprintf("--%s shapes a local engine, and with --nats there is none: give it to each `scratchrun worker`", engineFlag))
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	keys, err := store.Open(ctx, db)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun serve: %v\n", err)
		return exitInternal
	}
	defer keys.Close()
	hasKeys, err := keys.HasKeys(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun serve: %v\n", err)
		return exitInternal
	}

	refuse := func(where string) int {
		return serveUsageError(fmt.Sprintf("refusing to serve on %s without API keys: anyone who reaches it could run code.\n"+
			"Create a key first (scratchrun keys create --name NAME --db %s), listen on 127.0.0.1, or pass --allow-no-auth", where, dbShown))
	}
	openToAll := !hasKeys && !*allowNoAuth
	// Refuse before binding when the address says enough, so that nothing
	// is ever exposed, even for a moment.
	if openToAll && addrIsNotLoopback(listenAddr) {
		return refuse(listenAddr)
	}
	refuseMetrics := func(where string) int {
		return serveUsageError(fmt.Sprintf("refusing to serve metrics without keys on %s: anyone who reaches it could read them.\n"+
			"Listen on 127.0.0.1, or pass --allow-public-metrics", where))
	}
	if metricsListen != "" && !*allowPublicMetrics && addrIsNotLoopback(metricsListen) {
		return refuseMetrics(metricsListen)
	}
	ln, err := net.Listen("tcp", listenAddr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun serve: listen on %s: %v\n", listenAddr, err)
		return exitInternal
	}
	defer ln.Close()
	if openToAll && !listenerIsLoopback(ln) {
		ln.Close()
		return refuse(ln.Addr().String())
	}
	var metricsLn net.Listener
	if metricsListen != "" {
		if metricsLn, err = net.Listen("tcp", metricsListen); err != nil {
			fmt.Fprintf(os.Stderr, "scratchrun serve: --metrics-addr %s: %v\n", metricsListen, err)
			return exitInternal
		}
		defer metricsLn.Close()
		if !*allowPublicMetrics && !listenerIsLoopback(metricsLn) {
			return refuseMetrics(metricsLn.Addr().String())
		}
	}

	log := newLogger()
	var svc execapi.Service
	var policy execapi.Policy
	var extraMetrics []prometheus.Collector
	var drainTimeout time.Duration
	var closeEngine func()
	var describe func() string
	if clustered {
		if !store.IsPostgresURL(db) {
			fmt.Fprintf(os.Stderr, "scratchrun serve: warning: keys in the SQLite file %s: front ends on other machines cannot share it (use --db postgres://...)\n", dbShown)
		}
		// placeWait is the queue wait resolved from --queue-wait and the
		// environment (negative: none), unlike *queueWait, the flag's value
		// even when it was not given.
		var placeWait time.Duration
		if policy, placeWait, err = frontendPolicy(log, overrides.queueWait); err != nil {
			return serveUsageError(err.Error())
		}
		fe, nc, err := openFrontend(nf, log, policy, placeWait)
		if err != nil {
			fmt.Fprintf(os.Stderr, "scratchrun serve: %v\n", err)
			return exitInternal
		}
		svc, extraMetrics = fe, fe.Collectors()
		// Runs in flight at a drain end on the workers, which finish them:
		// the wait is theirs, plus placement's queue wait.
		drainTimeout = policy.MaxTimeout + 15*time.Second + max(placeWait, 0)
		closeEngine = func() {
			fe.Close()
			nc.Close()
		}
		describe = func() string { return clusterText(fe, nc) }
	} else {
		eng, err := newEngine(log, overrides)
		if err != nil {
			fmt.Fprintf(os.Stderr, "scratchrun serve: %v\n", err)
			return exitInternal
		}
		svc, policy = eng, eng.Policy()
		closeEngine = func() {
			if err := eng.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "scratchrun serve: release the engine: %v\n", err)
			}
		}
		describe = func() string { return admissionText(eng.Admission()) }
	}
	var mountConsole func(execapi.Service, func() httpapi.Live) http.Handler
	if consoleToken != "" {
		con, err := console.New(console.Config{Token: consoleToken, Keys: keys, MaxBodyBytes: bodyLimit, Logger: log})
		if err != nil {
			closeEngine()
			return serveUsageError("--console-token: " + err.Error())
		}
		mountConsole = con.Mount
	}
	srv, err := httpapi.New(httpapi.Config{
		Service:      svc,
		Policy:       policy,
		DrainTimeout: drainTimeout,
		Metrics:      extraMetrics,
		Keys:         keys,
		MaxBodyBytes: bodyLimit,
		Conns:        limits,
		ListenAddr:   listenAddr,
		MCP: func(svc execapi.Service) http.Handler {
			return mcpserver.HTTPHandler(svc, mcpSessions.apply(mcpserver.Options{Logger: log, Version: version}))
		},
		Console: mountConsole,
		Logger:  log,
	})
	if err != nil {
		closeEngine()
		fmt.Fprintf(os.Stderr, "scratchrun serve: %v\n", err)
		return exitInternal
	}

	if !hasKeys {
		fmt.Fprintf(os.Stderr, "scratchrun serve: no API keys exist: serving WITHOUT authentication until one is created (scratchrun keys create --name NAME --db %s)\n", dbShown)
	}
	fmt.Fprintf(os.Stderr, "scratchrun serve: listening on http://%s (%s; keys in %s)\n", ln.Addr(), describe(), dbShown)
	if consoleToken != "" {
		fmt.Fprintf(os.Stderr, "scratchrun serve: web console at http://%s/console (sign in with the console token)\n", ln.Addr())
	}
	if metricsLn != nil {
		stopMetrics := serveMetrics(srv, metricsLn, metricsListen, limits, log)
		defer stopMetrics()
	}
	go func() {
		if err := srv.Ready(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "scratchrun serve: warning: not ready: %v\n", err)
		}
	}()

	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(signals)
	drainCtx, drain := context.WithCancel(ctx)
	go func() {
		sig := <-signals
		fmt.Fprintf(os.Stderr, "scratchrun serve: %s: draining (new requests get 503; runs in flight finish); signal again to cancel them\n", sig)
		drain()
		<-signals
		fmt.Fprintln(os.Stderr, "scratchrun serve: second signal: cancelling the runs in flight")
		srv.Abort()
	}()
	err = srv.Serve(drainCtx, ln)
	closeEngine()
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun serve: %v\n", err)
		return exitInternal
	}
	fmt.Fprintln(os.Stderr, "scratchrun serve: drained; exiting")
	return 0
}

// serveMetrics serves /metrics alone, without keys, on ln (--metrics-addr),
// bounded and guarded as the API is; the returned func stops it.
func serveMetrics(srv *httpapi.Server, ln net.Listener, given string, limits httpapi.ConnLimits, log *slog.Logger) func() {
	mux := http.NewServeMux()
	mux.Handle("/metrics", srv.MetricsHandler())
	hs, bounded := httpapi.NewBoundedServer(ln, httpapi.GuardOrigin(mux, ln.Addr(), given), limits, slog.NewLogLogger(log.Handler(), slog.LevelDebug))
	fmt.Fprintf(os.Stderr, "scratchrun serve: metrics (no key) at http://%s/metrics\n", ln.Addr())
	go func() {
		if err := hs.Serve(bounded); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "scratchrun serve: metrics listener: %v\n", err)
		}
	}()
	return func() { hs.Close() }
}

// admissionText says in a line how admission will decide.
func admissionText(a execapi.AdmissionInfo) string {
	var parts []string
	if a.MemoryBudgetBytes > 0 {
		parts = append(parts, fmt.Sprintf("memory budget %d MiB", a.MemoryBudgetBytes>>20))
	} else {
		parts = append(parts, "no memory budget")
	}
	if a.CPUThreshold > 0 {
		parts = append(parts, fmt.Sprintf("CPU pressure below %.2f (%s)", a.CPUThreshold, a.CPUGauge))
	} else {
		parts = append(parts, "no CPU condition")
	}
	parts = append(parts, fmt.Sprintf("at most %d sandboxes", a.Capacity))
	if a.QueueWaitMS > 0 {
		parts = append(parts, fmt.Sprintf("queue of %d waiting up to %s", a.MaxQueue, time.Duration(a.QueueWaitMS)*time.Millisecond))
	} else {
		parts = append(parts, "no queue")
	}
	return "admission: " + strings.Join(parts, ", ")
}

func serveUsageError(msg string) int {
	fmt.Fprintf(os.Stderr, "scratchrun serve: %s\n", msg)
	return exitUsage
}

// addrIsNotLoopback reports whether HOST:PORT certainly binds beyond loopback:
// an empty host or an IP literal that is not loopback. Host names are decided
// by listenerIsLoopback once bound.
func addrIsNotLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false // net.Listen will refuse it with a clear error
	}
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && !ip.IsLoopback()
}

// listenerIsLoopback reports whether ln accepts connections only from this
// machine. The bound address is checked rather than the text given, so that
// "localhost", "[::1]" and "127.0.0.1" are loopback and "", "0.0.0.0" and any
// name that resolves elsewhere are not.
func listenerIsLoopback(ln net.Listener) bool {
	tcp, ok := ln.Addr().(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// dbFlagUsage describes --db, which serve and every keys command take.
var dbFlagUsage = "key and usage database: a `FILE` (SQLite) or a postgres:// URL, which several servers may share (env SCRATCHRUN_DB; default " + defaultDBPath() + ")"

// defaultDBPath is /var/lib/scratchrun/scratchrun.db for root, else in the
// user's data directory.
func defaultDBPath() string {
	if os.Geteuid() == 0 {
		return "/var/lib/scratchrun/scratchrun.db"
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "scratchrun", "scratchrun.db")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), fmt.Sprintf("scratchrun-%d", os.Getuid()), "scratchrun.db")
	}
	return filepath.Join(home, ".local", "share", "scratchrun", "scratchrun.db")
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// parseSize reads "1048576", "512KiB" or "10MiB" (also KB/MB/K/M, all binary).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(strings.ToUpper(t), strings.ToUpper(u.suffix)) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > (1<<40)/mult {
		return 0, errors.New(strconv.Quote(s) + " is not a positive size (e.g. 10MiB, 512KiB, 1048576)")
	}
	return n * mult, nil
}
