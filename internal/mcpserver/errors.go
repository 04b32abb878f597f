package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// ToolError is an error whose Message is shown to the model as it is. An
// adapter whose transport failed in ways of its own (a remote server that
// cannot be reached, or that refused its API key) returns one from its
// Service; Err keeps the cause for errors.Is and errors.As. Refusals are no
// ToolError: they come as the contract's *execapi.Refusal, which this
// package words itself.
type ToolError struct {
	Message string
	Err     error
}

func (e *ToolError) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *ToolError) Unwrap() error { return e.Err }

// toolError is a result with isError set: the model sees the message and can
// correct itself, which a protocol error would not allow.
func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// execErrorMessage says, in words a model can act on, why a call produced
// no result. A refusal is in its own words (execapi.Refusal.Error, as the
// HTTP API answers it). Secrets in Options.Redact never reach it.
func (t *tool) execErrorMessage(err error) string {
	var v *execapi.ValidationError
	var te *ToolError
	var refusal *execapi.Refusal
	var lost *execapi.WorkerLostError
	switch {
	case errors.As(err, &te):
		return t.opts.redact(te.Message)
	case errors.As(err, &lost):
		return lostMessage(lost)
	case errors.As(err, &v):
		field := toolField(v.Field)
		msg := fmt.Sprintf("Invalid argument %s: %s", field, v.Message)
		if field == "runtime" && !strings.Contains(msg, "installed runtimes") {
			msg += t.runtimeHint()
		}
		return t.opts.redact(msg)
	case errors.As(err, &refusal):
		return refusalMessage(refusal)
	case errors.Is(err, context.Canceled):
		return "The call was cancelled; its sandbox was killed."
	case errors.Is(err, context.DeadlineExceeded):
		return "The call's deadline passed; its sandbox was killed."
	default:
		return t.opts.redact("ScratchRun could not run the code: " + err.Error())
	}
}

// runtimeHint lists the installed runtimes when the Service's own message
// might not (a remote server's wording is not ours).
func (t *tool) runtimeHint() string {
	info, described, _ := t.snapshot()
	if !described || len(info.Runtimes) == 0 {
		return ""
	}
	return fmt.Sprintf(" (installed runtimes: %s)", strings.Join(runtimeNames(info), ", "))
}

// lostMessage is how the tool shows a call lost with its worker: its one
// wording (execapi.WorkerLostError), as a sentence.
func lostMessage(e *execapi.WorkerLostError) string {
	words := e.Error()
	return strings.ToUpper(words[:1]) + words[1:] + "."
}

// refusalMessage is how the tool shows a refusal: its one wording, framed
// as what happened to the call.
func refusalMessage(r *execapi.Refusal) string {
	return "ScratchRun refused the call: " + r.Error() + "."
}
