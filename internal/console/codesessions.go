package console

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/store"
)

// The Sessions page: the open code sessions (not the console's own
// sign-in sessions) as the store's rows have them, and the operator's End.
// The console may run in a process that does not hold the sessions (a
// front end of many), so End asks through the row, as `scratchrun sessions
// end` does, and the holding server ends it at its next poll.

// SessionRows is what the Sessions page needs of the store (*store.Store
// is one); each method is store.Store's: see there.
type SessionRows interface {
	OpenCodeSessions(ctx context.Context, owner string, all bool) ([]store.CodeSession, error)
	RequestCodeSessionEnd(ctx context.Context, prefix string) (store.CodeSession, error)
}

var _ SessionRows = (*store.Store)(nil)

// codeSessionView is a session as the Sessions page shows it: by the hash
// of its id (the id is its owner's capability, and the store has none).
type codeSessionView struct {
	IDHash       string   `json:"id_hash"`
	KeyID        string   `json:"key_id"`
	KeyName      string   `json:"key_name"`
	Runtime      string   `json:"runtime"`
	Worker       string   `json:"worker"`
	Created      jsonTime `json:"created"`
	Expires      jsonTime `json:"expires"`
	EndRequested bool     `json:"end_requested"`
	// MemoryBytes is what its sandbox used, when the server holding it is
	// this one and reports it (null otherwise).
	MemoryBytes *int64 `json:"memory_bytes"`
}

// codeSessionsPage is GET /console/api/sessions.
type codeSessionsPage struct {
	Sessions []codeSessionView `json:"sessions"`
	// EndWithinSeconds is how soon a server ends a session the operator
	// asked to end (its poll).
	EndWithinSeconds float64 `json:"end_within_seconds"`
}

// listCodeSessions is GET /console/api/sessions: every open session,
// oldest first.
func (h *handlers) listCodeSessions(w http.ResponseWriter, r *http.Request) {
	rows, err := h.cfg.Sessions.OpenCodeSessions(r.Context(), "", true)
	if err != nil {
		h.internal(w, "list sessions", err)
		return
	}
	names, err := h.keyNames(r)
	if err != nil {
		h.internal(w, "list keys", err)
		return
	}
	memory := h.sessionMemory(r.Context())
	out := codeSessionsPage{Sessions: make([]codeSessionView, 0, len(rows)), EndWithinSeconds: h.cfg.SessionEndPoll.Seconds()}
	for _, c := range rows {
		out.Sessions = append(out.Sessions, viewCodeSession(c, names, memory))
	}
	writeJSON(w, http.StatusOK, out)
}

// endCodeSession is POST /console/api/sessions/{hash}/end.
func (h *handlers) endCodeSession(w http.ResponseWriter, r *http.Request) {
	c, err := h.cfg.Sessions.RequestCodeSessionEnd(r.Context(), r.PathValue("hash"))
	if errors.Is(err, store.ErrCodeSessionNotFound) {
		writeError(w, http.StatusNotFound, httpapi.CodeNotFound, "no open session has this id hash (it ended meanwhile?)")
		return
	}
	if err != nil {
		writeFieldError(w, "hash", err.Error())
		return
	}
	names, err := h.keyNames(r)
	if err != nil {
		h.internal(w, "list keys", err)
		return
	}
	h.log.Info("console: session end requested", "session_hash", c.IDHash, "key", c.Owner)
	writeJSON(w, http.StatusOK, map[string]any{"session": viewCodeSession(c, names, nil), "end_within_seconds": h.cfg.SessionEndPoll.Seconds()})
}

func viewCodeSession(c store.CodeSession, names map[string]string, memory map[string]int64) codeSessionView {
	v := codeSessionView{
		IDHash: c.IDHash, KeyID: c.Owner, KeyName: names[c.Owner], Runtime: c.Runtime, Worker: c.Worker,
		Created: jsonTime(c.Created), Expires: jsonTime(c.Expires), EndRequested: c.EndRequested,
	}
	if m, ok := memory[c.IDHash]; ok {
		v.MemoryBytes = &m
	}
	return v
}

// sessionMemory is the memory of the sessions this server holds, by id
// hash, when it reports it; a failure only leaves the column empty.
func (h *handlers) sessionMemory(ctx context.Context) map[string]int64 {
	if h.cfg.SessionAdmin == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	all, err := h.cfg.SessionAdmin.AllSessions(ctx)
	if err != nil {
		h.log.Warn("console: read the sessions' memory", "err", err)
		return nil
	}
	out := make(map[string]int64, len(all))
	for _, s := range all {
		out[store.HashSessionID(s.ID)] = s.MemoryBytes
	}
	return out
}
