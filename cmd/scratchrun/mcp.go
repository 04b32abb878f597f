package main

import (
	"context"
	"crypto/subtle"
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

	"github.com/scratchrun/scratchrun/internal/buildinfo"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/mcpserver"
	"github.com/scratchrun/scratchrun/internal/mcpserver/remote"
	"github.com/scratchrun/scratchrun/internal/settings"
)

// minMCPTokenLength keeps a token that guards code execution from being
// guessable.
const minMCPTokenLength = 16

// cmdMCP serves the scratchrun_exec MCP tool: over stdio by default (stdout
// is the protocol stream, so everything else goes to stderr), or over
// Streamable HTTP with --http. Code runs in the embedded engine, or on a
// remote server when SCRATCHRUN_API_KEY is set; with SCRATCHRUN_API_URL and
// no key, stdio is forwarded to the server's /mcp, signed in with OAuth.
func cmdMCP(args []string) int {
	c, code, ok := parseMCP(args)
	if !ok {
		return code
	}
	log := newLogger(c.debug)
	if c.signIn {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runMCPOAuth(ctx, c.oauth, log)
	}
	svc, redact, closeService, err := mcpService(c, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun mcp: %v\n", err)
		return exitInternal
	}
	defer closeService()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	runs := &trackedService{Service: svc, base: ctx}
	served := withSessions(runs, svc)
	opts := c.sessions.apply(mcpserver.Options{Logger: log, Version: buildinfo.Get().Version, Redact: append(redact, c.token)})

	var status int
	if c.http != "" {
		status = serveMCPHTTP(ctx, stop, c.http, c.token, c.conns, served, opts)
	} else {
		status = serveMCPStdio(ctx, served, opts)
	}
	// Whatever ended the server (stdin closed, a signal), runs still in
	// flight have nobody to answer: kill their sandboxes and wait for the
	// teardown (the drain allowance) before the process (and the backend)
	// goes away.
	stop()
	if !runs.wait(httpapi.DrainAllowance) {
		fmt.Fprintln(os.Stderr, "scratchrun mcp: runs were still tearing down at exit")
		status = exitInternal
	}
	return status
}

// mcpConfig is `scratchrun mcp` as its flags and environment describe it.
type mcpConfig struct {
	http, token    string
	conns          httpapi.ConnLimits
	sessions       mcpSessions
	debug          bool
	apiKey, apiURL string
	// local is the engine's when no API key sends code elsewhere.
	local mcpLocal
	// signIn: SCRATCHRUN_API_URL without a key, a proxy to its /mcp that
	// signs in with OAuth (oauth).
	signIn bool
	oauth  mcpOAuth
}

const mcpHelp = `usage: scratchrun mcp [--http ADDR [--token TOKEN] [--max-conns N]]

Serves the MCP tool scratchrun_exec. Without --http it speaks MCP on stdin and
stdout, as desktop clients expect ({"command": "scratchrun", "args": ["mcp"]}).

` + mcpBackendHelp + `
flags:
`

// parseMCP reads mcp's command line and environment. When it returns
// false the command ends with code (0 after -h).
func parseMCP(args []string) (mcpConfig, int, bool) {
	var c mcpConfig
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	set := withSettings(fs, mcpHelp, mcpSettings)
	if code, ok := parseFlagsOnly(fs, args, mcpUsageError); !ok {
		return c, code, false
	}
	v, code, ok := resolveSettings(set, mcpUsageError)
	if !ok {
		return c, code, false
	}
	c.http, c.token, c.debug = v.String(settings.MCPHTTP), v.String(settings.MCPToken), v.Bool(settings.Debug)
	if c.http == "" && v.From(settings.MCPToken) == settings.FromFlag {
		return c, mcpUsageError("--token only applies with --http (stdio has no network to guard)"), false
	}
	if c.http != "" {
		if msg := checkMCPListen(c.http, c.token); msg != "" {
			return c, mcpUsageError(msg), false
		}
		c.conns = httpapi.ConnLimits{MaxConns: v.Int(settings.MaxConns)}
		c.sessions = parseMCPSessions(v)
	}
	if c.apiKey = v.String(settings.APIKey); c.apiKey != "" {
		c.apiURL = firstNonEmpty(v.String(settings.APIURL), remote.DefaultURL)
		return c, 0, true
	}
	if v.IsSet(settings.APIURL) {
		// A server and no key: sign in to its /mcp with OAuth.
		if c.http != "" {
			return c, mcpUsageError("--http serves the local engine or forwards with SCRATCHRUN_API_KEY; " +
				"signing in with OAuth (SCRATCHRUN_API_URL without a key) is for stdio"), false
		}
		var err error
		if c.oauth, err = parseMCPOAuth(v); err != nil {
			return c, mcpUsageError(err.Error()), false
		}
		c.signIn = true
		return c, 0, true
	}
	var err error
	if c.local, err = parseMCPLocal(v); err != nil {
		return c, mcpUsageError(err.Error()), false
	}
	return c, 0, true
}

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
func mcpService(c mcpConfig, log *slog.Logger) (svc execapi.Service, redact []string, closeService func(), err error) {
	if c.apiKey != "" {
		if u, err := url.Parse(c.apiURL); err == nil {
			log.Debug("mcp: running code on a remote server", "url", u.Redacted())
		}
		return remote.New(c.apiURL, c.apiKey), []string{c.apiKey}, func() {}, nil
	}
	svc, closeService, err = c.local.open(log)
	return svc, nil, closeService, err
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
