package httpapi

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
)

// readySessions is a scripted service holding sessions that reports its
// own readiness, as readyService does.
type readySessions struct {
	*execapitest.Sessions
	ready *readyService
}

func (r *readySessions) Ready(ctx context.Context) error { return r.ready.Ready(ctx) }

// ownNotFound reports whether a 404's body is a route's own (a session or
// its file not found), which the document lists, rather than the
// catch-all's not_found, which it describes in words.
func ownNotFound(body []byte) bool {
	var doc ErrorDocument
	return json.Unmarshal(body, &doc) == nil && doc.Error.Code != "" && doc.Error.Code != CodeNotFound
}

var (
	sessionPathID   = regexp.MustCompile(`^/v1/sessions/[^/]+`)
	sessionPathFile = regexp.MustCompile(`/files/.*$`)
)

// docPath is the document's path of a request's: a session route's with
// its parameters.
func docPath(path string) string {
	if !strings.HasPrefix(path, "/v1/sessions/") {
		return path
	}
	path = sessionPathID.ReplaceAllString(path, "/v1/sessions/{id}")
	return sessionPathFile.ReplaceAllString(path, "/files/{path}")
}

// validatesSessionAnswers produces every answer the document gives the
// session routes, on ts (sessions on over held), with key and a key of 1
// run a minute whose run is spent (rateKey, whose id is rateID).
func validatesSessionAnswers(t *testing.T, c *docChecker, ts *testServer, held *execapitest.Sessions, key, rateKey, rateID string) {
	foreign := map[string]string{"Origin": "https://elsewhere.example"}
	const sessions = "/v1/sessions"
	open := func(k string) execapi.SessionInfo {
		t.Helper()
		a := c.expect(ts, 201, "", "POST", sessions, k, `{"runtime":"bash"}`, nil)
		var info execapi.SessionInfo
		if err := json.Unmarshal(a.body, &info); err != nil {
			t.Fatal(err)
		}
		return info
	}
	_, other := ts.key("sessions-other", 1000, 10)
	s := open(key)
	id := "/v1/sessions/" + s.ID
	unknown := "/v1/sessions/" + execapi.NewSessionID()

	// Each route: no key, a foreign origin, an unknown id.
	for _, r := range []struct{ method, path, body string }{
		{"POST", sessions, `{"runtime":"bash"}`}, {"GET", sessions, ""}, {"GET", id, ""}, {"DELETE", id, ""}, {"POST", id + "/exec", execBody("true")},
		{"POST", id + "/fork", ""}, {"GET", id + "/files/f", ""}, {"PUT", id + "/files/f", "x"},
	} {
		c.expect(ts, 401, CodeUnauthorized, r.method, r.path, "", r.body, nil)
		c.expect(ts, 403, CodeForbidden, r.method, r.path, key, r.body, foreign)
		if strings.HasPrefix(r.path, id) {
			c.expect(ts, 404, execapi.CodeSessionNotFound, r.method, unknown+strings.TrimPrefix(r.path, id), key, r.body, nil)
		}
	}

	// POST /v1/sessions
	c.expect(ts, 400, execapi.CodeInvalidRequest, "POST", sessions, key, `{"runtime":"bash","idle_ttl_ms":0}`, nil)
	c.expect(ts, 415, CodeMediaType, "POST", sessions, key, `{"runtime":"bash"}`, map[string]string{"Content-Type": "text/plain"})
	idem := map[string]string{IdempotencyKeyHeader: "open-doc"}
	c.expect(ts, 201, "", "POST", sessions, other, `{"runtime":"bash"}`, idem)
	c.expect(ts, 409, CodeIdempotencyKeyReused, "POST", sessions, other, `{"runtime":"python3.13"}`, idem)
	open(key) // the key's second: its maximum
	c.expect(ts, 429, execapi.CodeSessionLimit, "POST", sessions, key, `{"runtime":"bash"}`, nil)
	c.expect(ts, 429, execapi.CodeSessionLimit, "POST", id+"/fork", key, "", nil)
	// GET /v1/sessions, GET /v1/sessions/{id}
	c.expect(ts, 200, "", "GET", sessions, key, "", nil)
	c.expect(ts, 200, "", "GET", id, key, "", nil)
	c.expect(ts, 404, execapi.CodeSessionNotFound, "GET", id, other, "", nil)

	// POST /v1/sessions/{id}/exec
	c.expect(ts, 200, "", "POST", id+"/exec", key, execBody("echo hi"), nil)
	c.expect(ts, 200, "", "POST", id+"/exec", key, execBody("echo streamed"), map[string]string{"Accept": "text/event-stream"})
	c.expect(ts, 400, execapi.CodeInvalidRequest, "POST", id+"/exec", key, `{"code":"true","network":"egress"}`, nil)
	c.expect(ts, 413, CodeBodyTooLarge, "POST", id+"/exec", key, execBody(strings.Repeat("x", 5000)), nil)
	c.expect(ts, 415, CodeMediaType, "POST", id+"/exec", key, execBody("true"), map[string]string{"Content-Type": "text/plain"})
	eidem := map[string]string{IdempotencyKeyHeader: "exec-doc"}
	c.expect(ts, 200, "", "POST", id+"/exec", key, execBody("echo once"), eidem)
	c.expect(ts, 409, CodeIdempotencyKeyReused, "POST", id+"/exec", key, execBody("echo twice"), eidem)
	c.expect(ts, 500, execapi.CodeInternal, "POST", id+"/exec", key, execBody("fail"), nil)
	c.expect(ts, 502, execapi.CodeWorkerLost, "POST", id+"/exec", key, execBody("lost"), nil)
	ctx := execapi.WithCaller(context.Background(), rateID)
	rated, err := held.OpenSession(ctx, execapi.CheckedSession{Runtime: "bash", Network: "none"})
	if err != nil {
		t.Fatal(err)
	}
	c.expect(ts, 429, execapi.CodeRateLimited, "POST", "/v1/sessions/"+rated.ID+"/exec", rateKey, execBody("true"), nil)

	// Files.
	c.expect(ts, 200, "", "PUT", id+"/files/data.bin", key, "\x00\x01\xff", nil)
	c.expect(ts, 200, "", "GET", id+"/files/data.bin", key, "", nil)
	c.expect(ts, 404, execapi.CodeFileNotFound, "GET", id+"/files/none", key, "", nil)
	c.expect(ts, 400, execapi.CodeInvalidRequest, "GET", id+"/files/proc", key, "", nil)
	c.expect(ts, 400, execapi.CodeInvalidRequest, "PUT", id+"/files/proc", key, "x", nil)
	held.PutFile(s.ID, "/big", make([]byte, 10<<20+1))
	c.expect(ts, 413, execapi.CodeFileTooLarge, "GET", id+"/files/big", key, "", nil)
	// A write past the largest file: on a server whose largest is small.
	p := execapi.DefaultPolicy()
	p.MaxFileBytes = 16
	small := startServer(t, serverOptions{fake: execapitest.NewWithPolicy(p, "bash"), sessions: true})
	si := small.openSession("", `{"runtime":"bash"}`)
	c.expect(small, 413, execapi.CodeFileTooLarge, "PUT", "/v1/sessions/"+si.ID+"/files/f", "", strings.Repeat("x", 17), nil)

	// Fork.
	c.expect(ts, 400, execapi.CodeInvalidRequest, "POST", id+"/fork", key, `{"x":1}`, nil)

	// Ended.
	held.End(s.ID, execapi.EndIdleTTL)
	for _, r := range []struct{ method, path, body string }{
		{"GET", id, ""}, {"DELETE", id, ""}, {"POST", id + "/exec", execBody("true")}, {"POST", id + "/fork", ""},
		{"GET", id + "/files/data.bin", ""}, {"PUT", id + "/files/f", "x"},
	} {
		c.expect(ts, 410, execapi.CodeSessionEnded, r.method, r.path, key, r.body, nil)
	}
	// Close; then fork_unsupported on an open one with room.
	mine := c.expect(ts, 200, "", "GET", sessions, key, "", nil)
	var list sessionList
	if err := json.Unmarshal(mine.body, &list); err != nil || len(list.Sessions) != 1 {
		t.Fatalf("the key's sessions: %s", mine.body)
	}
	last := "/v1/sessions/" + list.Sessions[0].ID
	held.FailForks(execapi.ErrForkUnsupported)
	c.expect(ts, 409, execapi.CodeForkUnsupported, "POST", last+"/fork", key, "", nil)
	held.FailForks(nil)
	forked := c.expect(ts, 201, "", "POST", last+"/fork", key, "{}", nil)
	c.expect(ts, 200, "", "DELETE", last, key, "", nil)
	// Lost with its worker.
	var child execapi.SessionInfo
	if err := json.Unmarshal(forked.body, &child); err != nil {
		t.Fatal(err)
	}
	held.Lose(child.ID)
	c.expect(ts, 502, execapi.CodeSessionLost, "GET", "/v1/sessions/"+child.ID, key, "", nil)
	c.expect(ts, 502, execapi.CodeSessionLost, "GET", "/v1/sessions/"+child.ID+"/files/a", key, "", nil)
	c.expect(ts, 502, execapi.CodeSessionLost, "PUT", "/v1/sessions/"+child.ID+"/files/a", key, "data", nil)
	c.expect(ts, 502, execapi.CodeSessionLost, "POST", "/v1/sessions/"+child.ID+"/fork", key, "", nil)
	c.expect(ts, 502, execapi.CodeSessionLost, "DELETE", "/v1/sessions/"+child.ID, key, "", nil)
}
