package console

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/store"
)

// adminOf is a server's own sessions, as its SessionAdmin lists them (the
// console reads only their memory).
type adminOf []execapi.SessionInfo

func (a adminOf) AllSessions(context.Context) ([]execapi.SessionInfo, error) { return a, nil }

func (adminOf) EndSession(context.Context, execapi.SessionRef) (execapi.SessionEnd, error) {
	return execapi.SessionEnd{}, execapi.ErrSessionNotFound
}

// The Sessions page lists the store's open sessions by id hash (never the
// id) with their key's name and, for those the server holds, memory; End
// (with the session's CSRF token) asks through the row; without sessions
// the routes are not there.
func TestCodeSessionsThroughTheConsole(t *testing.T) {
	off := startConsole(t, consoleOptions{}).browser()
	off.signIn()
	if r := off.do(http.MethodGet, "/console/api/sessions", "", "", nil); r.status != http.StatusNotFound {
		t.Errorf("sessions off: GET /console/api/sessions = %d %s", r.status, r.body)
	}

	held, other := execapi.NewSessionID(), execapi.NewSessionID()
	tc := startConsole(t, consoleOptions{sessions: true, sessionAdmin: adminOf{{ID: held, MemoryBytes: 42 << 20}}})
	ctx := context.Background()
	k, _, err := tc.keys.CreateKey(ctx, store.NewKey{Name: "agents", RatePerMin: 60, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, id := range []string{held, other} {
		if err := tc.keys.InsertCodeSession(ctx, store.CodeSession{IDHash: store.HashSessionID(id), Owner: k.ID, Server: "h/e1_1",
			Worker: []string{"", "w2"}[i], Runtime: "python3.13", Created: now.Add(time.Duration(i) * time.Second), Expires: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if r := tc.browser().do(http.MethodGet, "/console/api/sessions", "", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("without a sign-in: %d", r.status)
	}
	b := tc.browser()
	b.signIn()
	var page codeSessionsPage
	b.getJSON("/console/api/sessions", &page)
	if len(page.Sessions) != 2 || page.EndWithinSeconds != 2 {
		t.Fatalf("sessions page: %+v", page)
	}
	h, o := page.Sessions[0], page.Sessions[1]
	if h.IDHash != store.HashSessionID(held) || h.KeyName != "agents" || h.KeyID != k.ID || h.MemoryBytes == nil || *h.MemoryBytes != 42<<20 || h.Worker != "" {
		t.Errorf("the held session: %+v", h)
	}
	if o.MemoryBytes != nil || o.Worker != "w2" || o.EndRequested {
		t.Errorf("the other server's session: %+v", o)
	}
	if r := b.do(http.MethodGet, "/console/api/sessions", "", "", nil); strings.Contains(r.body, held) || strings.Contains(r.body, other) {
		t.Error("the page shows a session id")
	}

	path := "/console/api/sessions/" + o.IDHash[:12] + "/end"
	if r := b.do(http.MethodPost, path, "application/json", "{}", nil); r.status != http.StatusForbidden {
		t.Errorf("end without the CSRF token: %d %s", r.status, r.body)
	}
	if r := b.post(path, "{}"); r.status != http.StatusOK || !strings.Contains(r.body, `"end_requested":true`) {
		t.Fatalf("end: %d %s", r.status, r.body)
	}
	if c, err := tc.keys.CodeSession(ctx, o.IDHash); err != nil || !c.EndRequested || !c.Open() {
		t.Errorf("row after end: %+v, %v", c, err)
	}
	b.getJSON("/console/api/sessions", &page)
	if !page.Sessions[1].EndRequested || page.Sessions[0].EndRequested {
		t.Errorf("after end: %+v", page.Sessions)
	}
	if r := b.post("/console/api/sessions/zz/end", "{}"); r.status != http.StatusBadRequest {
		t.Errorf("end of a malformed hash: %d %s", r.status, r.body)
	}
	if r := b.post("/console/api/sessions/"+strings.Repeat("0", 64)+"/end", "{}"); r.status != http.StatusNotFound {
		t.Errorf("end of no session: %d %s", r.status, r.body)
	}
}
