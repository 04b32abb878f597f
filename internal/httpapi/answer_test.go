package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// AnswerError is the one mapping of errors to answers: every kind of error
// a call can end in, with the status, document and headers it gets.
func TestAnswerError(t *testing.T) {
	lost := &execapi.WorkerLostError{Worker: "worker-b", Why: "restarted"}
	invalid := &execapi.ValidationError{Field: "limits.timeout_ms", Message: "at most 30000"}
	for _, c := range []struct {
		name string
		err  error
		want ErrorAnswer
	}{
		{"at capacity", &execapi.Refusal{Reason: execapi.RefusedAtCapacity, RetryAfter: 1500 * time.Millisecond},
			ErrorAnswer{Status: 429, RetryAfter: 2, Doc: ErrorDocument{ErrorDetail{Code: execapi.CodeAtCapacity, Reason: "at_capacity"}}}},
		{"key rate", fmt.Errorf("gate: %w", &execapi.Refusal{Reason: execapi.RefusedKeyRate, RetryAfter: 20 * time.Second, Limit: 5}),
			ErrorAnswer{Status: 429, RetryAfter: 20, Doc: ErrorDocument{ErrorDetail{Code: execapi.CodeRateLimited, Reason: "key_rate", Limit: 5}}}},
		{"draining", &execapi.Refusal{Reason: execapi.RefusedDraining},
			ErrorAnswer{Status: 503, Close: true, Doc: ErrorDocument{ErrorDetail{Code: execapi.CodeDraining, Reason: "draining"}}}},
		{"no workers", &execapi.Refusal{Reason: execapi.RefusedNoWorkers, RetryAfter: time.Second},
			ErrorAnswer{Status: 503, RetryAfter: 1, Doc: ErrorDocument{ErrorDetail{Code: execapi.CodeNoWorkers, Reason: "no_workers"}}}},
		{"unknown runtime", &execapi.Refusal{Reason: execapi.RefusedUnknownRuntime, Field: "runtime", Detail: "installed: bash"},
			ErrorAnswer{Status: 400, Doc: ErrorDocument{ErrorDetail{Code: execapi.CodeInvalidRequest, Reason: "unknown_runtime", Field: "runtime"}}}},
		{"worker lost", fmt.Errorf("forward: %w", lost),
			ErrorAnswer{Status: 502, Doc: ErrorDocument{ErrorDetail{Code: execapi.CodeWorkerLost, Message: lost.Error()}}}},
		{"invalid", fmt.Errorf("check: %w", invalid),
			ErrorAnswer{Status: 400, Doc: ErrorDocument{ErrorDetail{Code: execapi.CodeInvalidRequest, Message: invalid.Error(), Field: invalid.Field}}}},
		{"unauthorized", errUnauthorized,
			ErrorAnswer{Status: 401, Doc: ErrorDocument{ErrorDetail{Code: CodeUnauthorized, Message: errUnauthorized.Error()}}}},
		{"shut down", &shutDownError{context.Canceled},
			ErrorAnswer{Status: 503, Close: true, Doc: ErrorDocument{ErrorDetail{Code: execapi.CodeDraining}}}},
		// A cancellation the server did not cause is no shutdown.
		{"cancelled", context.Canceled,
			ErrorAnswer{Status: 500, Doc: ErrorDocument{ErrorDetail{Code: execapi.CodeInternal, Message: "the run failed: context canceled"}}}},
		{"internal", errors.New("no space left"),
			ErrorAnswer{Status: 500, Doc: ErrorDocument{ErrorDetail{Code: execapi.CodeInternal, Message: "the run failed: no space left"}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := AnswerError(c.err)
			if c.want.Doc.Error.Message == "" {
				// Refusals and shutdowns are in their own one wording.
				c.want.Doc.Error.Message = got.Doc.Error.Message
				var r *execapi.Refusal
				if errors.As(c.err, &r) && got.Doc.Error.Message != r.Error() || got.Doc.Error.Message == "" {
					t.Errorf("message %q", got.Doc.Error.Message)
				}
			}
			got.err = nil
			if got != c.want {
				t.Errorf("answer %+v, want %+v", got, c.want)
			}
		})
	}
}

// A run the server cancels as it gives up draining is answered as a
// shutdown (503 draining, the connection closed) over the API and to the
// gate's other callers (the console), which still see a cancellation.
func TestAbortedRunsAnswerAsShutDown(t *testing.T) {
	fake, release := holding()
	defer release()
	ts := startServer(t, serverOptions{fake: fake})
	rest := make(chan answer, 1)
	go func() {
		a, _ := ts.do(context.Background(), http.MethodPost, "/v1/exec", "", strings.NewReader(holdBody), nil)
		rest <- a
	}()
	gated := make(chan error, 1)
	go func() {
		_, err := ts.srv.Service().Exec(context.Background(), execapi.Request{Runtime: "bash", Code: "hold"}, nil)
		gated <- err
	}()
	waitFor(t, "both runs", func() bool { return fake.InFlight() == 2 })
	ts.cancel()
	waitFor(t, "draining", func() bool { return ts.srv.drain.isDraining() })
	ts.srv.Abort()
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
	if a := <-rest; a.status != http.StatusServiceUnavailable || a.errorBody(t).Code != execapi.CodeDraining || !a.closed {
		t.Errorf("the API's answer: %d %s (closed %v)", a.status, a.body, a.closed)
	}
	err := <-gated
	if a := AnswerError(err); a.Status != http.StatusServiceUnavailable || a.Doc.Error.Code != execapi.CodeDraining || !errors.Is(err, context.Canceled) {
		t.Errorf("the gate's error %v answers %+v", err, a)
	}
}
