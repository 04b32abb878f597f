package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Sessions (a server run with sessions on): a sandbox kept across calls,
// whose files, processes and Python or Node variables persist from one
// call in it to the next until it is closed, idle past its idle TTL or past
// its lifetime. Run still gets a fresh sandbox each call.
type (
	// SessionRequest opens a session: its runtime, limits (memory for
	// its whole life, each call's default timeout), network, idle TTL
	// and lifetime.
	SessionRequest = execapi.SessionRequest
	// SessionInfo describes an open session: its id, when it expires,
	// what persists (Interpreter) and what a fork copies (Fork).
	SessionInfo = execapi.SessionInfo
	// SessionEnd is how and when a session ended.
	SessionEnd = execapi.SessionEnd
	// SessionCallInfo is what a call in a session says of the session.
	SessionCallInfo = execapi.SessionCallInfo
	// SessionsInfo is Info.Sessions: the server's bounds of sessions,
	// nil when it offers none.
	SessionsInfo = execapi.SessionsInfo
)

// Error codes of sessions.
const (
	CodeSessionNotFound = execapi.CodeSessionNotFound
	CodeSessionEnded    = execapi.CodeSessionEnded
	CodeSessionLost     = execapi.CodeSessionLost
	CodeSessionLimit    = execapi.CodeSessionLimit
	CodeFileNotFound    = execapi.CodeFileNotFound
	CodeFileTooLarge    = execapi.CodeFileTooLarge
	CodeForkUnsupported = execapi.CodeForkUnsupported
)

// SessionResult is a call in a session's result: a Result (StatePurged
// false while the session goes on) and the session's account.
type SessionResult struct {
	Result
	Session SessionCallInfo `json:"session"`
}

// sessionPath is the path of a session's route: its id, escaped.
func sessionPath(id, rest string) string {
	return "/v1/sessions/" + url.PathEscape(id) + rest
}

// OpenSession opens a session (POST /v1/sessions). Without an
// Idempotency-Key (WithIdempotencyKey, WithAutoIdempotency) a lost
// connection is not retried: the session may have opened, and a retry
// would open another.
func (c *Client) OpenSession(ctx context.Context, req SessionRequest, opts ...CallOption) (SessionInfo, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return SessionInfo{}, fmt.Errorf("encode request: %w", err)
	}
	return c.sessionInfo(ctx, "/v1/sessions", body, c.callFor(opts))
}

// ForkSession opens a new session holding a copy of session id (POST
// /v1/sessions/{id}/fork); retried as OpenSession is.
func (c *Client) ForkSession(ctx context.Context, id string, opts ...CallOption) (SessionInfo, error) {
	return c.sessionInfo(ctx, sessionPath(id, "/fork"), []byte("{}"), c.callFor(opts))
}

// sessionInfo POSTs body to path and reads the SessionInfo answered.
func (c *Client) sessionInfo(ctx context.Context, path string, body []byte, call callConfig) (SessionInfo, error) {
	var info SessionInfo
	err := c.retrying(ctx, call.key != "", func() error {
		return c.attempt(ctx, c.cfg.margin, http.MethodPost, path, body, "application/json", call.key, readJSON(&info))
	})
	return info, err
}

// Sessions lists the caller's open sessions (GET /v1/sessions).
func (c *Client) Sessions(ctx context.Context) ([]SessionInfo, error) {
	var list struct {
		Sessions []SessionInfo `json:"sessions"`
	}
	err := c.retrying(ctx, true, func() error {
		return c.attempt(ctx, c.cfg.margin, http.MethodGet, "/v1/sessions", nil, "application/json", "", readJSON(&list))
	})
	return list.Sessions, err
}

// Session returns the caller's open session id (GET /v1/sessions/{id}):
// its settings, state, memory in use and expiry. An id not the caller's is
// execapi.ErrSessionNotFound; an ended session a *SessionEndedError, one
// lost with its cluster worker a *SessionLostError (as every method's).
func (c *Client) Session(ctx context.Context, id string) (SessionInfo, error) {
	var info SessionInfo
	err := c.retrying(ctx, true, func() error {
		return c.attempt(ctx, c.cfg.margin, http.MethodGet, sessionPath(id, ""), nil, "application/json", "", readJSON(&info))
	})
	return info, err
}

// RunInSession runs req in session id (POST /v1/sessions/{id}/exec): its
// runtime is the session's when empty; its network and memory may only
// repeat the session's. Retried as Run is.
func (c *Client) RunInSession(ctx context.Context, id string, req Request, opts ...CallOption) (SessionResult, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return SessionResult{}, fmt.Errorf("encode request: %w", err)
	}
	call := c.callFor(opts)
	var res SessionResult
	err = c.retrying(ctx, call.key != "", func() error {
		return c.attempt(ctx, c.execBound(req), http.MethodPost, sessionPath(id, "/exec"), body, "application/json", call.key,
			func(resp *http.Response) error {
				data, err := readBody(resp)
				if err != nil {
					return err
				}
				if err := json.Unmarshal(data, &res); err != nil {
					return fmt.Errorf("the result is not the expected JSON: %w", err)
				}
				// The embedded Result's own decoding (files as bytes,
				// an older server's outcome).
				if res.Result, err = decodeResult(data); err != nil {
					return fmt.Errorf("the result is not the expected JSON: %w", err)
				}
				return nil
			})
	})
	if err != nil {
		return SessionResult{}, err
	}
	return res, nil
}

// filePath is a session file's route: path is absolute in the sandbox,
// each of its parts escaped.
func filePath(id, path string) string {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return sessionPath(id, "/files/"+strings.Join(parts, "/"))
}

// ReadSessionFile returns the bytes of the file at path (absolute) in
// session id (GET /v1/sessions/{id}/files/{path}).
func (c *Client) ReadSessionFile(ctx context.Context, id, path string) ([]byte, error) {
	var data []byte
	err := c.retrying(ctx, true, func() error {
		return c.attempt(ctx, c.cfg.margin, http.MethodGet, filePath(id, path), nil, "application/octet-stream", "",
			func(resp *http.Response) error {
				var err error
				data, err = readBody(resp)
				return err
			})
	})
	return data, err
}

// WriteSessionFile writes data as the file at path (absolute) in session
// id, its missing parents made (PUT /v1/sessions/{id}/files/{path}); a
// write is the same each time, so it is retried as a read is.
func (c *Client) WriteSessionFile(ctx context.Context, id, path string, data []byte) error {
	if data == nil {
		data = []byte{}
	}
	return c.retrying(ctx, true, func() error {
		return c.attempt(ctx, c.cfg.margin, http.MethodPut, filePath(id, path), data, "application/json", "",
			func(resp *http.Response) error { _, err := readBody(resp); return err })
	})
}

// CloseSession ends session id and purges it (DELETE /v1/sessions/{id}):
// the answer says whether its teardown was verified. A lost connection is
// not retried: the retry would find the session ended.
func (c *Client) CloseSession(ctx context.Context, id string) (SessionEnd, error) {
	var end SessionEnd
	err := c.retrying(ctx, false, func() error {
		return c.attempt(ctx, c.cfg.margin, http.MethodDelete, sessionPath(id, ""), nil, "application/json", "", readJSON(&end))
	})
	return end, err
}

// readJSON reads a 2xx answer's JSON into v.
func readJSON(v any) func(*http.Response) error {
	return func(resp *http.Response) error {
		data, err := readBody(resp)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, v); err != nil {
			return fmt.Errorf("the answer is not the expected JSON: %w", err)
		}
		return nil
	}
}

// sessionError is the contract's error of a session's answer, for this
// module's front ends that hold the client as a service; nil for other
// answers.
func (e *APIError) sessionError() error {
	switch e.Code {
	case CodeSessionNotFound:
		return execapi.ErrSessionNotFound
	case CodeSessionEnded:
		if e.Ended != nil {
			return &execapi.SessionEndedError{End: *e.Ended}
		}
	case CodeSessionLost:
		return &execapi.SessionLostError{Why: "reported by the server: " + e.Message}
	case CodeFileNotFound:
		return execapi.ErrSessionFileNotFound
	case CodeForkUnsupported:
		return execapi.ErrForkUnsupported
	}
	return nil
}
