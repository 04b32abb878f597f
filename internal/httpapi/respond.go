package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// ErrorDocument is the API's error document: {"error": {"code", "message"}}.
// The console answers with it too.
type ErrorDocument struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the error itself. Code and Message are always there; a
// refusal adds its reason (and the key's limit, when one was hit), and an
// error about a request field names it, so that a client rebuilds the
// *execapi.Refusal or *execapi.ValidationError without parsing the message.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Reason  string `json:"reason,omitempty"`
	Field   string `json:"field,omitempty"`
	Limit   int    `json:"limit,omitempty"`
	// Ended says how and when a session ended, in the answer to a use
	// of it after (session_ended).
	Ended *execapi.SessionEnd `json:"ended,omitempty"`
}

// writeError answers with the API's error document.
func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, ErrorDocument{Error: ErrorDetail{Code: code, Message: message}})
}

// writeInvalid answers 400 for a request that failed decoding or
// validation: the message starts with the field, which the document names.
func writeInvalid(w http.ResponseWriter, err error) { invalidAnswer(err).Write(w) }

// writeRefusal renders a refusal (refusalAnswer). A server that drains
// closes the connection after it.
func writeRefusal(w http.ResponseWriter, r *execapi.Refusal) { refusalAnswer(r).Write(w) }

// RefusalStatus is the HTTP status of a refusal: 503 while draining (this
// server takes nothing more; another may) or when a cluster's front end has
// no live worker, 400 for one about a request field (an unknown runtime),
// and otherwise 429 (retry later).
func RefusalStatus(r *execapi.Refusal) int {
	switch {
	case r.Reason == execapi.RefusedDraining, r.Reason == execapi.RefusedNoWorkers, r.Reason == execapi.RefusedSessionWorkerUnanswered:
		return http.StatusServiceUnavailable
	case r.Field != "":
		return http.StatusBadRequest
	default:
		return http.StatusTooManyRequests
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data = []byte(`{"error":{"code":"internal","message":"the answer could not be encoded"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)+1))
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}
