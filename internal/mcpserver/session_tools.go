package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// codeSessions is what the session tools run on: the Service as an
// execapi.SessionService (with the Policy its calls are checked against).
// These are code sessions (sandboxes kept across calls), bound to the
// caller's key, not the MCP transport sessions of sessions.go: a client
// that reconnects keeps its code sessions.
type codeSessions struct {
	svc    execapi.SessionService
	policy func() execapi.Policy
}

// codeSessionsOf returns the session tools' backing when svc holds
// sessions and its operator turned them on (SessionPolicy().Enabled, the
// --sessions switch), else nil: then no session tool is offered and the
// server's offer is byte for byte what it was before sessions existed.
func codeSessionsOf(svc execapi.Service) *codeSessions {
	ss, ok := svc.(execapi.SessionService)
	if !ok || !ss.SessionPolicy().Enabled {
		return nil
	}
	// The session tools validate before they call (the contract takes
	// checked requests), so they need the Policy the Service holds to;
	// only that, not ExecChecked: an HTTP server's gate has the Policy
	// and checks plain calls itself.
	ce, ok := svc.(interface{ Policy() execapi.Policy })
	if !ok {
		return nil
	}
	return &codeSessions{svc: ss, policy: ce.Policy}
}

// installSessionTools (re)registers the session tools from the current info.
func (t *tool) installSessionTools(info execapi.Info, described bool) {
	handlers := map[string]mcp.ToolHandler{
		SessionOpenToolName:  t.handleSessionOpen,
		SessionRunToolName:   t.handleSessionRun,
		SessionCloseToolName: t.handleSessionClose,
	}
	for _, def := range sessionToolDefinitions(info, described, t.code.svc.SessionPolicy()) {
		t.server.AddTool(def, handlers[def.Name])
	}
}

// callerContext records the caller (the bearer token's user, an API key)
// that code sessions are bound to.
func callerContext(ctx context.Context, call *mcp.CallToolRequest) context.Context {
	if call.Extra != nil && call.Extra.TokenInfo != nil && call.Extra.TokenInfo.UserID != "" {
		return execapi.WithCaller(ctx, call.Extra.TokenInfo.UserID)
	}
	return ctx
}

// handleSessionOpen is scratchrun_session_open.
func (t *tool) handleSessionOpen(ctx context.Context, call *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	req, err := argsToSessionRequest(call.Params.Arguments)
	if err != nil {
		return toolError(t.sessionErrorMessage(err)), nil
	}
	ctx = callerContext(ctx, call)
	checked, err := t.code.svc.SessionPolicy().ValidateSession(t.code.policy(), req)
	if err == nil {
		var info execapi.SessionInfo
		if info, err = t.code.svc.OpenSession(ctx, checked); err == nil {
			return sessionOpenResult(info), nil
		}
	}
	if !execapi.IsValidation(err) && ctx.Err() == nil {
		t.log.Warn("mcp: opening a session failed", "runtime", req.Runtime, "err", t.opts.redact(err.Error()))
	}
	return toolError(t.sessionErrorMessage(err)), nil
}

// handleSessionRun is scratchrun_session_run: scratchrun_exec's handling
// (progress, cancellation, the result's shape) in the session's sandbox.
func (t *tool) handleSessionRun(ctx context.Context, call *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id, req, err := argsToSessionCall(call.Params.Arguments)
	if err != nil {
		return toolError(t.sessionErrorMessage(err)), nil
	}
	ctx = callerContext(ctx, call)
	// One look-up (the session's settings, or the Service's words for why
	// it is gone: ended and how, lost with its worker, unknown), never a
	// list: a cluster's list asks every worker.
	info, err := t.code.svc.Session(ctx, execapi.SessionRef{ID: id})
	if err != nil {
		return toolError(t.sessionErrorMessage(err)), nil
	}
	checked, err := t.code.policy().ValidateInSession(req, info, nil)
	if err != nil {
		return toolError(t.sessionErrorMessage(err)), nil
	}
	var progress *progressReporter
	var sink execapi.EventSink
	if token := call.Params.GetProgressToken(); token != nil && call.Session != nil {
		progress = startProgress(ctx, call.Session, token, t.opts.ProgressInterval, checked.Timeout)
		sink = progress.observe
	}
	// ctx is the request's: a client's notifications/cancelled cancels it,
	// and the Service kills the call's processes.
	res, err := t.code.svc.ExecInSession(ctx, execapi.SessionRef{ID: id, Worker: info.Worker}, checked, sink)
	if progress != nil {
		progress.stop()
	}
	if err != nil {
		if ctx.Err() == nil && execapi.SessionErrorCode(err) == "" && !execapi.IsValidation(err) {
			t.log.Warn("mcp: session call failed", "runtime", checked.Runtime, "err", t.opts.redact(err.Error()))
		}
		return toolError(t.sessionErrorMessage(err)), nil
	}
	return t.sessionRunResult(res), nil
}

// handleSessionClose is scratchrun_session_close.
func (t *tool) handleSessionClose(ctx context.Context, call *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id, err := argsToSessionClose(call.Params.Arguments)
	if err != nil {
		return toolError(t.sessionErrorMessage(err)), nil
	}
	ctx = callerContext(ctx, call)
	// The Service finds the session's worker itself (a cluster's session
	// rows), and answers whether it ended, was lost or never was.
	end, err := t.code.svc.CloseSession(ctx, execapi.SessionRef{ID: id})
	if err != nil {
		return toolError(t.sessionErrorMessage(err)), nil
	}
	return sessionCloseResult(id, end), nil
}

// sessionErrorMessage says why a session tool produced no result: the
// contract's own words for a session that is unknown, ended or lost, and
// otherwise as scratchrun_exec says it.
func (t *tool) sessionErrorMessage(err error) string {
	var refusal *execapi.Refusal
	if code := execapi.SessionErrorCode(err); code != "" && !errors.As(err, &refusal) {
		return t.opts.redact(sentence(err.Error()) + " (" + code + ")")
	}
	return t.execErrorMessage(err)
}

// sentence starts s with a capital and ends it with a full stop.
func sentence(s string) string {
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// stamp writes a time as results show it.
func stamp(at time.Time) string { return at.UTC().Format(time.RFC3339) }

// sessionOpened is scratchrun_session_open's structuredContent.
type sessionOpened struct {
	SessionID      string `json:"session_id"`
	ExpiresAt      string `json:"expires_at"`
	LifetimeEndsAt string `json:"lifetime_ends_at"`
	Runtime        string `json:"runtime"`
	Network        string `json:"network"`
	MemoryMB       int    `json:"memory_mb"`
	IdleTTLMS      int64  `json:"idle_ttl_ms"`
	Interpreter    string `json:"interpreter"`
	Persists       string `json:"persists"`
}

func sessionOpenResult(info execapi.SessionInfo) *mcp.CallToolResult {
	so := sessionOpened{SessionID: info.ID, ExpiresAt: stamp(info.ExpiresAt), LifetimeEndsAt: stamp(info.LifetimeEndsAt),
		Runtime: info.Runtime, Network: info.Network, MemoryMB: info.Limits.MemoryMB, IdleTTLMS: info.IdleTTLMS,
		Interpreter: info.Interpreter, Persists: persistsSentence(info.Interpreter)}
	text := fmt.Sprintf("session_id: %s\nexpires_at: %s (%s after its last call)\nlifetime_ends_at: %s\n"+
		"runtime: %s, network %s, memory %d MB for the whole session\npersists between calls: %s\n"+
		"Run code in it with %s; close it with %s when done.",
		so.SessionID, so.ExpiresAt, words(time.Duration(info.IdleTTLMS)*time.Millisecond), so.LifetimeEndsAt,
		so.Runtime, so.Network, so.MemoryMB, so.Persists, SessionRunToolName, SessionCloseToolName)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: so}
}

// sessionRunStructured is scratchrun_session_run's structuredContent:
// scratchrun_exec's, and the session's account.
type sessionRunStructured struct {
	structuredResult
	Session sessionCallReport `json:"session"`
}

// sessionCallReport is what a call in a session says of the session.
type sessionCallReport struct {
	SessionID   string `json:"session_id"`
	ExpiresAt   string `json:"expires_at"`
	Interpreter string `json:"interpreter,omitempty"`
	Ended       bool   `json:"ended"`
}

// sessionRunResult is scratchrun_exec's result (buildResult: images as
// image content, sizes fitted) with the session's account added to the
// text block and structuredContent.
func (t *tool) sessionRunResult(res execapi.SessionResult) *mcp.CallToolResult {
	out := t.buildResult(res.Result)
	report := sessionCallReport{SessionID: res.Session.ID, ExpiresAt: stamp(res.Session.ExpiresAt),
		Interpreter: res.Session.Interpreter, Ended: res.Session.Ended != nil}
	if sr, ok := out.StructuredContent.(structuredResult); ok {
		out.StructuredContent = sessionRunStructured{structuredResult: sr, Session: report}
	}
	var head strings.Builder
	fmt.Fprintf(&head, "session_id: %s\n", report.SessionID)
	if report.Ended {
		head.WriteString("session: ended with this call (see note); open a new one\n")
	} else {
		fmt.Fprintf(&head, "session_expires_at: %s\n", report.ExpiresAt)
	}
	if report.Interpreter != "" {
		fmt.Fprintf(&head, "interpreter: %s\n", report.Interpreter)
	}
	if tc, ok := out.Content[0].(*mcp.TextContent); ok {
		tc.Text = head.String() + tc.Text
	}
	return out
}

// sessionClosed is scratchrun_session_close's structuredContent.
type sessionClosed struct {
	SessionID   string `json:"session_id"`
	StatePurged bool   `json:"state_purged"`
	Reason      string `json:"reason"`
}

func sessionCloseResult(id string, end execapi.SessionEnd) *mcp.CallToolResult {
	sc := sessionClosed{SessionID: id, StatePurged: end.StatePurged, Reason: string(end.Reason)}
	text := fmt.Sprintf("Session %s closed: its sandbox and everything in it are gone.\nstate_purged: %t", id, sc.StatePurged)
	if !sc.StatePurged {
		text += " (the teardown could not be verified)"
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: sc}
}
