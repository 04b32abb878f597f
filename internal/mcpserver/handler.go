package mcpserver

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// handle is the scratchrun_exec tool handler. Bad arguments and failures
// that left no result become tool errors (isError), never protocol errors,
// so that the model can read them and correct itself.
func (t *tool) handle(ctx context.Context, call *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	req, err := argsToRequest(call.Params.Arguments)
	if err != nil {
		return toolError(t.execErrorMessage(err)), nil
	}
	// A Service that could not describe itself at start (a remote server
	// that was down) may be back; its answer re-announces the tool.
	if _, described, _ := t.snapshot(); !described {
		t.refresh(ctx, true)
	}
	if call.Extra != nil && call.Extra.TokenInfo != nil && call.Extra.TokenInfo.UserID != "" {
		ctx = execapi.WithCaller(ctx, call.Extra.TokenInfo.UserID)
	}

	var progress *progressReporter
	var sink execapi.EventSink
	if token := call.Params.GetProgressToken(); token != nil && call.Session != nil {
		progress = startProgress(ctx, call.Session, token, t.opts.ProgressInterval, t.effectiveTimeout(req))
		sink = progress.observe
	}
	// ctx is the request's: a client's notifications/cancelled (or a closed
	// session) cancels it, and the Service kills the sandbox at once.
	res, err := t.svc.Exec(ctx, req, sink)
	if progress != nil {
		progress.stop()
	}
	if err != nil {
		switch {
		case execapi.IsValidation(err):
			// The runtime list may have changed under us (images built or
			// pruned): let the next tools/list show the current one.
			t.refresh(ctx, true)
		case ctx.Err() != nil:
			// The client cancelled (or went away): nothing failed, and the
			// transport drops this answer (see Transport).
			t.log.Debug("mcp: call cancelled", "runtime", req.Runtime)
		default:
			t.log.Warn("mcp: exec failed", "runtime", req.Runtime, "err", t.opts.redact(err.Error()))
		}
		return toolError(t.execErrorMessage(err)), nil
	}
	return t.buildResult(res), nil
}

// effectiveTimeout is the wall-clock limit the run will get, for progress
// messages.
func (t *tool) effectiveTimeout(req execapi.Request) time.Duration {
	if req.Limits.TimeoutMS > 0 {
		return time.Duration(req.Limits.TimeoutMS) * time.Millisecond
	}
	info, _, _ := t.snapshot()
	return time.Duration(info.DefaultTimeoutMS) * time.Millisecond
}
