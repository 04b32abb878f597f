package httpapi

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// handleExec is POST /v1/exec: the contract's request in, its result out,
// as JSON or, when the client asks for it, as server-sent events
// (streamExec).
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	if !isJSON(r.Header.Get("Content-Type")) {
		// A browser's form or text/plain POST needs no preflight; the API
		// takes only what no page can send across origins unasked.
		s.m.rejections.add(reasonMediaType)
		writeError(w, http.StatusUnsupportedMediaType, CodeMediaType,
			fmt.Sprintf("the body must be JSON sent with Content-Type: application/json, not %q", r.Header.Get("Content-Type")))
		return
	}
	req, ok := s.decodeExec(w, r)
	if !ok {
		return
	}
	if wantsEventStream(r.Header.Values("Accept")) {
		s.streamExec(w, r, req, received)
		return
	}
	res, err := s.gate.Exec(r.Context(), req, nil)
	if err != nil {
		s.writeExecError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// decodeExec reads and decodes the body, answering 413 or 400 itself when it
// cannot; nothing it refuses goes further.
func (s *Server) decodeExec(w http.ResponseWriter, r *http.Request) (execapi.Request, bool) {
	limit := s.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		drainRefused(r)
		s.tooLarge(w)
		return execapi.Request{}, false
	}
	// A slow body may hold a connection (until BoundBodies' deadline),
	// never room for a sandbox: the request waits for that only once it is
	// decoded.
	req, err := execapi.DecodeRequest(http.MaxBytesReader(w, r.Body, limit), limit)
	if err != nil {
		if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
			s.tooLarge(w)
			return execapi.Request{}, false
		}
		s.m.rejections.add(reasonInvalidRequest)
		writeInvalid(w, err)
		return execapi.Request{}, false
	}
	return req, true
}

func (s *Server) tooLarge(w http.ResponseWriter) {
	s.m.rejections.add(reasonBodyTooLarge)
	w.Header().Set("Connection", "close") // the rest of the body is not read
	writeError(w, http.StatusRequestEntityTooLarge, CodeBodyTooLarge,
		"the request body is larger than this server's limit of "+formatBytes(s.cfg.MaxBodyBytes))
}

// writeExecError answers the gate's and the engine's errors as every front
// end does (AnswerError).
func (s *Server) writeExecError(w http.ResponseWriter, r *http.Request, err error) {
	a := AnswerError(err)
	if a.Status == http.StatusInternalServerError && r.Context().Err() != nil {
		// The client went away; its run was cancelled and nobody reads this.
		s.log.Debug("client went away during a run", "err", err)
		return
	}
	a.Log(s.log, "run")
	a.Write(w)
}

// handleRuntimes is GET /v1/runtimes: the executor's execapi.Info.
func (s *Server) handleRuntimes(w http.ResponseWriter, r *http.Request) {
	info, err := s.Service().Describe(r.Context())
	if err != nil {
		s.log.Error("describe runtimes", "err", err)
		writeError(w, http.StatusInternalServerError, execapi.CodeInternal, "the runtimes could not be listed: "+err.Error())
		return
	}
	if info.Runtimes == nil {
		info.Runtimes = []execapi.RuntimeInfo{}
	}
	if info.Version == "" {
		info.Version = s.cfg.Version
	}
	writeJSON(w, http.StatusOK, info)
}

// handleHealth is GET /healthz: the process answers.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReady is GET /readyz: images present and a sandbox can be started,
// and not draining.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if s.drain.isDraining() {
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusServiceUnavailable, execapi.CodeDraining, execapi.ErrDraining.Error())
		return
	}
	if err := s.Ready(r.Context()); err != nil {
		writeError(w, http.StatusServiceUnavailable, CodeNotReady, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// isJSON reports whether a Content-Type is application/json (parameters
// such as charset allowed).
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// methodNotAllowed answers a route's other methods with the API's error
// document (the mux's own 405 is plain text).
func methodNotAllowed(allowed string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Allow", allowed)
		writeError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "use "+allowed)
	})
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return itoa(n>>20) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return itoa(n>>10) + " KiB"
	}
	return itoa(n) + " bytes"
}
