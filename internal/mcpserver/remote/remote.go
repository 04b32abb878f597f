// Package remote is the Service `scratchrun mcp` holds when SCRATCHRUN_API_KEY
// is set: the HTTP client of a ScratchRun server (package httpapi), with what
// can go wrong on the way worded as tool errors a model and its user can act
// on — an invalid key, a server that cannot be reached (named by its URL).
// The server's own refusals (a rate limit, say) are the contract's
// *execapi.Refusal and pass through unchanged, as the tool words them for
// the local engine too.
//
// It lives apart from package mcpserver because the HTTP server mounts
// mcpserver; it must never put the API key into an error.
package remote

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/mcpserver"
)

// DefaultURL is where `scratchrun serve` listens by default.
const DefaultURL = "http://127.0.0.1:8722"

// Service runs requests on a remote ScratchRun server.
type Service struct {
	client *httpapi.Client
	// shown is the server's URL as errors name it (any password hidden).
	shown string
}

var _ execapi.Service = (*Service)(nil)

// New returns a Service for the server at baseURL, authenticating with
// apiKey, within bounds (zero: httpapi's defaults): connecting is bounded,
// and so is every call, by what the server may take by its own limits
// (a run's timeout and queue wait) plus bounds.Margin, so that a server
// that accepts and then never answers fails the call instead of hanging
// it; a long run is not cut short.
func New(baseURL, apiKey string, bounds httpapi.ClientBounds) *Service {
	shown := strings.TrimRight(baseURL, "/")
	if u, err := url.Parse(shown); err == nil {
		shown = u.Redacted()
	}
	return &Service{client: httpapi.NewBoundedClient(baseURL, apiKey, nil, bounds), shown: shown}
}

// Exec implements execapi.Executor.
func (s *Service) Exec(ctx context.Context, req execapi.Request, events execapi.EventSink) (execapi.Result, error) {
	res, err := s.client.Exec(ctx, req, events)
	return res, s.explain(ctx, err)
}

// Describe implements execapi.Service.
func (s *Service) Describe(ctx context.Context) (execapi.Info, error) {
	info, err := s.client.Describe(ctx)
	return info, s.explain(ctx, err)
}

// explain words what went wrong on the way to the server for the model. The
// contract's errors (a *execapi.Refusal, a *execapi.ValidationError) pass
// through unchanged, as does cancellation.
func (s *Service) explain(ctx context.Context, err error) error {
	var refusal *execapi.Refusal
	if err == nil || execapi.IsValidation(err) || errors.As(err, &refusal) || ctx.Err() != nil {
		return err
	}
	var ae *httpapi.APIError
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
