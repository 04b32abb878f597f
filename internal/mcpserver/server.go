package mcpserver

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// ToolName is the name of the tool that runs code in a fresh sandbox (the
// one tool offered while sessions are off).
const ToolName = "scratchrun_exec"

// Defaults of Options.
const (
	// DefaultMaxResultBytes keeps a whole tool result (its JSON) below the
	// 1 MiB that Claude Desktop accepts, with room for the JSON-RPC envelope.
	DefaultMaxResultBytes = 900 << 10
	// DefaultMaxOutputBytes bounds stdout and stderr, each, in a result. Both
	// appear twice (text block and structuredContent), so together they take
	// at most 128 KiB and leave room for images; and a text block of at most
	// 64 KiB (about 16k tokens) stays below Claude Code's default 25k-token
	// limit on a tool result.
	DefaultMaxOutputBytes = 32 << 10
	// DefaultProgressInterval is how often a run in flight reports progress.
	DefaultProgressInterval = time.Second
	// DefaultDescribeTimeout bounds one Describe call (a remote server that
	// hangs must not hang tools/list).
	DefaultDescribeTimeout = 10 * time.Second
	// describeRefresh is how old the runtime list may get before tools/list
	// asks the Service again (new images may have been installed).
	describeRefresh = 30 * time.Second
)

// Options configure the MCP server. The zero value is usable.
type Options struct {
	// Logger receives operational logs (never code, env values or keys).
	// Nil discards them.
	Logger *slog.Logger
	// Version is reported to clients as the server implementation's version.
	Version string
	// MaxResultBytes bounds the JSON of one tool result; 0 means
	// DefaultMaxResultBytes. Larger images are scaled down and larger files
	// and output cut to fit, and the result says so.
	MaxResultBytes int
	// MaxOutputBytes bounds stdout and stderr, each, in a result; 0 means
	// DefaultMaxOutputBytes.
	MaxOutputBytes int
	// ProgressInterval is how often progress notifications are sent while
	// code runs (only to clients that sent a progress token); 0 means
	// DefaultProgressInterval.
	ProgressInterval time.Duration
	// DescribeTimeout bounds each Describe call; 0 means DefaultDescribeTimeout.
	DescribeTimeout time.Duration
	// SessionTimeout closes Streamable HTTP sessions that had no POST for
	// this long (so that abandoned sessions give their place back); 0
	// means DefaultSessionTimeout. Clients start a new session
	// transparently.
	SessionTimeout time.Duration
	// MaxSessions bounds the Streamable HTTP sessions open at once on
	// this handler; one more is refused with 503 and a JSON-RPC error
	// naming the limit. 0 means DefaultMaxSessions.
	MaxSessions int
	// MaxSessionsPerCaller bounds the sessions one caller (a bearer
	// token's user: an API key) has open at once; one more is refused
	// with 429. Requests with no caller (a loopback server without
	// tokens) are bounded by MaxSessions alone. 0 means
	// DefaultMaxSessionsPerCaller.
	MaxSessionsPerCaller int
	// Redact lists strings, such as an API key, that must never appear in a
	// tool error or a log line: they are replaced with "[redacted]".
	Redact []string
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = DefaultMaxResultBytes
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = DefaultProgressInterval
	}
	if o.DescribeTimeout <= 0 {
		o.DescribeTimeout = DefaultDescribeTimeout
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.MaxSessionsPerCaller <= 0 {
		o.MaxSessionsPerCaller = DefaultMaxSessionsPerCaller
	}
	return o
}

// redact removes every configured secret from s.
func (o Options) redact(s string) string {
	for _, secret := range o.Redact {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	return s
}

// tool is the scratchrun_exec tool bound to one Service and one mcp.Server.
type tool struct {
	svc    execapi.Service
	opts   Options
	log    *slog.Logger
	server *mcp.Server
	// code backs the session tools; nil when sessions are off.
	code *codeSessions

	mu sync.Mutex
	// info is what the tool's schema and description were built from: the
	// Service's own answer, or a fallback while it cannot be reached.
	info execapi.Info
	// described says info came from the Service; describeErr says why not.
	described   bool
	describeErr string
	checked     time.Time
}

// New builds an MCP server offering scratchrun_exec over svc, and the
// code-session tools when svc holds sessions and has them on
// (codeSessionsOf). The tools' runtime enum, description and annotations
// come from svc.Describe(ctx).
//
// When Describe fails (a remote server that is down at start), New still
// succeeds: the tool is offered with a free-form runtime and a description
// that says the runtime list is unavailable, Describe is retried on every
// call and tools/list, and the tool is re-announced (tools/list_changed)
// once the Service answers. Calls meanwhile fail as tool errors that say why.
func New(ctx context.Context, svc execapi.Service, opts Options) (*mcp.Server, error) {
	if svc == nil {
		return nil, errors.New("mcpserver: no Service to run code with")
	}
	opts = opts.withDefaults()
	t := &tool{svc: svc, opts: opts, log: opts.Logger, code: codeSessionsOf(svc)}
	instructions := serverInstructions
	if t.code != nil {
		instructions += sessionsInstructions
	}
	t.server = mcp.NewServer(&mcp.Implementation{Name: "scratchrun", Title: "ScratchRun", Version: opts.Version},
		&mcp.ServerOptions{
			Logger:       opts.Logger,
			Instructions: instructions,
			// No logging capability: logs stay on the server's stderr.
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		})
	t.describe(ctx)
	t.install()
	t.server.AddReceivingMiddleware(t.refreshOnList)
	return t.server, nil
}

// HTTPHandler serves scratchrun_exec over MCP's Streamable HTTP transport.
// It has no authentication of its own: the caller wraps it (for example
// with auth.RequireBearerToken, whose TokenInfo.UserID becomes the caller
// recorded with execapi.WithCaller). DNS-rebinding protection for loopback
// listeners is the SDK's default and stays on; Origin is the caller's to
// check (httpapi.CheckOrigin). A response to a call the client cancelled is
// dropped, as for Transport.
//
// Sessions are bounded: per caller (Options.MaxSessionsPerCaller), in all
// (Options.MaxSessions), in idle time (Options.SessionTimeout), and, when
// svc is a SessionAdmitter, by what it admits (the server's gate spends a
// token of the key's rate on each); one beyond is refused with 429 or 503,
// Retry-After and a JSON-RPC error that names the limit.
func HTTPHandler(svc execapi.Service, opts Options) http.Handler {
	opts = opts.withDefaults()
	server, err := New(context.Background(), svc, opts)
	if err != nil {
		opts.Logger.Error("mcp handler unavailable", "err", err)
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "MCP server unavailable: "+err.Error(), http.StatusInternalServerError)
		})
	}
	admit, _ := svc.(SessionAdmitter)
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Logger: opts.Logger, SessionTimeout: opts.SessionTimeout})
	return newSessions(newCancelFilter(sdk), server, admit, opts)
}

const serverInstructions = "ScratchRun runs code in a fresh, isolated Linux sandbox per call " +
	"(tool scratchrun_exec). Nothing persists between calls: put everything one step needs into " +
	"one call, and ask for charts and data files back with return_files."

// describe asks the Service what it offers and reports whether the tool's
// definition has to change. On failure a previous answer is kept; without
// one the fallback stands and the error is remembered for the description.
func (t *tool) describe(ctx context.Context) (changed bool) {
	ctx, cancel := context.WithTimeout(ctx, t.opts.DescribeTimeout)
	defer cancel()
	info, err := t.svc.Describe(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.checked = time.Now()
	if err != nil {
		msg := t.opts.redact(err.Error())
		t.log.Warn("mcp: describing the executor failed", "err", msg)
		if t.described {
			return false
		}
		changed = !t.haveFallbackLocked() || t.describeErr != msg
		t.info, t.describeErr = fallbackInfo(), msg
		return changed
	}
	changed = !t.described || !reflect.DeepEqual(info, t.info)
	t.info, t.described, t.describeErr = info, true, ""
	return changed
}

func (t *tool) haveFallbackLocked() bool { return t.describeErr != "" }

// refresh re-describes when the last answer is missing or stale and
// re-announces the tool if it changed.
func (t *tool) refresh(ctx context.Context, force bool) {
	t.mu.Lock()
	fresh := t.described && time.Since(t.checked) < describeRefresh
	t.mu.Unlock()
	if fresh && !force {
		return
	}
	if t.describe(ctx) {
		t.install()
	}
}

// install (re)registers the tool from the current info; replacing a tool
// makes the SDK notify sessions with tools/list_changed.
//
// The tool is added with the untyped Server.AddTool and decodes its own
// arguments (argsToRequest), not with the typed mcp.AddTool and an argument
// struct: in go-sdk v1.8.0 the typed form validates the arguments against
// the input schema before the handler runs, in the schema validator's words
// ("validating \"arguments\": validating root: validating
// /properties/timeout_ms: minimum: 0/1 is less than 1000.000000" where the
// tool says "Invalid argument timeout_ms: is 0, which is below the minimum;
// omit the field to get the default"), after decoding into a map (a key
// given twice silently keeps its last value), and fills in the schema's
// defaults (so an omitted limit and an explicit one are no longer told
// apart). Checked when this was written, by adding the tool both ways.
func (t *tool) install() {
	t.mu.Lock()
	info, described, why := t.info, t.described, t.describeErr
	t.mu.Unlock()
	t.server.AddTool(toolDefinition(info, described, why, t.opts), t.handle)
	if t.code != nil {
		t.installSessionTools(info, described)
	}
}

// refreshOnList keeps the runtime enum current for clients that list tools.
func (t *tool) refreshOnList(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "tools/list" {
			t.refresh(ctx, false)
		}
		return next(ctx, method, req)
	}
}

// snapshot returns the info the tool currently describes.
func (t *tool) snapshot() (execapi.Info, bool, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.info, t.described, t.describeErr
}

// fallbackInfo is what the tool offers before the Service could describe
// itself: the contract's documented defaults, no network, no runtime list.
func fallbackInfo() execapi.Info { return execapi.DefaultPolicy().Info() }
