//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scratchrun/scratchrun/internal/buildinfo"
	"github.com/scratchrun/scratchrun/internal/console"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/mcpserver"
	"github.com/scratchrun/scratchrun/internal/sessionrecord"
	"github.com/scratchrun/scratchrun/internal/store"
)

// cmdServe runs the HTTP API (and MCP at /mcp) over the local engine until
// SIGTERM or SIGINT, then drains: new requests get 503, runs in flight finish,
// and the process exits 0 with no sandbox left. A second signal cancels the
// runs still going (killing their sandboxes) and exits once they are gone.
func cmdServe(args []string) int {
	c, code, ok := parseServe(args)
	if !ok {
		return code
	}
	return runServe(c)
}

// served is what serve answers with: the local engine or a cluster's front
// end, and how to close it.
type served struct {
	svc          execapi.Service
	policy       execapi.Policy
	metrics      []prometheus.Collector
	drainTimeout time.Duration // 0: httpapi's, for a local engine
	close        func()
	describe     func() string
	// sessions, when the engine's are on (--sessions), keeps their rows:
	// the console's Sessions page reads it. Nil: sessions off.
	sessions *sessionrecord.Recorder
}

// runServe opens what c describes, in order: the key store, the
// listeners (refusing to expose an open server before anything is bound
// beyond loopback), the engine or the front end, and the HTTP server, and
// serves until the signals end it.
func runServe(c serveConfig) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// db may be a URL with a password: only its redacted form is printed.
	dbShown := store.Redact(c.db)
	keys, err := store.Open(ctx, c.db)
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
	ln, metricsLn, code, ok := serveListeners(c, !hasKeys && !c.allowNoAuth, dbShown)
	if !ok {
		return code
	}
	defer ln.Close()
	if metricsLn != nil {
		defer metricsLn.Close()
	}

	log := newLogger(c.debug)
	oauthCfg, err := c.oauth.build(ctx, ln, keys, log)
	if err != nil {
		return serveUsageError(err.Error())
	}
	s, err := openServed(ctx, c, keys, log, dbShown)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun serve: %v\n", err)
		return exitInternal
	}
	var mountConsole func(execapi.Service, func() httpapi.Live) http.Handler
	if c.consoleToken != "" {
		cc := console.Config{Token: c.consoleToken, Keys: keys, MaxBodyBytes: c.bodyLimit, Logger: log}
		if s.sessions != nil {
			cc.Sessions, cc.SessionAdmin = keys, s.sessions
		}
		con, err := console.New(cc)
		if err != nil {
			s.close()
			return serveUsageError("--console-token: " + err.Error())
		}
		mountConsole = con.Mount
	}
	srv, err := httpapi.New(httpapi.Config{
		Service:      s.svc,
		Policy:       s.policy,
		DrainTimeout: s.drainTimeout,
		Metrics:      s.metrics,
		Keys:         keys,
		MaxBodyBytes: c.bodyLimit,
		Conns:        c.conns,
		ListenAddr:   c.listen,
		Version:      buildinfo.Get().Version,
		MCP: func(svc execapi.Service) http.Handler {
			return mcpserver.HTTPHandler(svc, c.sessions.apply(mcpserver.Options{Logger: log, Version: buildinfo.Get().Version}))
		},
		Console: mountConsole,
		OAuth:   oauthCfg,
		Logger:  log,
		// The engine holds sessions when its configuration turns them on
		// (--sessions); the routes follow it.
		Sessions: httpapi.SessionsOffered(s.svc),
	})
	if err != nil {
		s.close()
		fmt.Fprintf(os.Stderr, "scratchrun serve: %v\n", err)
		return exitInternal
	}

	if !hasKeys {
		fmt.Fprintf(os.Stderr, "scratchrun serve: no API keys exist: serving WITHOUT authentication until one is created (scratchrun keys create --name NAME --db %s)\n", dbShown)
	}
	fmt.Fprintf(os.Stderr, "scratchrun serve: listening on http://%s (%s; keys in %s)\n", ln.Addr(), s.describe(), dbShown)
	if oauthCfg != nil {
		fmt.Fprintf(os.Stderr, "scratchrun serve: /mcp takes OAuth tokens for %s from %s\n", oauthCfg.Resource, oauthCfg.AuthorizationServers[0])
		if !hasKeys {
			fmt.Fprintln(os.Stderr, "scratchrun serve: warning: --oauth with no API key yet: /mcp is open to anyone until the first key is created, and no token can be issued (a token acts as a key)")
		}
	}
	if c.consoleToken != "" {
		fmt.Fprintf(os.Stderr, "scratchrun serve: web console at http://%s/console (sign in with the console token)\n", ln.Addr())
	}
	if metricsLn != nil {
		stopMetrics := serveMetrics(srv, metricsLn, c.metrics, c.conns, log)
		defer stopMetrics()
	}
	go func() {
		if err := srv.Ready(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "scratchrun serve: warning: not ready: %v\n", err)
		}
	}()
	err = serveUntilSignalled(ctx, srv, ln)
	s.close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun serve: %v\n", err)
		return exitInternal
	}
	fmt.Fprintln(os.Stderr, "scratchrun serve: drained; exiting")
	return 0
}

// serveListeners binds the API's listener and --metrics-addr's. openToAll
// (no key and no --allow-no-auth) refuses any address beyond loopback:
// before binding when the address says enough, so that nothing is ever
// exposed, even for a moment, else once bound.
func serveListeners(c serveConfig, openToAll bool, dbShown string) (ln, metricsLn net.Listener, code int, ok bool) {
	refuse := func(where string) int {
		return serveUsageError(fmt.Sprintf("refusing to serve on %s without API keys: anyone who reaches it could run code.\n"+
			"Create a key first (scratchrun keys create --name NAME --db %s), listen on 127.0.0.1, or pass --allow-no-auth", where, dbShown))
	}
	refuseMetrics := func(where string) int {
		return serveUsageError(fmt.Sprintf("refusing to serve metrics without keys on %s: anyone who reaches it could read them.\n"+
			"Listen on 127.0.0.1, or pass --allow-public-metrics", where))
	}
	if openToAll && addrIsNotLoopback(c.listen) {
		return nil, nil, refuse(c.listen), false
	}
	if c.metrics != "" && !c.allowPublicMetrics && addrIsNotLoopback(c.metrics) {
		return nil, nil, refuseMetrics(c.metrics), false
	}
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun serve: listen on %s: %v\n", c.listen, err)
		return nil, nil, exitInternal, false
	}
	if openToAll && !listenerIsLoopback(ln) {
		ln.Close()
		return nil, nil, refuse(ln.Addr().String()), false
	}
	if c.metrics == "" {
		return ln, nil, 0, true
	}
	if metricsLn, err = net.Listen("tcp", c.metrics); err != nil {
		ln.Close()
		fmt.Fprintf(os.Stderr, "scratchrun serve: --metrics-addr %s: %v\n", c.metrics, err)
		return nil, nil, exitInternal, false
	}
	if !c.allowPublicMetrics && !listenerIsLoopback(metricsLn) {
		ln.Close()
		metricsLn.Close()
		return nil, nil, refuseMetrics(metricsLn.Addr().String()), false
	}
	return ln, metricsLn, 0, true
}

// openServed opens the local engine, or with --nats the front end. The
// engine's sessions, when on, are recorded in keys' rows until the engine
// closes.
func openServed(ctx context.Context, c serveConfig, keys *store.Store, log *slog.Logger, dbShown string) (served, error) {
	if c.clustered {
		if !store.IsPostgresURL(c.db) {
			fmt.Fprintf(os.Stderr, "scratchrun serve: warning: keys in the SQLite file %s: front ends on other machines cannot share it (use --db postgres://...)\n", dbShown)
		}
		fe, nc, err := openFrontend(c.nats, log, c.frontend)
		if err != nil {
			return served{}, err
		}
		svc, stop, err := frontendService(fe, keys, log)
		if err != nil {
			fe.Close()
			nc.Close()
			return served{}, err
		}
		return served{svc: svc, policy: c.frontend.policy, metrics: fe.Collectors(), drainTimeout: c.frontend.drainTimeout(),
			close:    func() { stop(); fe.Close(); nc.Close() },
			describe: func() string { return clusterText(fe, nc) }}, nil
	}
	eng, err := c.local.open(log)
	if err != nil {
		return served{}, err
	}
	// The Recorder's loop stops before the engine closes, so that it ends
	// no session of an engine going away.
	recCtx, stopRecording := context.WithCancel(ctx)
	svc, rec, err := recordEngine(recCtx, eng, keys, sessionrecord.Config{Logger: log})
	if err != nil {
		stopRecording()
		eng.Close()
		return served{}, err
	}
	return served{svc: svc, policy: eng.Policy(), sessions: rec,
		close: func() {
			stopRecording()
			if rec != nil {
				<-rec.Done()
			}
			if err := eng.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "scratchrun serve: release the engine: %v\n", err)
			}
			if rec != nil {
				if err := endRecorded(keys, rec); err != nil {
					fmt.Fprintf(os.Stderr, "scratchrun serve: mark the sessions ended: %v\n", err)
				}
			}
		},
		describe: func() string { return admissionText(eng.Admission()) }}, nil
}

// serveUntilSignalled serves on ln until a signal, then drains; a second
// signal cancels the runs in flight.
func serveUntilSignalled(ctx context.Context, srv *httpapi.Server, ln net.Listener) error {
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(signals)
	drainCtx, drain := context.WithCancel(ctx)
	defer drain()
	go func() {
		sig := <-signals
		fmt.Fprintf(os.Stderr, "scratchrun serve: %s: draining (new requests get 503; runs in flight finish); signal again to cancel them\n", sig)
		drain()
		<-signals
		fmt.Fprintln(os.Stderr, "scratchrun serve: second signal: cancelling the runs in flight")
		srv.Abort()
	}()
	return srv.Serve(drainCtx, ln)
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
