package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/store"
)

// These tests run the session routes of a real server over a scripted
// service that holds sessions (execapitest.Sessions): the front end's
// logic alone. The end-to-end test through the real engine is the
// engine's.

// testSessionPolicy is the session policy of the tests: on, 2 sessions a
// key, 8 in all.
func testSessionPolicy() execapi.SessionPolicy {
	sp := execapi.DefaultSessionPolicy()
	sp.Enabled, sp.PerKey, sp.Max = true, 2, 8
	return sp
}

// startSessionServer is a server with sessions on over the scripted
// service, and a key of its own.
func startSessionServer(t *testing.T) (*testServer, string) {
	t.Helper()
	ts := startServer(t, serverOptions{fake: scripted(), sessions: true})
	_, key := ts.key("sessions", 1000, 8)
	return ts, key
}

// send is ts.do that fails the test on a transport error.
func (ts *testServer) send(method, path, key, body string, header map[string]string) answer {
	ts.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	a, err := ts.do(context.Background(), method, path, key, rd, header)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	return a
}

// openSession opens a session of key's and returns its info.
func (ts *testServer) openSession(key, body string) execapi.SessionInfo {
	ts.t.Helper()
	a := ts.send(http.MethodPost, "/v1/sessions", key, body, nil)
	if a.status != http.StatusCreated {
		ts.t.Fatalf("open: %d %s", a.status, a.body)
	}
	var info execapi.SessionInfo
	if err := json.Unmarshal(a.body, &info); err != nil {
		ts.t.Fatal(err)
	}
	return info
}

// wantError fails t unless a is the error document with status and code
// (and field, when given).
func wantError(t *testing.T, what string, a answer, status int, code, field string) ErrorDetail {
	t.Helper()
	if a.status != status {
		t.Fatalf("%s: %d %s, want %d %s", what, a.status, a.body, status, code)
	}
	e := a.errorBody(t)
	if e.Code != code || e.Field != field {
		t.Fatalf("%s: %+v, want code %s field %q", what, e, code, field)
	}
	return e
}

// Sessions off, the session routes are the catch-all's 404, as every path
// the server does not serve (TestAPIUnchangedWithoutSessions holds the
// bytes of the whole API).
func TestSessionRoutesOffAreNotServed(t *testing.T) {
	ts := startServer(t, serverOptions{fake: scripted()})
	_, key := ts.key("off", 100, 4)
	id := execapi.NewSessionID()
	for _, r := range []struct{ method, path string }{
		{"POST", "/v1/sessions"}, {"GET", "/v1/sessions"}, {"DELETE", "/v1/sessions/" + id},
		{"POST", "/v1/sessions/" + id + "/exec"}, {"GET", "/v1/sessions/" + id + "/files/tmp/x"},
	} {
		a := ts.send(r.method, r.path, key, `{"runtime":"bash"}`, nil)
		wantError(t, r.method+" "+r.path, a, http.StatusNotFound, CodeNotFound, "")
	}
}

// A session's life through the routes: open, list, run (state kept by the
// service, the answer a SessionResult), files both ways binary-safe, fork,
// close; then the owner's next use is 410 with the reason.
func TestSessionLifecycle(t *testing.T) {
	ts, key := startSessionServer(t)
	info := ts.openSession(key, `{"runtime":"bash","idle_ttl_ms":60000}`)
	if !execapi.IsSessionID(info.ID) || info.Runtime != "bash" || info.IdleTTLMS != 60000 || info.State != execapi.SessionIdle {
		t.Fatalf("open answered %+v", info)
	}
	base := "/v1/sessions/" + info.ID

	a := ts.send("GET", "/v1/sessions", key, "", nil)
	var list sessionList
	if a.status != 200 || json.Unmarshal(a.body, &list) != nil || len(list.Sessions) != 1 || list.Sessions[0].ID != info.ID {
		t.Fatalf("list: %d %s", a.status, a.body)
	}
	if strings.Contains(string(a.body), "owner") || strings.Contains(string(a.body), "worker") {
		t.Errorf("the listing shows the owner or worker: %s", a.body)
	}

	a = ts.send("POST", base+"/exec", key, `{"code":"echo hi"}`, nil)
	var res execapi.SessionResult
	if a.status != 200 || json.Unmarshal(a.body, &res) != nil {
		t.Fatalf("exec: %d %s", a.status, a.body)
	}
	if res.Stdout != "hi\n" || res.StatePurged || res.Session.ID != info.ID || res.Session.ExpiresAt.IsZero() {
		t.Errorf("exec answered %s", a.body)
	}
	calls := ts.sessions.SessionCalls()
	if len(calls) != 1 || calls[0].ID != info.ID || calls[0].Checked.Runtime != "bash" || calls[0].Checked.MemoryMB != info.Limits.MemoryMB {
		t.Errorf("the service got %+v", calls)
	}

	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	a = ts.send("PUT", base+"/files/tmp/data.bin", key, string(all), map[string]string{"Content-Type": "application/octet-stream"})
	if a.status != 200 || string(a.body) != `{"path":"/tmp/data.bin","size":256}`+"\n" {
		t.Fatalf("put: %d %s", a.status, a.body)
	}
	if got, _ := ts.sessions.File(info.ID, "/tmp/data.bin"); !bytes.Equal(got, all) {
		t.Errorf("the session holds %q", got)
	}
	a = ts.send("GET", base+"/files/tmp/data.bin", key, "", nil)
	if a.status != 200 || !bytes.Equal(a.body, all) || a.header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("get: %d %q %s", a.status, a.body, a.header.Get("Content-Type"))
	}

	a = ts.send("POST", base+"/fork", key, "", nil)
	var child execapi.SessionInfo
	if a.status != 201 || json.Unmarshal(a.body, &child) != nil || child.ForkedFrom != info.ID || child.ID == info.ID {
		t.Fatalf("fork: %d %s", a.status, a.body)
	}
	if got, _ := ts.sessions.File(child.ID, "/tmp/data.bin"); !bytes.Equal(got, all) {
		t.Errorf("the fork holds %q", got)
	}

	a = ts.send("DELETE", base, key, "", nil)
	var end execapi.SessionEnd
	if a.status != 200 || json.Unmarshal(a.body, &end) != nil || end.Reason != execapi.EndDeleted || !end.StatePurged {
		t.Fatalf("delete: %d %s", a.status, a.body)
	}
	for _, r := range []struct{ method, path, body string }{
		{"POST", base + "/exec", `{"code":"true"}`}, {"DELETE", base, ""}, {"GET", base + "/files/tmp/data.bin", ""},
		{"PUT", base + "/files/tmp/x", "x"}, {"POST", base + "/fork", ""},
	} {
		a = ts.send(r.method, r.path, key, r.body, nil)
		e := wantError(t, r.method+" after close", a, http.StatusGone, execapi.CodeSessionEnded, "")
		if e.Ended == nil || e.Ended.Reason != execapi.EndDeleted {
			t.Errorf("%s after close: %s, want the end's reason", r.method, a.body)
		}
	}
	a = ts.send("GET", "/v1/sessions", key, "", nil)
	if json.Unmarshal(a.body, &list) != nil || len(list.Sessions) != 1 || list.Sessions[0].ID != child.ID {
		t.Errorf("list after close: %s", a.body)
	}
}

// Another caller's session id is answered exactly as an unknown id and as
// an id of no session's shape, on every route, byte for byte: an id tells
// a caller nothing of sessions not its own. Nothing of the owner's
// session changes.
func TestSessionOfAnotherCallerIsNotFound(t *testing.T) {
	ts, owner := startSessionServer(t)
	_, other := ts.key("other", 1000, 8)
	info := ts.openSession(owner, `{"runtime":"bash"}`)
	ts.send("PUT", "/v1/sessions/"+info.ID+"/files/tmp/mine", owner, "secret", nil)

	for _, r := range []struct{ method, suffix, body string }{
		{"POST", "/exec", `{"code":"echo stolen"}`}, {"DELETE", "", ""}, {"GET", "/files/tmp/mine", ""},
		{"PUT", "/files/tmp/mine", "overwritten"}, {"POST", "/fork", ""},
	} {
		var answers []answer
		for _, id := range []string{info.ID, execapi.NewSessionID(), "ses_short", "not-a-session"} {
			a := ts.send(r.method, "/v1/sessions/"+id+r.suffix, other, r.body, nil)
			wantError(t, r.method+" "+r.suffix+" of "+id, a, http.StatusNotFound, execapi.CodeSessionNotFound, "")
			answers = append(answers, a)
		}
		for _, a := range answers[1:] {
			if !bytes.Equal(a.body, answers[0].body) || a.header.Get("Content-Type") != answers[0].header.Get("Content-Type") ||
				a.header.Get("Content-Length") != answers[0].header.Get("Content-Length") {
				t.Errorf("%s %s: another's session answered %q, an unknown id %q", r.method, r.suffix, answers[0].body, a.body)
			}
		}
	}
	if got, _ := ts.sessions.File(info.ID, "/tmp/mine"); string(got) != "secret" {
		t.Errorf("the owner's file is %q", got)
	}
	if n := len(ts.sessions.SessionCalls()); n != 0 {
		t.Errorf("%d calls ran in the owner's session", n)
	}
	a := ts.send("GET", "/v1/sessions", other, "", nil)
	if string(a.body) != `{"sessions":[]}`+"\n" {
		t.Errorf("the other caller's listing: %s", a.body)
	}
}

// Every session error of the service has its status and code; the
// refusals their reasons.
func TestSessionErrorAnswers(t *testing.T) {
	ts, key := startSessionServer(t)
	first := ts.openSession(key, `{"runtime":"bash"}`)
	second := ts.openSession(key, `{"runtime":"bash"}`)
	base := "/v1/sessions/" + first.ID

	a := ts.send("POST", "/v1/sessions", key, `{"runtime":"bash"}`, nil)
	e := wantError(t, "a third session", a, http.StatusTooManyRequests, execapi.CodeSessionLimit, "")
	if e.Reason != string(execapi.RefusedKeySessions) || e.Limit != 2 {
		t.Errorf("a third session: %+v", e)
	}
	a = ts.send("POST", base+"/fork", key, "", nil)
	wantError(t, "a fork past the key's maximum", a, http.StatusTooManyRequests, execapi.CodeSessionLimit, "")

	// The server's maximum, reached by other keys.
	for i := range 3 {
		_, k := ts.key(fmt.Sprintf("filler%d", i), 1000, 8)
		ts.openSession(k, `{"runtime":"bash"}`)
		ts.openSession(k, `{"runtime":"bash"}`)
	}
	_, late := ts.key("late", 1000, 8)
	a = ts.send("POST", "/v1/sessions", late, `{"runtime":"bash"}`, nil)
	e = wantError(t, "a session past the server's maximum", a, http.StatusTooManyRequests, execapi.CodeAtCapacity, "")
	if e.Reason != string(execapi.RefusedSessionsFull) || a.header.Get("Retry-After") == "" {
		t.Errorf("sessions full: %+v, Retry-After %q", e, a.header.Get("Retry-After"))
	}

	a = ts.send("GET", base+"/files/tmp/none", key, "", nil)
	wantError(t, "a missing file", a, http.StatusNotFound, execapi.CodeFileNotFound, "")

	ts.sessions.FailForks(execapi.ErrForkUnsupported)
	ts.sessions.End(second.ID, execapi.EndIdleTTL) // room for the fork
	a = ts.send("POST", base+"/fork", key, "{}", nil)
	wantError(t, "a fork the level cannot make", a, http.StatusConflict, execapi.CodeForkUnsupported, "")

	ts.sessions.FailNextCall(&execapi.CallNotStartedError{Reason: "/code/call-9-x.sh: No space left on device"})
	a = ts.send("POST", base+"/exec", key, `{"code":"true"}`, nil)
	wantError(t, "a call the session could not start", a, http.StatusConflict, execapi.CodeSessionCallNotStarted, "")
	if !strings.Contains(string(a.body), "No space left on device") {
		t.Errorf("the answer does not name the sandbox's reason: %s", a.body)
	}

	a = ts.send("POST", "/v1/sessions/"+second.ID+"/exec", key, `{"code":"true"}`, nil)
	e = wantError(t, "a call after the idle TTL", a, http.StatusGone, execapi.CodeSessionEnded, "")
	if e.Ended == nil || e.Ended.Reason != execapi.EndIdleTTL || !strings.Contains(e.Message, "idle TTL") {
		t.Errorf("ended: %+v", e)
	}

	ts.sessions.Lose(first.ID)
	a = ts.send("POST", base+"/exec", key, `{"code":"true"}`, nil)
	wantError(t, "a call in a lost session", a, http.StatusBadGateway, execapi.CodeSessionLost, "")
	a = ts.send("GET", base+"/files/tmp/x", key, "", nil)
	wantError(t, "a read of a lost session", a, http.StatusBadGateway, execapi.CodeSessionLost, "")
}

// A file bigger than a read returns is 413 file_too_large; so is a write
// past the policy's largest file, whether its length is declared or not,
// and nothing is written. A file of the largest size is written whole.
func TestSessionFileSizeBounds(t *testing.T) {
	p := execapi.DefaultPolicy()
	p.MaxFileBytes = 12 << 20
	fake := execapitest.NewWithPolicy(p, "bash")
	ts := startServer(t, serverOptions{fake: fake, sessions: true})
	_, key := ts.key("big", 1000, 8)
	info := ts.openSession(key, `{"runtime":"bash"}`)
	big := strings.Repeat("x", 10<<20+1) // the fake's MaxReturnBytes is 10 MiB
	if a := ts.send("PUT", "/v1/sessions/"+info.ID+"/files/tmp/big", key, big, nil); a.status != 200 {
		t.Fatalf("put: %d %s", a.status, a.body)
	}
	a := ts.send("GET", "/v1/sessions/"+info.ID+"/files/tmp/big", key, "", nil)
	wantError(t, "a read of a big file", a, http.StatusRequestEntityTooLarge, execapi.CodeFileTooLarge, "")

	p.MaxFileBytes = 1024
	small := startServer(t, serverOptions{fake: execapitest.NewWithPolicy(p, "bash"), sessions: true})
	_, key = small.key("small", 1000, 8)
	info = small.openSession(key, `{"runtime":"bash"}`)
	path := "/v1/sessions/" + info.ID + "/files/tmp/f"
	if a := small.send("PUT", path, key, strings.Repeat("y", 1024), nil); a.status != 200 {
		t.Fatalf("a file of the largest size: %d %s", a.status, a.body)
	}
	a = small.send("PUT", path, key, strings.Repeat("z", 1025), nil)
	wantError(t, "a declared length past the largest", a, http.StatusRequestEntityTooLarge, execapi.CodeFileTooLarge, "")
	// Without a length: the body is cut at the limit.
	req, _ := http.NewRequest("PUT", small.URL+path, io.MultiReader(strings.NewReader(strings.Repeat("z", 1000)), strings.NewReader(strings.Repeat("z", 25))))
	req.Header.Set("Authorization", "Bearer "+key)
	req.ContentLength = -1
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantError(t, "an undeclared length past the largest", answer{status: resp.StatusCode, body: body}, http.StatusRequestEntityTooLarge, execapi.CodeFileTooLarge, "")
	if got, _ := small.sessions.File(info.ID, "/tmp/f"); string(got) != strings.Repeat("y", 1024) {
		t.Errorf("an oversized write changed the file (%d bytes)", len(got))
	}
}

// Bad input is refused naming its field, before the service is asked.
func TestSessionBadInputNamesTheField(t *testing.T) {
	ts, key := startSessionServer(t)
	info := ts.openSession(key, `{"runtime":"bash","limits":{"memory_mb":256}}`)
	base := "/v1/sessions/" + info.ID
	for _, c := range []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
		code, field              string
	}{
		{"explicit zero idle TTL", "POST", "/v1/sessions", `{"runtime":"bash","idle_ttl_ms":0}`, nil, 400, execapi.CodeInvalidRequest, "idle_ttl_ms"},
		{"explicit zero lifetime", "POST", "/v1/sessions", `{"runtime":"bash","max_lifetime_ms":0}`, nil, 400, execapi.CodeInvalidRequest, "max_lifetime_ms"},
		{"idle TTL too short", "POST", "/v1/sessions", `{"runtime":"bash","idle_ttl_ms":5}`, nil, 400, execapi.CodeInvalidRequest, "idle_ttl_ms"},
		{"a key in another case", "POST", "/v1/sessions", `{"runtime":"bash","Runtime":"python3.13"}`, nil, 400, execapi.CodeInvalidRequest, "Runtime"},
		{"a wrong type", "POST", "/v1/sessions", `{"runtime":"bash","idle_ttl_ms":"long"}`, nil, 400, execapi.CodeInvalidRequest, "idle_ttl_ms"},
		{"no runtime", "POST", "/v1/sessions", `{}`, nil, 400, execapi.CodeInvalidRequest, "runtime"},
		{"not JSON", "POST", "/v1/sessions", `{"runtime":"bash"}`, map[string]string{"Content-Type": "text/plain"}, 415, CodeMediaType, ""},
		{"another network", "POST", base + "/exec", `{"code":"true","network":"egress"}`, nil, 400, execapi.CodeInvalidRequest, "network"},
		{"another memory", "POST", base + "/exec", `{"code":"true","limits":{"memory_mb":512}}`, nil, 400, execapi.CodeInvalidRequest, "limits.memory_mb"},
		{"explicit zero timeout", "POST", base + "/exec", `{"code":"true","limits":{"timeout_ms":0}}`, nil, 400, execapi.CodeInvalidRequest, "limits.timeout_ms"},
		{"a fork option", "POST", base + "/fork", `{"idle_ttl_ms":60000}`, nil, 400, execapi.CodeInvalidRequest, "idle_ttl_ms"},
		{"a path under /proc", "GET", base + "/files/proc/self/environ", "", nil, 400, execapi.CodeInvalidRequest, "path"},
		{"a path with a format character", "PUT", base + "/files/tmp/a%E2%80%AEb", "x", nil, 400, execapi.CodeInvalidRequest, "path"},
		{"the root", "GET", base + "/files/", "", nil, 400, execapi.CodeInvalidRequest, "path"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := ts.send(c.method, c.path, key, c.body, c.header)
			wantError(t, c.name, a, c.status, c.code, c.field)
		})
	}
	if n := len(ts.sessions.SessionCalls()); n != 0 {
		t.Errorf("%d calls ran", n)
	}
	a := ts.send("GET", "/v1/sessions", key, "", nil)
	var list sessionList
	if json.Unmarshal(a.body, &list) != nil || len(list.Sessions) != 1 {
		t.Errorf("bad opens opened sessions: %s", a.body)
	}
}

// An Idempotency-Key's entry is bound to its route as well as its body: the
// same key and body sent to two sessions run in the first only and the
// second is refused (409), never given the first's answer; a repeat to the
// same route is replayed, and ran once.
func TestSessionIdempotencyIsBoundToTheRoute(t *testing.T) {
	ts, key := startSessionServer(t)
	one := ts.openSession(key, `{"runtime":"bash"}`)
	two := ts.openSession(key, `{"runtime":"bash"}`)
	idem := map[string]string{IdempotencyKeyHeader: "cell-1"}
	body := `{"code":"echo once"}`

	first := ts.send("POST", "/v1/sessions/"+one.ID+"/exec", key, body, idem)
	if first.status != 200 {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	again := ts.send("POST", "/v1/sessions/"+one.ID+"/exec", key, body, idem)
	if again.status != 200 || !bytes.Equal(again.body, first.body) || again.header.Get(IdempotencyReplayedHeader) != "true" {
		t.Errorf("a repeat: %d %s (replayed %q), want the first's answer", again.status, again.body, again.header.Get(IdempotencyReplayedHeader))
	}
	other := ts.send("POST", "/v1/sessions/"+two.ID+"/exec", key, body, idem)
	wantError(t, "the key sent to another session", other, http.StatusConflict, CodeIdempotencyKeyReused, "")
	calls := ts.sessions.SessionCalls()
	if len(calls) != 1 || calls[0].ID != one.ID {
		t.Errorf("calls ran: %+v, want one in the first session", calls)
	}

	// Open and fork replay too: one session each.
	openKey := map[string]string{IdempotencyKeyHeader: "open-1"}
	_, k2 := ts.key("replays", 1000, 8)
	o1 := ts.send("POST", "/v1/sessions", k2, `{"runtime":"bash"}`, openKey)
	o2 := ts.send("POST", "/v1/sessions", k2, `{"runtime":"bash"}`, openKey)
	if o1.status != 201 || !bytes.Equal(o1.body, o2.body) || o2.header.Get(IdempotencyReplayedHeader) != "true" {
		t.Errorf("open replay: %d %s / %d %s", o1.status, o1.body, o2.status, o2.body)
	}
	var opened execapi.SessionInfo
	json.Unmarshal(o1.body, &opened)
	forkKey := map[string]string{IdempotencyKeyHeader: "fork-1"}
	f1 := ts.send("POST", "/v1/sessions/"+opened.ID+"/fork", k2, "", forkKey)
	f2 := ts.send("POST", "/v1/sessions/"+opened.ID+"/fork", k2, "", forkKey)
	if f1.status != 201 || !bytes.Equal(f1.body, f2.body) || f2.header.Get(IdempotencyReplayedHeader) != "true" {
		t.Errorf("fork replay: %d %s / %d %s", f1.status, f1.body, f2.status, f2.body)
	}
	a := ts.send("GET", "/v1/sessions", k2, "", nil)
	var list sessionList
	if json.Unmarshal(a.body, &list) != nil || len(list.Sessions) != 2 {
		t.Errorf("after replays the key has %s, want 2 sessions", a.body)
	}
}

// A call in a session streams as /v1/exec does; the result event is the
// JSON answer's body.
func TestSessionExecStreams(t *testing.T) {
	ts, key := startSessionServer(t)
	info := ts.openSession(key, `{"runtime":"bash"}`)
	a := ts.send("POST", "/v1/sessions/"+info.ID+"/exec", key, `{"code":"echo streamed"}`, map[string]string{"Accept": "text/event-stream"})
	if a.status != 200 || a.header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s %s", a.status, a.header.Get("Content-Type"), a.body)
	}
	_, data, ok := strings.Cut(string(a.body), "event: result\ndata: ")
	if !ok {
		t.Fatalf("no result event:\n%s", a.body)
	}
	data, _, _ = strings.Cut(data, "\n")
	var res execapi.SessionResult
	if err := json.Unmarshal([]byte(data), &res); err != nil || res.Session.ID != info.ID || res.Stdout != "streamed\n" {
		t.Errorf("result event %s (%v)", data, err)
	}
	// A refusal before the run is the JSON answer, not a stream.
	a = ts.send("POST", "/v1/sessions/"+execapi.NewSessionID()+"/exec", key, `{"code":"true"}`, map[string]string{"Accept": "text/event-stream"})
	wantError(t, "a stream into no session", a, http.StatusNotFound, execapi.CodeSessionNotFound, "")
}

// The key's limits hold for sessions: opening spends a token of its rate,
// a call in a session is a run (its rate, its concurrency, a usage row).
func TestSessionKeyLimits(t *testing.T) {
	ts := startServer(t, serverOptions{fake: scripted(), sessions: true})
	k, key := ts.key("slow", 2, 1)
	info := ts.openSession(key, `{"runtime":"bash"}`)
	if a := ts.send("POST", "/v1/sessions/"+info.ID+"/exec", key, `{"code":"echo one"}`, nil); a.status != 200 {
		t.Fatalf("exec: %d %s", a.status, a.body)
	}
	a := ts.send("POST", "/v1/sessions/"+info.ID+"/exec", key, `{"code":"true"}`, nil)
	e := wantError(t, "a call past the key's rate", a, http.StatusTooManyRequests, execapi.CodeRateLimited, "")
	if e.Reason != string(execapi.RefusedKeyRate) {
		t.Errorf("%+v", e)
	}
	a = ts.send("POST", "/v1/sessions", key, `{"runtime":"bash"}`, nil)
	wantError(t, "an open past the key's rate", a, http.StatusTooManyRequests, execapi.CodeRateLimited, "")
	// Closing spends nothing: a key at its rate can end what it holds.
	if a := ts.send("DELETE", "/v1/sessions/"+info.ID, key, "", nil); a.status != 200 {
		t.Errorf("close at the rate: %d %s", a.status, a.body)
	}
	usage, err := ts.keys.ListUsage(context.Background(), store.UsageFilter{KeyIDs: []string{k.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if len(usage) != 1 || usage[0].Runtime != "bash" || usage[0].ExitCode != 0 {
		t.Errorf("usage: %+v, want the one call in the session as a run", usage)
	}
}

// The server's service is a SessionService with sessions on (the MCP front
// end type-asserts it for its tools), and none with them off.
func TestSessionServiceOnlyWhenOn(t *testing.T) {
	on := startServer(t, serverOptions{fake: scripted(), sessions: true})
	if _, ok := on.srv.Service().(execapi.SessionService); !ok {
		t.Error("with sessions on, the server's service holds no sessions")
	}
	off := startServer(t, serverOptions{fake: scripted()})
	if _, ok := off.srv.Service().(execapi.SessionService); ok {
		t.Error("with sessions off, the server's service offers sessions")
	}
	if _, err := New(Config{Service: scripted(), Policy: execapi.DefaultPolicy(), Keys: off.keys, Sessions: true}); err == nil {
		t.Error("New took Sessions over a service that holds none")
	}
	// The MCP front end is built over the same service, key limits and all.
	var mcp execapi.Service
	held := execapitest.NewSessions(scripted(), testSessionPolicy())
	if _, err := New(Config{Service: held, Policy: held.Policy(), Keys: off.keys, Sessions: true,
		MCP: func(svc execapi.Service) http.Handler { mcp = svc; return http.NotFoundHandler() }}); err != nil {
		t.Fatal(err)
	}
	if _, ok := mcp.(execapi.SessionService); !ok || mcp == execapi.Service(held) {
		t.Errorf("the MCP front end got %T, want the gate's session service", mcp)
	}
}

// GET /v1/runtimes says that sessions are on and their bounds, and the
// server's service describes the same (what the MCP tools read); off,
// there is no sessions field at all.
func TestSessionsDescribed(t *testing.T) {
	ts, key := startSessionServer(t)
	a := ts.send("GET", "/v1/runtimes", key, "", nil)
	var info execapi.Info
	if a.status != 200 || json.Unmarshal(a.body, &info) != nil || info.Sessions == nil {
		t.Fatalf("runtimes: %d %s", a.status, a.body)
	}
	sp := testSessionPolicy()
	want := execapi.SessionsInfo{IdleTTLMS: sp.IdleTTL.Milliseconds(), MaxIdleTTLMS: sp.MaxIdleTTL.Milliseconds(),
		MaxLifetimeMS: sp.MaxLifetime.Milliseconds(), PerKey: sp.PerKey, MaxMemoryMB: sp.MaxMemoryMB}
	if *info.Sessions != want {
		t.Errorf("sessions described as %+v, want %+v", *info.Sessions, want)
	}
	described, err := ts.srv.Service().Describe(context.Background())
	if err != nil || described.Sessions == nil || *described.Sessions != want {
		t.Errorf("the service describes %+v (%v)", described.Sessions, err)
	}
	if !SessionsOffered(ts.sessions) || SessionsOffered(scripted()) {
		t.Error("SessionsOffered is wrong about a service")
	}
	off := execapi.DefaultSessionPolicy()
	if SessionsOffered(execapitest.NewSessions(scripted(), off)) {
		t.Error("a service whose sessions are off is said to offer them")
	}

	plain := startServer(t, serverOptions{fake: scripted()})
	a = plain.send("GET", "/v1/runtimes", "", "", nil)
	if strings.Contains(string(a.body), `"sessions"`) {
		t.Errorf("without sessions the runtimes say %s", a.body)
	}
}
