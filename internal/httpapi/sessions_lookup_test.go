package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// A call in a session looks its session up once (SessionService.Session)
// and never lists the caller's sessions: in a cluster a list asks every
// worker, and a call must cost one worker's answer.
func TestSessionCallLooksUpWithoutListing(t *testing.T) {
	ts, key := startSessionServer(t)
	info := ts.openSession(key, `{"runtime":"bash"}`)
	for range 3 {
		if a := ts.send("POST", "/v1/sessions/"+info.ID+"/exec", key, `{"code":"echo hi"}`, nil); a.status != http.StatusOK {
			t.Fatalf("call: %d %s", a.status, a.body)
		}
	}
	lists, lookups := ts.sessions.Lookups()
	if lists != 0 || lookups != 3 {
		t.Errorf("3 calls listed %d times and looked up %d times, want 0 and 3", lists, lookups)
	}
}

// GET /v1/sessions/{id} is the caller's open session's SessionInfo; an
// unknown id, another caller's and one of no id's shape are the same 404,
// an ended one 410 with its end, a lost one 502. A call in an ended, lost
// or unknown session gets the look-up's answer and never reaches the
// service's ExecInSession. Nothing lists.
func TestSessionLookup(t *testing.T) {
	ts, key := startSessionServer(t)
	_, other := ts.key("other", 1000, 8)
	info := ts.openSession(key, `{"runtime":"bash","idle_ttl_ms":60000}`)
	path := "/v1/sessions/" + info.ID

	a := ts.send("GET", path, key, "", nil)
	if a.status != http.StatusOK {
		t.Fatalf("look-up: %d %s", a.status, a.body)
	}
	var got execapi.SessionInfo
	if err := json.Unmarshal(a.body, &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != info.ID || got.Runtime != "bash" || got.IdleTTLMS != 60000 || !got.ExpiresAt.Equal(info.ExpiresAt) {
		t.Errorf("looked up %+v, want the opened %+v", got, info)
	}

	unknown := ts.send("GET", "/v1/sessions/"+execapi.NewSessionID(), key, "", nil)
	wantError(t, "an unknown id", unknown, http.StatusNotFound, execapi.CodeSessionNotFound, "")
	for what, a := range map[string]answer{
		"another caller's session": ts.send("GET", path, other, "", nil),
		"an id of no id's shape":   ts.send("GET", "/v1/sessions/ses_nope", key, "", nil),
	} {
		wantError(t, what, a, http.StatusNotFound, execapi.CodeSessionNotFound, "")
		if !bytes.Equal(a.body, unknown.body) {
			t.Errorf("%s: %s, want the unknown id's answer %s", what, a.body, unknown.body)
		}
	}
	a = ts.send("POST", "/v1/sessions/"+execapi.NewSessionID()+"/exec", key, `{"code":"true"}`, nil)
	wantError(t, "a call in an unknown session", a, http.StatusNotFound, execapi.CodeSessionNotFound, "")

	ts.sessions.End(info.ID, execapi.EndMaxLifetime)
	for what, a := range map[string]answer{
		"an ended session's look-up": ts.send("GET", path, key, "", nil),
		"a call in an ended session": ts.send("POST", path+"/exec", key, `{"code":"true"}`, nil),
	} {
		e := wantError(t, what, a, http.StatusGone, execapi.CodeSessionEnded, "")
		if e.Ended == nil || e.Ended.Reason != execapi.EndMaxLifetime {
			t.Errorf("%s: %+v, want its end (max_lifetime)", what, e)
		}
	}

	lost := ts.openSession(key, `{"runtime":"bash"}`)
	ts.sessions.Lose(lost.ID)
	a = ts.send("GET", "/v1/sessions/"+lost.ID, key, "", nil)
	wantError(t, "a lost session's look-up", a, http.StatusBadGateway, execapi.CodeSessionLost, "")
	a = ts.send("POST", "/v1/sessions/"+lost.ID+"/exec", key, `{"code":"true"}`, nil)
	wantError(t, "a call in a lost session", a, http.StatusBadGateway, execapi.CodeSessionLost, "")

	if calls := ts.sessions.SessionCalls(); len(calls) != 0 {
		t.Errorf("%d calls reached ExecInSession, want none", len(calls))
	}
	if lists, _ := ts.sessions.Lookups(); lists != 0 {
		t.Errorf("the look-ups listed %d times, want 0", lists)
	}
}
