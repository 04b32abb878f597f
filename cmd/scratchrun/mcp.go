package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/mcpserver"
	"github.com/scratchrun/scratchrun/internal/mcpserver/remote"
)

// minMCPTokenLength keeps a token that guards code execution from being
// guessable.
const minMCPTokenLength = 16

// runDrainTimeout bounds how long shutdown waits for cancelled runs to have
// their sandboxes torn down.
const runDrainTimeout = 15 * time.Second

// cmdMCP serves the scratchrun_exec MCP tool: over stdio by default (stdout
// is the protocol stream, so everything else goes to stderr), or over
// Streamable HTTP with --http. Code runs in the embedded engine, or on a
// remote server when SCRATCHRUN_API_KEY is set.
func cmdMCP(args []string) int {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	httpAddr := fs.String("http", "", "serve Streamable HTTP at `ADDR` (e.g. 127.0.0.1:8765), path /mcp, instead of stdio")
	tokenFlag := fs.String("token", "", "bearer `TOKEN` HTTP clients must send (default $SCRATCHRUN_MCP_TOKEN; the variable keeps it out of `ps`)")
	maxConns := addMaxConnsFlag(fs)
	mcpSessions := addMCPSessionFlags(fs)
	addOperatorFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: scratchrun mcp [--http ADDR [--token TOKEN] [--max-conns N]]

Serves the MCP tool scratchrun_exec. Without --http it speaks MCP on stdin and
stdout, as desktop clients expect ({"command": "scratchrun", "args": ["mcp"]}).

Code runs in the local engine, or on a ScratchRun server when SCRATCHRUN_API_KEY
is set (SCRATCHRUN_API_URL, default `+remote.DefaultURL+`).

flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parseFlagsOnly(fs, args, mcpUsageError); !ok {
		return code
	}
	tokenGiven := flagGiven(fs, "token")
	token := *tokenFlag
	if token == "" {
		token = os.Getenv("SCRATCHRUN_MCP_TOKEN")
	}
	if *httpAddr == "" && tokenGiven {
		return mcpUsageError("--token only applies with --http (stdio has no network to guard)")
	}
	var limits httpapi.ConnLimits
	if *httpAddr != "" {
		if msg := checkMCPListen(*httpAddr, token); msg != "" {
			return mcpUsageError(msg)
		}
		var err error
		if limits, err = connLimits(*maxConns); err != nil {
			return mcpUsageError(err.Error())
		}
		if err := mcpSessions.check(); err != nil {
			return mcpUsageError(err.Error())
		}
	}

	log := newLogger()
	svc, redact, closeService, err := mcpService(log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun mcp: %v\n", err)
		if errors.Is(err, errMCPUsage) {
			return exitUsage
		}
		return exitInternal
	}
	defer closeService()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	runs := &trackedService{Service: svc, base: ctx}
	opts := mcpSessions.apply(mcpserver.Options{Logger: log, Version: version, Redact: append(redact, token)})

	var status int
	if *httpAddr != "" {
		status = serveMCPHTTP(ctx, stop, *httpAddr, token, limits, runs, opts)
	} else {
		status = serveMCPStdio(ctx, runs, opts)
	}
	// Whatever ended the server (stdin closed, a signal), runs still in
	// flight have nobody to answer: kill their sandboxes and wait for the
	// teardown before the process (and the backend) goes away.
	stop()
	if !runs.wait(runDrainTimeout) {
		fmt.Fprintln(os.Stderr, "scratchrun mcp: runs were still tearing down at exit")
		status = exitInternal
	}
	return status
}

var errMCPUsage = errors.New("configuration error")

func mcpUsageError(msg string) int {
	fmt.Fprintf(os.Stderr, "scratchrun mcp: %s\n", msg)
	return exitUsage
}

// checkMCPListen refuses to expose code execution beyond this machine
// without a token, and refuses tokens that are easy to guess.
func checkMCPListen(addr, token string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("--http %q: want HOST:PORT, e.g. 127.0.0.1:8765", addr)
	}
	if token != "" && len(token) < minMCPTokenLength {
		return fmt.Sprintf("the token (--token or SCRATCHRUN_MCP_TOKEN) has %d characters; use at least %d, e.g. from `openssl rand -hex 32`", len(token), minMCPTokenLength)
	}
	if token == "" && !isLoopbackHost(host) {
		return fmt.Sprintf("--http %q listens beyond this machine and no token is set: anyone who can reach it could run code. "+
			"Set --token or SCRATCHRUN_MCP_TOKEN, or listen on 127.0.0.1", addr)
	}
	return ""
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// mcpService returns the Service the tool runs code with: a remote server's
// client when SCRATCHRUN_API_KEY is set, else the local engine. redact lists
// what must never be shown; closeService releases the backend.
func mcpService(log *slog.Logger) (svc execapi.Service, redact []string, closeService func(), err error) {
	if key := os.Getenv("SCRATCHRUN_API_KEY"); key != "" {
		base := os.Getenv("SCRATCHRUN_API_URL")
		if base == "" {
			base = remote.DefaultURL
		}
		u, perr := url.Parse(base)
		if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, nil, nil, fmt.Errorf("%w: SCRATCHRUN_API_URL=%q: want a URL such as %s", errMCPUsage, base, remote.DefaultURL)
		}
		log.Debug("mcp: running code on a remote server", "url", u.Redacted())
		return remote.New(base, key, httpapi.ClientBounds{}), []string{key}, func() {}, nil
	}
	eng, err := newEngine(log, engineOverrides{})
	if err != nil {
		return nil, nil, nil, err
	}
	closeEngine := func() {
		if err := eng.Close(); err != nil {
			log.Warn("mcp: closing the engine", "err", err)
		}
	}
	return eng, nil, closeEngine, nil
}

func serveMCPStdio(ctx context.Context, svc execapi.Service, opts mcpserver.Options) int {
	server, err := mcpserver.New(ctx, svc, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun mcp: %v\n", err)
		return exitInternal
	}
	// Run returns when the client closes stdin (its way to stop us) or ctx
	// ends; calls still in flight are then cancelled by the caller.
	if err := server.Run(ctx, mcpserver.Transport(&mcp.StdioTransport{})); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "scratchrun mcp: %v\n", err)
		return exitInternal
	}
	return 0
}

// serveMCPHTTP serves the tool at /mcp on the same bounded server as
// `scratchrun serve` (connection cap, body deadline, early close), behind
// the same Origin check: MCP's Streamable HTTP transport requires servers to
// validate Origin, and the SDK only checks Host.
func serveMCPHTTP(ctx context.Context, stop context.CancelFunc, addr, token string, limits httpapi.ConnLimits, svc execapi.Service, opts mcpserver.Options) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun mcp: --http %s: %v\n", addr, err)
		return exitInternal
	}
	handler := mcpserver.HTTPHandler(svc, opts)
	guard := "no token: loopback only"
	if token != "" {
		handler = auth.RequireBearerToken(tokenVerifier(token), &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(handler)
		guard = "bearer token required"
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", handler)
	srv, bounded := httpapi.NewBoundedServer(ln, httpapi.GuardOrigin(mux, ln.Addr(), addr), limits,
		slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug))
	fmt.Fprintf(os.Stderr, "scratchrun mcp: serving MCP (Streamable HTTP) at http://%s/mcp (%s)\n", ln.Addr(), guard)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(bounded) }()
	status := 0
	select {
	case <-ctx.Done():
	case err := <-served:
		fmt.Fprintf(os.Stderr, "scratchrun mcp: %v\n", err)
		status = exitInternal
	}
	stop()
	// Event streams stay open until closed: give plain requests a moment,
	// then close whatever is left.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close()
	}
	return status
}

// tokenVerifier accepts exactly token, compared in constant time. Every
// holder of the token is the same caller.
func tokenVerifier(token string) auth.TokenVerifier {
	return func(_ context.Context, got string, _ *http.Request) (*auth.TokenInfo, error) {
		if subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: "mcp-token"}, nil
	}
}

// trackedService cancels every run when base ends and lets shutdown wait
// until their sandboxes are gone.
type trackedService struct {
	execapi.Service
	base context.Context
	wg   sync.WaitGroup
}

func (s *trackedService) Exec(ctx context.Context, req execapi.Request, events execapi.EventSink) (execapi.Result, error) {
	s.wg.Add(1)
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	unhook := context.AfterFunc(s.base, cancel)
	defer unhook()
	return s.Service.Exec(ctx, req, events)
}

// wait reports whether every run ended within timeout.
func (s *trackedService) wait(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}
