package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/httpapi/openapi"
	"github.com/scratchrun/scratchrun/internal/store"
)

// Defaults of Config.
const (
	DefaultMaxBodyBytes = 10 << 20
	// DrainAllowance is what a drain waits beyond the longest run: a
	// call's wait for admission, its sandbox's set-up and teardown, and
	// its result's delivery. The one allowance of every drain (serve's,
	// a front end's, a worker's, mcp's wait for cancelled runs).
	DrainAllowance = 15 * time.Second
	// DefaultRecordTimeout bounds one write of a usage or refusal row.
	DefaultRecordTimeout = 5 * time.Second
)

// Config configures a Server.
type Config struct {
	// Service runs the requests: the local engine. Required.
	Service execapi.Service
	// Policy is the engine's policy (engine.Config.Policy); requests are
	// validated against it before they wait for a slot, so bad input never
	// waits, counts or runs, and an engine that takes checked requests
	// (execapi.CheckedExecutor) gets them without validating again.
	// Required; it must be that engine's own.
	Policy execapi.Policy
	// Keys holds API keys, the state of their limits and usage rows (a
	// *store.Store). Required. Servers that share one (a PostgreSQL
	// database, or a SQLite file on one machine) hold each key to its
	// limits together.
	Keys KeyStore
	// MaxBodyBytes bounds a request body (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// Conns bounds client connections in time and number (zero: defaults).
	Conns ConnLimits
	// ListenAddr is the address as the operator gave it (--addr); on a
	// loopback listener, a Host naming it is accepted besides loopback
	// names (see GuardOrigin).
	ListenAddr string
	// Version is the server's scratchrun version (buildinfo), which GET
	// /v1/runtimes shows when the service's description names none (a
	// cluster's front end describes its workers, not itself).
	Version string
	// RecordTimeout bounds each write of a usage or refusal row to Keys
	// (default DefaultRecordTimeout): past it the row is logged as lost and
	// the request goes on, so that a key store that hangs holds up no
	// answer and no drain.
	RecordTimeout time.Duration
	// DrainTimeout bounds how long shutdown waits for accepted work before it
	// cancels what is left (default: the service's queue wait, as its
	// admission describes it, plus the policy's maximum timeout plus 15 s
	// for set-up and teardown).
	DrainTimeout time.Duration
	// MCP, when set, builds the MCP front end over the service it is given
	// (which applies keys, limits and accounting); it is mounted at /mcp.
	MCP func(svc execapi.Service) http.Handler
	// Console, when set, builds the web console (package console) over the
	// service it is given (which applies admission and accounting: its
	// runs are the operator's, counted against no key and recorded under
	// ConsoleCaller) and the server's live figures; it is mounted at /console and below, outside the API keys
	// (it has a sign-in of its own) but behind GuardOrigin as every route
	// is. Unset, /console answers 404 saying how to turn it on.
	Console func(svc execapi.Service, live func() Live) http.Handler
	// OAuth, when set, lets /mcp take OAuth access tokens besides API keys
	// (see OAuth). Nil: API keys only.
	OAuth *OAuth
	// Metrics are collectors of the service's own, exported with the
	// server's at /metrics (a cluster's front end: its workers' capacity
	// and its placement retries).
	Metrics []prometheus.Collector
	// Logger receives operational logs; never keys or request contents.
	Logger *slog.Logger
	// Sessions offers code sessions (a sandbox kept across calls; not the
	// MCP transport's sessions): GET /v1/openapi.json then serves the
	// document with the sessions fragment merged in (package openapi), and
	// the session routes join it. Off, the default, the server serves
	// exactly the API it served before sessions existed, byte for byte
	// (TestAPIUnchangedWithoutSessions).
	Sessions bool

	// idempotencyWait bounds a retry's wait for the first request with its
	// Idempotency-Key (default: the longest a run can take, from its queue
	// to its teardown); tests shorten it.
	idempotencyWait time.Duration
}

// Server is the HTTP API server. Create it with New and run it with Serve.
type Server struct {
	cfg  Config
	gate *gate
	// sessions is the gate's session methods, with Config.Sessions only.
	sessions *sessionGate
	auth     *authenticator
	m        *metrics
	drain    *drainState
	log      *slog.Logger
	handler  http.Handler
	// served lists the routes the handler serves (routes).
	served []route
	ready  readiness
	// idemWait is Config.idempotencyWait with its default.
	idemWait time.Duration

	mu    sync.Mutex
	abort chan struct{}
	// runs is the parent of every run's cancellation: cancelling it kills
	// all sandboxes in flight, whichever front end started them.
	runs       context.Context
	cancelRuns context.CancelFunc
}

// New checks cfg and builds the server's handlers.
func New(cfg Config) (*Server, error) {
	if cfg.Service == nil || cfg.Keys == nil {
		return nil, errors.New("httpapi: Config needs a Service and a key store")
	}
	if cfg.Policy.MaxTimeout <= 0 {
		return nil, errors.New("httpapi: Config needs the engine's Policy")
	}
	checked, _ := cfg.Service.(execapi.CheckedExecutor)
	if checked != nil && checked.Policy() != cfg.Policy {
		// A checked request would reach the engine past a policy it does
		// not hold.
		return nil, errors.New("httpapi: Config.Policy is not the engine's own policy")
	}
	if cfg.OAuth != nil {
		if err := cfg.OAuth.check(); err != nil {
			return nil, fmt.Errorf("httpapi: %w", err)
		}
	}
	info, err := cfg.Service.Describe(context.Background())
	if err != nil {
		return nil, fmt.Errorf("httpapi: describe the service: %w", err)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	var queueWait time.Duration
	if info.Admission != nil {
		queueWait = time.Duration(info.Admission.QueueWaitMS) * time.Millisecond
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = cfg.Policy.MaxTimeout + DrainAllowance + queueWait
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RecordTimeout <= 0 {
		cfg.RecordTimeout = DefaultRecordTimeout
	}
	m := newMetrics()
	s := &Server{cfg: cfg, m: m, drain: newDrainState(), log: cfg.Logger, abort: make(chan struct{})}
	s.runs, s.cancelRuns = context.WithCancel(context.Background())
	s.idemWait = cfg.idempotencyWait
	if s.idemWait <= 0 {
		// A minute beyond a drain's bound: a slow sandbox start, a
		// cluster's placement, the writes after the run; the bound only
		// decides when a retry gives up on a first request whose server
		// died, so erring long costs a wait, erring short a false answer.
		s.idemWait = queueWait + cfg.Policy.MaxTimeout + DrainAllowance + time.Minute
	}
	s.auth = &authenticator{keys: cfg.Keys}
	if _, err := s.auth.open(context.Background()); err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	// Set after the first look, so that only a key created while serving
	// (the moment the server closes) is announced.
	s.auth.onFirstKey = func() {
		s.log.Warn("an API key exists now: from here on every request needs one")
	}
	s.gate = &gate{
		svc: cfg.Service, checked: checked, policy: cfg.Policy, keys: cfg.Keys, m: m, drain: s.drain, log: cfg.Logger, runs: s.runs,
		limits: store.NewLimiter(cfg.Keys, cfg.Logger), calls: newInFlight(), queueWait: queueWait, recordWait: cfg.RecordTimeout,
	}
	if cfg.Sessions {
		ss, ok := cfg.Service.(execapi.SessionService)
		if !ok {
			return nil, errors.New("httpapi: Config.Sessions is set, but the service holds no sessions (execapi.SessionService)")
		}
		s.sessions = &sessionGate{gate: s.gate, ss: ss}
	}
	runtimes := make([]string, 0, len(info.Runtimes))
	for _, rt := range info.Runtimes {
		runtimes = append(runtimes, rt.Name)
	}
	m.registry.MustRegister(newPoolCollector(cfg.Service, runtimes, cfg.Policy.NetworkDefault),
		newAdmissionCollector(cfg.Service, s.gate.calls.count))
	for _, c := range cfg.Metrics {
		if err := m.registry.Register(c); err != nil {
			return nil, fmt.Errorf("httpapi: register the service's metrics: %w", err)
		}
	}
	s.handler = s.routes()
	return s, nil
}

// MetricsHandler serves the Prometheus metrics without a key, for a
// listener of their own (`scratchrun serve --metrics-addr`); the API's
// /metrics needs a key once keys exist.
func (s *Server) MetricsHandler() http.Handler { return s.m.handler() }

// Service is what the server runs requests through: validation, key limits
// and accounting in front of Config.Service (whose admission decides when
// a call starts).
//
// With Config.Sessions it is an execapi.SessionService too, which applies
// the caller's key to sessions as to calls.
func (s *Server) Service() execapi.Service {
	if s.sessions != nil {
		return *s.sessions
	}
	return s.gate
}

// Serve answers on ln until ctx is cancelled, then drains: new requests get
// 503 while the requests already accepted finish (runs up to their timeouts),
// and only then does it close the listener and return. Runs still going at
// Config.DrainTimeout, or when Abort is called, are cancelled, which kills
// their sandboxes. It returns nil after a drain, or the listener's error.
//
// Every connection is bounded (Config.Conns), and every request must come
// from where GuardOrigin allows.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	refused := func() { s.m.rejections.add(reasonForbidden) }
	policy := originPolicy{bound: ln.Addr(), listenAddr: s.cfg.ListenAddr}
	if o := s.cfg.OAuth; o != nil {
		policy.publicURL, policy.anyOrigin = o.PublicURL, o.anyOrigin()
	}
	hs, bounded := NewBoundedServer(ln, guardOrigin(s.handler, policy, refused), s.cfg.Conns,
		slog.NewLogLogger(s.log.Handler(), slog.LevelDebug))
	served := make(chan error, 1)
	go func() { served <- hs.Serve(bounded) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}

	idle := s.drain.start()
	s.m.draining.Set(1)
	s.log.Info("draining: new requests get 503; waiting for accepted work", "calls", s.gate.calls.count())
	deadline := time.NewTimer(s.cfg.DrainTimeout)
	defer deadline.Stop()
	// Accepted work is the HTTP requests counted in flight and every run in
	// the gate: an MCP tool call can outlive the request that started it.
	drained := make(chan struct{})
	giveUp := make(chan struct{})
	defer close(giveUp)
	go func() {
		select {
		case <-idle:
			s.gate.calls.waitIdle(giveUp)
		case <-giveUp:
		}
		close(drained)
	}()
	select {
	case <-drained:
	case <-deadline.C:
		s.log.Warn("drain timeout passed: cancelling the runs still going")
		s.cancelRuns()
	case <-s.abort:
		s.log.Warn("drain aborted: cancelling the runs still going")
		s.cancelRuns()
	}
	// Cancelled runs end within moments (the engine kills on cancel); wait
	// for their teardown so that nothing is left when Serve returns.
	select {
	case <-drained:
	case <-time.After(30 * time.Second):
		s.log.Error("runs still in flight 30 s after cancelling them")
	}
	s.cancelRuns()
	// Only idle connections and MCP event streams are left: close them.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil {
		hs.Close()
	}
	<-served
	return nil
}

// Abort cuts a drain short: runs still going are cancelled (their sandboxes
// killed) and Serve returns once they are torn down.
func (s *Server) Abort() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.abort:
	default:
		close(s.abort)
	}
}

// routes builds the mux. Every route is instrumented; API routes and
// /metrics need a key (once keys exist), API routes count as in flight for
// draining. /healthz, /readyz and /v1/openapi.json stay open: the first two
// say only whether the process and its sandboxes work, the last is the
// public description of the API. Every route is registered through one
// table (s.served), which the OpenAPI document is checked against.
func (s *Server) routes() http.Handler {
	t := &routeTable{mux: http.NewServeMux()}
	// Each API route answers its own method; its other methods get a 405
	// in the API's error document, behind the same key check (a request
	// without a key learns nothing about the route).
	api := func(route, method string, h http.Handler) {
		t.handle(method, route, "", s.m.instrument(route, s.tracked(s.requireKey(h))))
		t.mux.Handle(route, s.m.instrument(route, s.tracked(s.requireKey(methodNotAllowed(method)))))
	}
	api("/v1/exec", http.MethodPost, s.idempotent(http.HandlerFunc(s.handleExec)))
	api("/v1/runtimes", http.MethodGet, http.HandlerFunc(s.handleRuntimes)) // and HEAD, as GET patterns are
	if s.sessions != nil {
		s.sessionRoutes(t, func(route string, h http.Handler) http.Handler {
			return s.m.instrument(route, s.tracked(s.requireKey(h)))
		})
	}
	t.handle(http.MethodGet, "/v1/openapi.json", "", s.m.instrument("/v1/openapi.json", openAPIHandler(openapi.JSON(s.cfg.Sessions))))
	t.mux.Handle("/v1/openapi.json", s.m.instrument("/v1/openapi.json", methodNotAllowed(http.MethodGet)))
	// /healthz and /readyz answer every method alike; the document names GET.
	t.handle("", "/healthz", "", s.m.instrument("/healthz", http.HandlerFunc(s.handleHealth)))
	t.handle("", "/readyz", "", s.m.instrument("/readyz", http.HandlerFunc(s.handleReady)))
	t.handle("", "/metrics", "Prometheus metrics, docs/server.md", s.m.instrument("/metrics", s.requireKey(s.m.handler())))
	if s.cfg.MCP != nil {
		t.handle("", "/mcp", "the MCP tool (Streamable HTTP), docs/mcp-clients.md", s.m.instrument("/mcp", s.mcpRoute(s.cfg.MCP(s.Service()))))
	}
	if s.cfg.OAuth != nil {
		s.mountOAuth(t)
	}
	console := consoleOff()
	if s.cfg.Console != nil {
		console = s.cfg.Console(operatorGate{s.gate}, s.Live)
	}
	t.handle("", "/console", "the web console, docs/console.md", s.m.instrument("/console", console))
	t.handle("", "/console/", "the web console, docs/console.md", s.m.instrument("/console", console))
	t.handle("", "/", "the 404 of every other path", s.m.instrument("other", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no such endpoint %s; see POST /v1/exec, GET /v1/runtimes and the API's description at GET /v1/openapi.json", r.URL.Path))
	})))
	s.served = t.routes
	return t.mux
}

// tracked turns requests away with 503 once draining has begun and counts the
// others as in flight until they are answered.
func (s *Server) tracked(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.drain.enter() {
			s.refuseDraining(w)
			return
		}
		defer s.drain.leave()
		next.ServeHTTP(w, r)
	})
}

func (s *Server) refuseDraining(w http.ResponseWriter) {
	writeRefusal(w, s.gate.refuse(&execapi.Refusal{Reason: execapi.RefusedDraining}))
}

// mcpRoute puts the MCP handler behind the same keys, body limit and drain as
// the REST API. Its event streams (GET) are long-lived and carry no run of
// their own, so they are not waited for when draining; the tool calls
// (POST) are.
func (s *Server) mcpRoute(h http.Handler) http.Handler {
	authed := s.requireCaller(s.mcpAuth(h), true)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		if r.Method == http.MethodGet {
			if s.drain.isDraining() {
				s.refuseDraining(w)
				return
			}
			authed.ServeHTTP(w, r)
			return
		}
		s.tracked(authed).ServeHTTP(w, r)
	})
}
