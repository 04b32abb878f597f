package httpapi

import (
	"errors"
	"net/http"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// sessionStatus is the HTTP status of each session error code.
var sessionStatus = map[string]int{
	execapi.CodeSessionNotFound:       http.StatusNotFound,
	execapi.CodeSessionEnded:          http.StatusGone,
	execapi.CodeSessionLost:           http.StatusBadGateway,
	execapi.CodeSessionLimit:          http.StatusTooManyRequests,
	execapi.CodeFileNotFound:          http.StatusNotFound,
	execapi.CodeFileTooLarge:          http.StatusRequestEntityTooLarge,
	execapi.CodeForkUnsupported:       http.StatusConflict,
	execapi.CodeSessionCallNotStarted: http.StatusConflict,
}

// sessionAnswer is the answer to a session error (execapi.SessionErrorCode
// names its code). An unknown id and another caller's read alike, byte for
// byte: ErrSessionNotFound's one wording, nothing of the id. An ended
// session's answer carries how and when it ended, so that its owner knows
// its state is gone.
func sessionAnswer(err error, code string) ErrorAnswer {
	a := ErrorAnswer{Status: sessionStatus[code], Doc: document(code, err.Error()), err: err}
	var ended *execapi.SessionEndedError
	switch {
	case code == execapi.CodeSessionNotFound:
		a.Doc = document(code, execapi.ErrSessionNotFound.Error())
	case errors.As(err, &ended):
		end := ended.End
		a.Doc.Error.Ended = &end
	}
	return a
}

// errSessionNotFound is the answer to an id that is no session id at all,
// given without asking the service: the same as for an unknown one.
var errSessionNotFound = sessionAnswer(execapi.ErrSessionNotFound, execapi.CodeSessionNotFound)
