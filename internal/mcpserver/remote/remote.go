// Package remote is the Service `scratchrun mcp` holds when SCRATCHRUN_API_KEY
// is set: the public Go client (package client) of a ScratchRun server as
// the contract's execapi.Service (runs streamed, so that the tool's progress
// shows the server's output), with what can go wrong on the way worded as
// tool errors a model and its user can act on — an invalid key, a server
// that cannot be reached (named by its URL).
// The server's own refusals (a rate limit, say) are the contract's
// *execapi.Refusal and pass through unchanged, as the tool words them for
// the local engine too.
//
// It lives apart from package mcpserver because the HTTP server mounts
// mcpserver; it must never put the API key into an error.
package remote

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"

	"github.com/scratchrun/scratchrun/client"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/mcpserver"
)

// DefaultURL is where `scratchrun serve` listens by default.
const DefaultURL = client.DefaultURL

// Service runs requests on a remote ScratchRun server.
type Service struct {
	client *client.Client
	// shown is the server's URL as errors name it (any password hidden).
	shown string
}

var _ execapi.Service = (*Service)(nil)

// New returns a Service for the server at baseURL, authenticating with
// apiKey, with the client's options (their defaults bound connecting, and
// every call by what the server may take by its own limits plus a margin,
// so that a server that accepts and then never answers fails the call
// instead of hanging it; a long run is not cut short). Refusals are not
// retried here (whatever opts say): the tool tells the model, which
// decides, as it does for the local engine's.
func New(baseURL, apiKey string, opts ...client.Option) *Service {
	shown := strings.TrimRight(baseURL, "/")
	if u, err := url.Parse(shown); err == nil {
		shown = u.Redacted()
	}
	opts = append(opts, client.WithoutRetries())
	return &Service{client: client.New(baseURL, apiKey, opts...), shown: shown}
}

// Exec implements execapi.Executor. With an event sink the run is
// streamed (client.Stream), so that the tool's progress shows the server's
// sandbox starting and its output as it is written; a server that does not
// stream answers at the end, and events then only hears
// execapi.EventSubmitted, as the request goes out.
func (s *Service) Exec(ctx context.Context, req execapi.Request, events execapi.EventSink) (execapi.Result, error) {
	if events == nil {
		res, err := s.client.Run(ctx, req)
		if err != nil {
			return execapi.Result{}, s.explain(ctx, err)
		}
		return contractResult(res), nil
	}
	events(execapi.Event{Kind: execapi.EventSubmitted})
	for ev, err := range s.client.Stream(ctx, req) {
		if err != nil {
			return execapi.Result{}, s.explain(ctx, err)
		}
		switch ev.Kind {
		case client.EventStarted:
			events(execapi.Event{Kind: execapi.EventStarted, Elapsed: ev.Elapsed})
		case client.EventStdout:
			events(execapi.Event{Kind: execapi.EventStdout, Data: []byte(ev.Text)})
		case client.EventStderr:
			events(execapi.Event{Kind: execapi.EventStderr, Data: []byte(ev.Text)})
		case client.EventResult:
			return contractResult(*ev.Result), nil
		}
	}
	// Stream yields a result or an error last; this is a defect's guard.
	return execapi.Result{}, s.explain(ctx, errors.New("the server's stream ended without a result"))
}

// Describe implements execapi.Service.
func (s *Service) Describe(ctx context.Context) (execapi.Info, error) {
	info, err := s.client.Runtimes(ctx)
	return info, s.explain(ctx, err)
}

// contractResult is the client's result as the contract has it: returned
// files in base64, as on the wire.
func contractResult(r client.Result) execapi.Result {
	files := make(map[string]string, len(r.Files))
	for p, data := range r.Files {
		files[p] = base64.StdEncoding.EncodeToString(data)
	}
	return execapi.Result{ExitCode: r.ExitCode, Stdout: r.Stdout, Stderr: r.Stderr, ExecutionMS: r.ExecutionMS,
		StatePurged: r.StatePurged, Files: files, Note: r.Note, Outcome: r.Outcome, Facts: r.Facts}
}

// explain words what went wrong on the way to the server for the model.
// The contract's errors come back as the server had them (the client's
// *client.APIError unwraps to them): a *execapi.Refusal and a
// *execapi.WorkerLostError as themselves, a *execapi.ValidationError
// within the answer; cancellation passes through unchanged.
func (s *Service) explain(ctx context.Context, err error) error {
	var refusal *execapi.Refusal
	var lost *execapi.WorkerLostError
	switch {
	case err == nil || ctx.Err() != nil:
		return err
	case errors.As(err, &lost):
		return lost
	case errors.As(err, &refusal):
		return refusal
	case execapi.IsValidation(err):
		return err
	}
	var ae *client.APIError
	if !errors.As(err, &ae) {
		return &mcpserver.ToolError{Err: err, Message: fmt.Sprintf(
			"Cannot reach the ScratchRun server at %s (%v). Check that it is running and that SCRATCHRUN_API_URL is right.", s.shown, err)}
	}
	var msg string
	switch ae.Status {
	case http.StatusUnauthorized:
		msg = fmt.Sprintf("invalid API key: the ScratchRun server at %s rejected the key in SCRATCHRUN_API_KEY. "+
			"Check the key (the server's operator can list keys with `scratchrun keys list`).", s.shown)
	case http.StatusForbidden:
		msg = fmt.Sprintf("The ScratchRun server at %s does not allow this API key to run code: %s", s.shown, ae.Message)
	default:
		msg = fmt.Sprintf("The ScratchRun server at %s answered %d %s: %s", s.shown, ae.Status, ae.Code, ae.Message)
		if ae.RetryAfter > 0 {
			msg += fmt.Sprintf(" (Retry-After: %d s)", int(math.Ceil(ae.RetryAfter.Seconds())))
		}
	}
	return &mcpserver.ToolError{Err: err, Message: msg}
}
