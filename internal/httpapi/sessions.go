package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// The session routes, served only with Config.Sessions: off, their paths
// get the catch-all 404 as before sessions existed.
const (
	routeSessions     = "/v1/sessions"
	routeSession      = "/v1/sessions/{id}"
	routeSessionExec  = "/v1/sessions/{id}/exec"
	routeSessionFork  = "/v1/sessions/{id}/fork"
	routeSessionFiles = "/v1/sessions/{id}/files/{path...}"
)

// sessionRoutes registers the session routes on t through serve (the
// instrumented, tracked, key-checked wrapper every API route has). A path
// with several methods answers the others with one 405 naming them all.
func (s *Server) sessionRoutes(t *routeTable, serve func(route string, h http.Handler) http.Handler) {
	byPath := map[string][]string{}
	var paths []string
	add := func(method, path string, h http.Handler) {
		t.handle(method, path, "", serve(path, h))
		if byPath[path] == nil {
			paths = append(paths, path)
		}
		byPath[path] = append(byPath[path], method)
	}
	add(http.MethodPost, routeSessions, s.idempotent(http.HandlerFunc(s.handleSessionOpen)))
	add(http.MethodGet, routeSessions, http.HandlerFunc(s.handleSessionList))
	add(http.MethodGet, routeSession, http.HandlerFunc(s.handleSessionGet))
	add(http.MethodDelete, routeSession, http.HandlerFunc(s.handleSessionClose))
	add(http.MethodPost, routeSessionExec, s.idempotent(http.HandlerFunc(s.handleSessionExec)))
	add(http.MethodPost, routeSessionFork, s.idempotent(http.HandlerFunc(s.handleSessionFork)))
	add(http.MethodGet, routeSessionFiles, http.HandlerFunc(s.handleSessionFileRead))
	add(http.MethodPut, routeSessionFiles, http.HandlerFunc(s.handleSessionFileWrite))
	for _, path := range paths {
		methods := byPath[path]
		sort.Strings(methods)
		t.mux.Handle(path, serve(path, methodNotAllowed(strings.Join(methods, ", "))))
	}
}

// sessionRef is the request's session, or false (answered 404 as an
// unknown id is) when the id has no session id's shape: nothing is asked
// of the service for it.
func (s *Server) sessionRef(w http.ResponseWriter, r *http.Request) (execapi.SessionRef, bool) {
	id := r.PathValue("id")
	if !execapi.IsSessionID(id) {
		s.m.rejections.add(reasonInvalidRequest)
		errSessionNotFound.Write(w)
		return execapi.SessionRef{}, false
	}
	return execapi.SessionRef{ID: id}, true
}

// writeSessionError answers a session operation's error as every call's
// is (AnswerError), under what for the log.
func (s *Server) writeSessionError(w http.ResponseWriter, r *http.Request, what string, err error) {
	a := AnswerError(err)
	if a.Status == http.StatusInternalServerError && r.Context().Err() != nil {
		return // the client went away
	}
	a.Log(s.log, what)
	a.Write(w)
}

// requireJSON answers 415 unless the body is sent as JSON, as /v1/exec
// does: a page can send no such request across origins unasked.
func (s *Server) requireJSON(w http.ResponseWriter, r *http.Request) bool {
	if isJSON(r.Header.Get("Content-Type")) {
		return true
	}
	s.m.rejections.add(reasonMediaType)
	writeError(w, http.StatusUnsupportedMediaType, CodeMediaType,
		fmt.Sprintf("the body must be JSON sent with Content-Type: application/json, not %q", r.Header.Get("Content-Type")))
	return false
}

// handleSessionOpen is POST /v1/sessions: a SessionRequest in, 201 and the
// session's SessionInfo out.
func (s *Server) handleSessionOpen(w http.ResponseWriter, r *http.Request) {
	if !s.requireJSON(w, r) {
		return
	}
	limit := s.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		drainRefused(r)
		s.tooLarge(w)
		return
	}
	req, err := execapi.DecodeSessionRequest(http.MaxBytesReader(w, r.Body, limit), limit)
	if err != nil {
		if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
			s.tooLarge(w)
			return
		}
		s.m.rejections.add(reasonInvalidRequest)
		writeInvalid(w, err)
		return
	}
	checked, err := s.sessions.SessionPolicy().ValidateSession(s.cfg.Policy, req)
	if err != nil {
		s.m.rejections.add(reasonInvalidRequest)
		writeInvalid(w, err)
		return
	}
	info, err := s.sessions.OpenSession(r.Context(), checked)
	if err != nil {
		s.writeSessionError(w, r, "open session", err)
		return
	}
	writeJSON(w, http.StatusCreated, info)
}

// sessionList is GET /v1/sessions's answer.
type sessionList struct {
	Sessions []execapi.SessionInfo `json:"sessions"`
}

// handleSessionList is GET /v1/sessions: the caller's open sessions.
func (s *Server) handleSessionList(w http.ResponseWriter, r *http.Request) {
	list, err := s.sessions.ListSessions(r.Context())
	if err != nil {
		s.writeSessionError(w, r, "list sessions", err)
		return
	}
	if list == nil {
		list = []execapi.SessionInfo{}
	}
	writeJSON(w, http.StatusOK, sessionList{Sessions: list})
}

// handleSessionGet is GET /v1/sessions/{id}: the caller's open session's
// SessionInfo; 404, 410 or 502 (as every session route) when it is not
// the caller's, has ended or was lost.
func (s *Server) handleSessionGet(w http.ResponseWriter, r *http.Request) {
	ref, ok := s.sessionRef(w, r)
	if !ok {
		return
	}
	info, err := s.sessions.Session(r.Context(), ref)
	if err != nil {
		s.writeSessionError(w, r, "look up session", err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// handleSessionClose is DELETE /v1/sessions/{id}: the session ends and is
// purged; the answer says how (SessionEnd).
func (s *Server) handleSessionClose(w http.ResponseWriter, r *http.Request) {
	ref, ok := s.sessionRef(w, r)
	if !ok {
		return
	}
	end, err := s.sessions.CloseSession(r.Context(), ref)
	if err != nil {
		s.writeSessionError(w, r, "close session", err)
		return
	}
	writeJSON(w, http.StatusOK, end)
}

// handleSessionExec is POST /v1/sessions/{id}/exec: /v1/exec's request,
// held to the session's settings (ValidateInSession), run in the session;
// its SessionResult as JSON or, asked for, as server-sent events as
// /v1/exec streams them.
func (s *Server) handleSessionExec(w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	ref, ok := s.sessionRef(w, r)
	if !ok || !s.requireJSON(w, r) {
		return
	}
	req, ok := s.decodeExec(w, r)
	if !ok {
		return
	}
	// One look-up of the session (its settings, or why it is gone): a
	// list would ask every worker of a cluster.
	info, err := s.sessions.Session(r.Context(), ref)
	if err != nil {
		s.writeSessionError(w, r, "run in session", err)
		return
	}
	ref.Worker = info.Worker
	// The session's base env is the engine's to add beneath the call's:
	// SessionInfo does not carry it.
	checked, err := s.cfg.Policy.ValidateInSession(req, info, nil)
	if err != nil {
		s.m.rejections.add(reasonInvalidRequest)
		writeInvalid(w, err)
		return
	}
	run := func(ctx context.Context, sink execapi.EventSink) (execapi.Result, any, error) {
		res, err := s.sessions.ExecInSession(ctx, ref, checked, sink)
		return res.Result, res, err
	}
	if wantsEventStream(r.Header.Values("Accept")) {
		s.streamRun(w, r, received, run)
		return
	}
	_, res, err := run(r.Context(), nil)
	if err != nil {
		s.writeExecError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// handleSessionFork is POST /v1/sessions/{id}/fork: a new session of the
// caller's holding a copy of this one, 201 and its SessionInfo. The body
// is empty or an empty JSON object: a fork takes no options.
func (s *Server) handleSessionFork(w http.ResponseWriter, r *http.Request) {
	ref, ok := s.sessionRef(w, r)
	if !ok {
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		if !s.requireJSON(w, r) {
			return
		}
		var opts map[string]json.RawMessage
		if err := json.Unmarshal(body, &opts); err != nil {
			s.m.rejections.add(reasonInvalidRequest)
			writeInvalid(w, &execapi.ValidationError{Field: "body", Message: "must be empty or a JSON object: " + err.Error()})
			return
		}
		for name := range opts {
			s.m.rejections.add(reasonInvalidRequest)
			writeInvalid(w, &execapi.ValidationError{Field: name, Message: "is not an option of a fork, which takes none"})
			return
		}
	}
	info, err := s.sessions.ForkSession(r.Context(), ref)
	if err != nil {
		s.writeSessionError(w, r, "fork session", err)
		return
	}
	writeJSON(w, http.StatusCreated, info)
}

// sessionFilePath is the request's file path: the route's {path...} with
// its leading slash, checked as a request's paths are, naming the field
// "path"; false when it was refused (answered 400).
func (s *Server) sessionFilePath(w http.ResponseWriter, r *http.Request) (string, bool) {
	p := "/" + r.PathValue("path")
	if err := execapi.ValidatePath("path", p); err != nil {
		s.m.rejections.add(reasonInvalidRequest)
		writeInvalid(w, err)
		return "", false
	}
	return p, true
}

// handleSessionFileRead is GET /v1/sessions/{id}/files/{path...}: the
// file's bytes as they are.
func (s *Server) handleSessionFileRead(w http.ResponseWriter, r *http.Request) {
	ref, ok := s.sessionRef(w, r)
	if !ok {
		return
	}
	p, ok := s.sessionFilePath(w, r)
	if !ok {
		return
	}
	data, err := s.sessions.ReadSessionFile(r.Context(), ref, p)
	if err != nil {
		s.writeSessionError(w, r, "read session file", err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	w.Write(data)
}

// sessionFileWritten is PUT /v1/sessions/{id}/files/{path...}'s answer.
type sessionFileWritten struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// handleSessionFileWrite is PUT /v1/sessions/{id}/files/{path...}: the
// body's bytes as they are become the file (its missing parents made), at
// most the policy's MaxFileBytes (413 past it, nothing written).
func (s *Server) handleSessionFileWrite(w http.ResponseWriter, r *http.Request) {
	ref, ok := s.sessionRef(w, r)
	if !ok {
		return
	}
	p, ok := s.sessionFilePath(w, r)
	if !ok {
		return
	}
	limit := int64(s.cfg.Policy.MaxFileBytes)
	tooLarge := func() {
		s.m.rejections.add(reasonBodyTooLarge)
		w.Header().Set("Connection", "close") // the rest of the body is not read
		writeError(w, http.StatusRequestEntityTooLarge, execapi.CodeFileTooLarge,
			fmt.Sprintf("the file is larger than this server's limit of %s for a file written", formatBytes(limit)))
	}
	if r.ContentLength > limit {
		drainRefused(r)
		tooLarge()
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if mb := new(http.MaxBytesError); errors.As(err, &mb) {
			tooLarge()
			return
		}
		s.m.rejections.add(reasonInvalidRequest)
		writeInvalid(w, &execapi.ValidationError{Field: "body", Message: "could not be read: " + err.Error()})
		return
	}
	if err := s.sessions.WriteSessionFile(r.Context(), ref, p, data); err != nil {
		s.writeSessionError(w, r, "write session file", err)
		return
	}
	writeJSON(w, http.StatusOK, sessionFileWritten{Path: p, Size: int64(len(data))})
}
