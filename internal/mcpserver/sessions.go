package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Defaults of the session bounds in Options. A session costs the server
// some 14 KiB while it lives, whether or not it is used.
const (
	DefaultSessionTimeout       = 10 * time.Minute
	DefaultMaxSessions          = 1000
	DefaultMaxSessionsPerCaller = 16
)

// Reasons of a refused session, in its JSON-RPC error's data.
const (
	// RefusedSessionsPerCaller: the caller (an API key, a token) has
	// Options.MaxSessionsPerCaller sessions open.
	RefusedSessionsPerCaller = "mcp_sessions_per_caller"
	// RefusedSessions: the server has Options.MaxSessions sessions open.
	RefusedSessions = "mcp_sessions"
)

// codeSessionRefused is the JSON-RPC error code of a refused session, in
// the range the specification leaves to servers.
const codeSessionRefused = -32000

const sessionHeader = "Mcp-Session-Id"

// SessionAdmitter is a Service that has a say in who may open an MCP
// session over Streamable HTTP (HTTPHandler asks it before each). The
// server's gate is one: opening a session spends a token of the caller's
// key's rate.
type SessionAdmitter interface {
	// AdmitSession decides whether execapi.CallerFrom(ctx) may open a
	// session. An *execapi.Refusal is answered with its reason, status
	// (429, or 503 for a server that takes nothing more) and Retry-After;
	// any other error as a failure to open.
	AdmitSession(ctx context.Context) error
}

// sessions bounds the Streamable HTTP sessions of one handler, in number
// per caller and in all, and admits each new one through the Service
// (SessionAdmitter). The SDK keeps sessions in a map of its own and offers
// no bound or hook, so the places are counted here: a place is taken when
// a POST without a session id (an initialize) arrives, bound to the id the
// SDK answers with, and given back when that session ends: a DELETE the
// SDK answered 204, its idle timeout (Options.SessionTimeout), any close
// (ServerSession.Wait returns).
type sessions struct {
	next         http.Handler
	server       *mcp.Server
	admit        SessionAdmitter // nil: no say
	max, perUser int
	idle         time.Duration
	log          *slog.Logger
	// released, when set (tests), hears of every place given back.
	released func()

	mu     sync.Mutex
	total  int
	byUser map[string]int
	byID   map[string]*place
}

// place is one session's, or one being opened.
type place struct {
	caller string
	id     string
	// busy counts the session's POSTs being served, during which the SDK
	// does not time it out; idleSince is when the last one ended.
	busy      int
	idleSince time.Time
	gone      bool
}

func newSessions(next http.Handler, server *mcp.Server, admit SessionAdmitter, opts Options) *sessions {
	return &sessions{
		next: next, server: server, admit: admit, max: opts.MaxSessions, perUser: opts.MaxSessionsPerCaller,
		idle: opts.SessionTimeout, log: opts.Logger, byUser: map[string]int{}, byID: map[string]*place{},
	}
}

// ServeHTTP implements http.Handler.
func (s *sessions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(sessionHeader)
	switch {
	case r.Method == http.MethodPost && id == "":
		initID, ok := initializeIn(r)
		if !ok {
			// No initialize (the SDK's clients first probe with
			// server/discover): the SDK opens no lasting session for
			// it, closing what it made when the request ends.
			s.next.ServeHTTP(w, r)
			return
		}
		s.open(w, r, initID)
	case r.Method == http.MethodPost:
		p := s.enter(id)
		defer s.leave(p)
		s.next.ServeHTTP(w, r)
	case r.Method == http.MethodDelete && id != "":
		// Given back before the 204 leaves: a client that closed a
		// session may open the next at once.
		s.next.ServeHTTP(&headerHook{ResponseWriter: w, hook: func(status int, _ http.Header) {
			if status == http.StatusNoContent {
				s.release(id)
			}
		}}, r)
	default:
		s.next.ServeHTTP(w, r)
	}
}

// initializeIn reports whether the POST r carries an initialize request
// (alone or in a batch), and its id; r's body stays readable. A body too
// large to look at is left to the SDK, which refuses it.
func initializeIn(r *http.Request) (jsonrpc.ID, bool) {
	if r.Body == nil {
		return jsonrpc.ID{}, false
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxScannedBody+1))
	r.Body = readCloser{io.MultiReader(bytes.NewReader(data), r.Body), r.Body}
	if err != nil || len(data) > maxScannedBody {
		return jsonrpc.ID{}, false
	}
	for _, m := range decodeMessages(data) {
		if req, ok := m.(*jsonrpc.Request); ok && req.IsCall() && req.Method == "initialize" {
			return req.ID, true
		}
	}
	return jsonrpc.ID{}, false
}

// open serves a POST that opens a session (its initialize has initID),
// once it has a place.
func (s *sessions) open(w http.ResponseWriter, r *http.Request, initID jsonrpc.ID) {
	caller := callerOf(r)
	p, refused := s.reserve(caller)
	if refused != nil {
		s.log.Info("mcp: session refused", "caller", caller, "reason", refused.data["reason"])
		writeRPCError(w, initID, refused)
		return
	}
	if s.admit != nil {
		if err := s.admit.AdmitSession(execapi.WithCaller(r.Context(), caller)); err != nil {
			s.giveBack(p)
			s.refuse(w, initID, err)
			return
		}
	}
	// Bound to its id before the answer leaves, so that a DELETE the
	// client sends at once finds it.
	hooked := &headerHook{ResponseWriter: w, hook: func(_ int, h http.Header) {
		if id := h.Get(sessionHeader); id != "" {
			s.bind(p, id)
		}
	}}
	s.next.ServeHTTP(hooked, r)
	s.leave(p)
	s.mu.Lock()
	id := p.id
	s.mu.Unlock()
	var session *mcp.ServerSession
	if id != "" {
		for ss := range s.server.Sessions() {
			if ss.ID() == id {
				session = ss
				break
			}
		}
	}
	if session == nil { // not opened (a bad initialize), or closed already
		s.giveBack(p)
		return
	}
	go func() {
		session.Wait()
		s.giveBack(p)
	}()
}

// sessionRefusal is why a session was not opened, as it is answered.
type sessionRefusal struct {
	status int
	msg    string
	retry  time.Duration
	// data names the limit (reason, limit) for clients that read it.
	data map[string]any
}

// reserve takes a place for caller, or says why not.
func (s *sessions) reserve(caller string) (*place, *sessionRefusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if caller != "" && s.byUser[caller] >= s.perUser {
		retry := s.retryAfterLocked(caller)
		msg := fmt.Sprintf("ScratchRun refused to open an MCP session: this caller already has %d sessions open, its limit. "+
			"Close one (DELETE with its Mcp-Session-Id) or retry after %d seconds, when an idle one expires.", s.perUser, seconds(retry))
		return nil, &sessionRefusal{http.StatusTooManyRequests, msg, retry, map[string]any{"reason": RefusedSessionsPerCaller, "limit": s.perUser}}
	}
	if s.total >= s.max {
		retry := s.retryAfterLocked("")
		msg := fmt.Sprintf("ScratchRun refused to open an MCP session: the server has %d sessions open, its limit. Retry after %d seconds.",
			s.max, seconds(retry))
		return nil, &sessionRefusal{http.StatusServiceUnavailable, msg, retry, map[string]any{"reason": RefusedSessions, "limit": s.max}}
	}
	s.total++
	s.byUser[caller]++
	return &place{caller: caller, busy: 1}, nil
}

// retryAfterLocked is when a place of caller's ("": anyone's) is expected
// to free: when the first of its idle sessions times out, or a whole idle
// timeout when all are busy.
func (s *sessions) retryAfterLocked(caller string) time.Duration {
	soonest := s.idle
	now := time.Now()
	for _, p := range s.byID {
		if (caller == "" || p.caller == caller) && p.busy == 0 {
			soonest = min(soonest, p.idleSince.Add(s.idle).Sub(now))
		}
	}
	return max(soonest, time.Second)
}

func seconds(d time.Duration) int { return max(int(math.Ceil(d.Seconds())), 1) }

func (s *sessions) bind(p *place, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.gone || p.id != "" {
		return
	}
	p.id = id
	s.byID[id] = p
}

// enter counts a POST of session id (nil: not one of ours, or gone).
func (s *sessions) enter(id string) *place {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.byID[id]
	if p != nil {
		p.busy++
	}
	return p
}

func (s *sessions) leave(p *place) {
	if p == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p.busy--
	p.idleSince = time.Now()
}

// release gives back the place of session id, if it still holds one.
func (s *sessions) release(id string) {
	s.mu.Lock()
	p := s.byID[id]
	s.mu.Unlock()
	if p != nil {
		s.giveBack(p)
	}
}

// giveBack frees p's place, once.
func (s *sessions) giveBack(p *place) {
	s.mu.Lock()
	if p.gone {
		s.mu.Unlock()
		return
	}
	p.gone = true
	s.total--
	if s.byUser[p.caller]--; s.byUser[p.caller] == 0 {
		delete(s.byUser, p.caller)
	}
	if p.id != "" {
		delete(s.byID, p.id)
	}
	s.mu.Unlock()
	if s.released != nil {
		s.released()
	}
}

// refuse answers a session the Service did not admit.
func (s *sessions) refuse(w http.ResponseWriter, id jsonrpc.ID, err error) {
	var refusal *execapi.Refusal
	if !errors.As(err, &refusal) {
		s.log.Warn("mcp: a session could not be admitted", "err", err)
		writeRPCError(w, id, &sessionRefusal{status: http.StatusInternalServerError, msg: "ScratchRun could not open an MCP session: " + err.Error()})
		return
	}
	status := http.StatusTooManyRequests
	if refusal.Reason == execapi.RefusedDraining || refusal.Reason == execapi.RefusedNoWorkers {
		status = http.StatusServiceUnavailable
	}
	msg := "ScratchRun refused to open an MCP session: " + refusal.Error() + "."
	if refusal.Reason == execapi.RefusedKeyRate {
		msg += " Opening a session spends one run of the key's rate."
	}
	writeRPCError(w, id, &sessionRefusal{status, msg, refusal.RetryAfter, map[string]any{"reason": string(refusal.Reason), "limit": refusal.Limit}})
}

// writeRPCError answers a POST with the JSON-RPC error of refused for its
// call id, with Retry-After when one is known. (The SDK's Go client reads
// the error of a failed POST, except for 429 and 503, which it reports by
// their status alone.)
func writeRPCError(w http.ResponseWriter, id jsonrpc.ID, refused *sessionRefusal) {
	werr := &jsonrpc.Error{Code: codeSessionRefused, Message: refused.msg}
	if refused.data != nil {
		if refused.retry > 0 {
			refused.data["retry_after_s"] = seconds(refused.retry)
		}
		werr.Data, _ = json.Marshal(refused.data)
	}
	out, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: werr})
	if err != nil {
		http.Error(w, refused.msg, refused.status)
		return
	}
	if refused.retry > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(seconds(refused.retry)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(refused.status)
	w.Write(out)
}

// callerOf names who opens a session, as the SDK binds sessions to it: the
// bearer token's user (an API key's id), else the request's caller.
func callerOf(r *http.Request) string {
	if info := auth.TokenInfoFromContext(r.Context()); info != nil && info.UserID != "" {
		return info.UserID
	}
	return execapi.CallerFrom(r.Context())
}

// headerHook calls hook with the status and header once, as the response
// starts and before any of it is sent.
type headerHook struct {
	http.ResponseWriter
	hook    func(status int, h http.Header)
	started bool
}

// WriteHeader implements http.ResponseWriter.
func (h *headerHook) WriteHeader(status int) {
	h.start(status)
	h.ResponseWriter.WriteHeader(status)
}

// Write implements http.ResponseWriter.
func (h *headerHook) Write(p []byte) (int, error) {
	h.start(http.StatusOK)
	return h.ResponseWriter.Write(p)
}

func (h *headerHook) start(status int) {
	if !h.started {
		h.started = true
		h.hook(status, h.Header())
	}
}

// Flush keeps events streaming through the hook.
func (h *headerHook) Flush() {
	h.start(http.StatusOK)
	if fl, ok := h.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (h *headerHook) Unwrap() http.ResponseWriter { return h.ResponseWriter }
