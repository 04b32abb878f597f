package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// errorBody is the API's error document: {"error": {"code", "message"}}.
type errorBody struct {
	Error errorDetail `json:"error"`
}

// errorDetail is the error itself. Code and Message are always there; a
// refusal adds its reason (and the key's limit, when one was hit), and an
// error about a request field names it, so that a client rebuilds the
// *execapi.Refusal or *execapi.ValidationError without parsing the message.
type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Reason  string `json:"reason,omitempty"`
	Field   string `json:"field,omitempty"`
	Limit   int    `json:"limit,omitempty"`
}

// writeError answers with the API's error document.
func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, errorBody{Error: errorDetail{Code: code, Message: message}})
}

// writeInvalid answers 400 for a request that failed decoding or
// validation: the message starts with the field, which the document names.
func writeInvalid(w http.ResponseWriter, err error) {
	d := errorDetail{Code: execapi.CodeInvalidRequest, Message: err.Error()}
	var v *execapi.ValidationError
	if errors.As(err, &v) {
		d.Message, d.Field = v.Error(), v.Field
	}
	writeJSON(w, http.StatusBadRequest, errorBody{Error: d})
}

// writeRefusal renders a refusal: its status, its code and reason, its one
// wording (Refusal.Error) and, when it has an estimate, Retry-After in
// whole seconds. A server that drains closes the connection after it.
func writeRefusal(w http.ResponseWriter, r *execapi.Refusal) {
	if r.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(r.RetryAfterSeconds()))
	}
	if r.Reason == execapi.RefusedDraining {
		w.Header().Set("Connection", "close")
	}
	writeJSON(w, RefusalStatus(r), errorBody{Error: errorDetail{
		Code: r.Code(), Message: r.Error(), Reason: string(r.Reason), Field: r.Field, Limit: r.Limit,
	}})
}

// RefusalStatus is the HTTP status of a refusal: 503 while draining (this
// server takes nothing more; another may) or when a cluster's front end has
// no live worker, 400 for one about a request field (an unknown runtime),
// and otherwise 429 (retry later). Front ends that answer refusals their
// own way (the console) use it too.
func RefusalStatus(r *execapi.Refusal) int {
	switch {
	case r.Reason == execapi.RefusedDraining, r.Reason == execapi.RefusedNoWorkers:
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
