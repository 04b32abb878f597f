package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// ErrorAnswer is how the server answers a call that produced no result:
// the status, the error document and the headers that go with them. It is
// made in one place (AnswerError) for every front end that answers over
// HTTP, so that the API and the console's playground never disagree about
// an error.
type ErrorAnswer struct {
	// Status is the HTTP status.
	Status int
	// Doc is the error document.
	Doc ErrorDocument
	// RetryAfter is the Retry-After header in whole seconds; zero for none.
	// A lost worker's call has none: it may have run, and a Retry-After
	// would invite a blind retry.
	RetryAfter int
	// Close asks that the connection be closed after the answer: the
	// server is going away.
	Close bool

	// err is the error answered, for Log.
	err error
}

// AnswerError is the answer to the error of a call (the gate's, the
// engine's or a cluster's): a refusal with its status, reason and
// Retry-After; a session's error with its own (sessionAnswer); a lost
// worker 502; a bad request 400 naming its field; an
// unknown or revoked key 401; a run the server cut short as it shut down
// 503; anything else 500.
func AnswerError(err error) ErrorAnswer {
	var refusal *execapi.Refusal
	var lost *execapi.WorkerLostError
	var shut *shutDownError
	switch {
	case errors.As(err, &refusal):
		return refusalAnswer(refusal)
	case execapi.SessionErrorCode(err) != "":
		return sessionAnswer(err, execapi.SessionErrorCode(err))
	case errors.As(err, &lost):
		return ErrorAnswer{Status: http.StatusBadGateway, Doc: document(execapi.CodeWorkerLost, lost.Error()), err: err}
	case execapi.IsValidation(err):
		return invalidAnswer(err)
	case errors.Is(err, errUnauthorized):
		return ErrorAnswer{Status: http.StatusUnauthorized, Doc: document(CodeUnauthorized, errUnauthorized.Error()), err: err}
	case errors.As(err, &shut):
		return ErrorAnswer{Status: http.StatusServiceUnavailable, Doc: document(execapi.CodeDraining, shut.Error()), Close: true, err: err}
	default:
		return ErrorAnswer{Status: http.StatusInternalServerError, Doc: document(execapi.CodeInternal, "the run failed: "+err.Error()), err: err}
	}
}

// refusalAnswer renders a refusal: its status, its code and reason, its one
// wording (Refusal.Error) and, when it has an estimate, Retry-After.
func refusalAnswer(r *execapi.Refusal) ErrorAnswer {
	a := ErrorAnswer{Status: RefusalStatus(r), Doc: ErrorDocument{Error: ErrorDetail{
		Code: r.Code(), Message: r.Error(), Reason: string(r.Reason), Field: r.Field, Limit: r.Limit,
	}}, Close: r.Reason == execapi.RefusedDraining, err: r}
	if r.RetryAfter > 0 {
		a.RetryAfter = r.RetryAfterSeconds()
	}
	return a
}

// invalidAnswer is the 400 of a request that failed decoding or
// validation: the message starts with the field, which the document names.
func invalidAnswer(err error) ErrorAnswer {
	d := ErrorDetail{Code: execapi.CodeInvalidRequest, Message: err.Error()}
	var v *execapi.ValidationError
	if errors.As(err, &v) {
		d.Message, d.Field = v.Error(), v.Field
	}
	return ErrorAnswer{Status: http.StatusBadRequest, Doc: ErrorDocument{Error: d}, err: err}
}

func document(code, message string) ErrorDocument {
	return ErrorDocument{Error: ErrorDetail{Code: code, Message: message}}
}

// Write sends the answer: its headers, its status and its document.
func (a ErrorAnswer) Write(w http.ResponseWriter) {
	if a.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(a.RetryAfter))
	}
	if a.Close {
		w.Header().Set("Connection", "close")
	}
	writeJSON(w, a.Status, a.Doc)
}

// Log tells the operator what is theirs to know of the error, under what
// (the call, as "run" or "console: playground run"): a lost worker, with
// which one and how, as a warning; an error of the server's own as an
// error. Refusals and bad requests are the caller's and are not logged.
func (a ErrorAnswer) Log(log *slog.Logger, what string) {
	var lost *execapi.WorkerLostError
	switch {
	case a.Status == http.StatusBadGateway && errors.As(a.err, &lost):
		log.Warn(what+" lost with its worker", "detail", lost.Detail())
	case a.Status == http.StatusInternalServerError:
		log.Error(what+" failed", "err", a.err)
	}
}

// shutDownError is the error of a call the server cancelled because it gave
// up draining (Server.Shutdown's timeout, Abort): its sandbox was killed.
// It wraps the run's own error (context.Canceled), so that every front end
// still sees a cancelled call.
type shutDownError struct{ err error }

func (e *shutDownError) Error() string {
	return "the server shut down before the run finished; its sandbox was killed"
}

// Unwrap returns the run's own error.
func (e *shutDownError) Unwrap() error { return e.err }

// markShutDown makes err a *shutDownError when it is a cancellation the
// server's shutdown caused (runs is the parent of every run's
// cancellation), so that its answer says so.
func markShutDown(runs context.Context, err error) error {
	if err != nil && runs.Err() != nil && errors.Is(err, context.Canceled) {
		return &shutDownError{err}
	}
	return err
}
