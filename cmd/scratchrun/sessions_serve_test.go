//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/store"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// sessionsAPI drives one server's session routes as one key.
type sessionsAPI struct {
	t   *testing.T
	url string
	key string
}

// do sends body with contentType and returns the status and the raw body.
func (a sessionsAPI) do(method, path, contentType string, body []byte) (int, []byte) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.url+path, bytes.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := (&http.Client{Timeout: 90 * time.Second}).Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	return resp.StatusCode, data
}

// json sends a JSON body.
func (a sessionsAPI) json(method, path, body string) (int, string) {
	a.t.Helper()
	status, data := a.do(method, path, "application/json", []byte(body))
	return status, string(data)
}

// open opens a Python session and returns its id.
func (a sessionsAPI) open() string {
	a.t.Helper()
	status, body := a.json(http.MethodPost, "/v1/sessions", `{"runtime": "python3.13"}`)
	var info struct {
		ID string `json:"id"`
	}
	if json.Unmarshal([]byte(body), &info); status != http.StatusCreated || info.ID == "" {
		a.t.Fatalf("open a session: %d %s", status, body)
	}
	return info.ID
}

// run runs code in session id and returns its stdout; anything but a
// successful run in the session fails the test.
func (a sessionsAPI) run(id, code string) string {
	a.t.Helper()
	req, _ := json.Marshal(map[string]string{"code": code})
	status, body := a.json(http.MethodPost, "/v1/sessions/"+id+"/exec", string(req))
	var res struct {
		ExitCode    int    `json:"exit_code"`
		Stdout      string `json:"stdout"`
		StatePurged bool   `json:"state_purged"`
	}
	if json.Unmarshal([]byte(body), &res); status != http.StatusOK || res.ExitCode != 0 || res.StatePurged {
		a.t.Fatalf("run %q in the session: %d %s", code, status, body)
	}
	return res.Stdout
}

// put writes a session's file.
func (a sessionsAPI) put(id, path string, data []byte) {
	a.t.Helper()
	if status, body := a.do(http.MethodPut, "/v1/sessions/"+id+"/files/"+path, "application/octet-stream", data); status != http.StatusOK {
		a.t.Fatalf("PUT %s: %d %s", path, status, body)
	}
}

// get reads a session's file: its status and bytes.
func (a sessionsAPI) get(id, path string) (int, []byte) {
	a.t.Helper()
	return a.do(http.MethodGet, "/v1/sessions/"+id+"/files/"+path, "", nil)
}

// consoleSessions signs in to url's console with token and returns GET
// /console/api/sessions: its status and body.
func consoleSessions(t *testing.T, url, token string) (int, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	read := func(resp *http.Response, err error) (int, string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	_, page := read(c.Get(url + "/console/signin"))
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no sign-in form: %s", page)
	}
	if status, body := read(c.PostForm(url+"/console/signin", neturl.Values{"csrf": {m[1]}, "token": {token}})); status != http.StatusSeeOther {
		t.Fatalf("console sign-in: %d %s", status, body)
	}
	return read(c.Get(url + "/console/api/sessions"))
}

// sleeping reports whether a process `sleep 3141` runs anywhere on the
// host (the background process the test starts in a session).
func sleeping() bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if data, err := os.ReadFile(p); err == nil && string(data) == "sleep\x003141\x00" {
			return true
		}
	}
	return false
}

// Sessions through `scratchrun serve --sessions`, end to end: two keys on
// one SQLite file, Python state, files both ways, background processes,
// isolation between keys and between one key's sessions, fork, the key's
// maximum, DELETE, the session tools over /mcp, the operator's `sessions
// end`, and a kill -9 after which the next server tells the owner of the
// restart and nothing is left on the host. Then, with sessions off, none
// of it is offered.
func TestServeSessions(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	before := leakcheck.Take(leakOpts)
	db := filepath.Join(t.TempDir(), "keys.db")
	aliceKey := createKey(t, db, "alice", "--rate", "1000/min", "--concurrency", "4")
	bobKey := createKey(t, db, "bob", "--rate", "1000/min", "--concurrency", "4")
	p := startServeEnv(t, []string{"SCRATCHRUN_SESSIONS_PER_KEY=3"}, "--db", db, "--sessions", "--console-token", browserConsoleToken)
	alice := sessionsAPI{t, p.url, aliceKey}
	bob := sessionsAPI{t, p.url, bobKey}

	a := alice.open()
	t.Run("state", func(t *testing.T) {
		alice.t = t
		alice.run(a, "x = 41\ndef f(v):\n    return v + 1")
		if out := alice.run(a, "f(x)"); out != "42\n" {
			t.Errorf("a bare expression after a definition: stdout %q, want the repr 42", out)
		}
		in := []byte{0, 1, 2, 0xff, 0xfe, '\n'}
		alice.put(a, "tmp/in.bin", in)
		if out := alice.run(a, "print(open('/tmp/in.bin', 'rb').read().hex())"); out != "000102fffe0a\n" {
			t.Errorf("a file PUT, read by a call: %q", out)
		}
		alice.run(a, "open('/tmp/out.bin', 'wb').write(bytes([0, 255, 10, 13, 128]))")
		if status, got := alice.get(a, "tmp/out.bin"); status != http.StatusOK || !bytes.Equal(got, []byte{0, 255, 10, 13, 128}) {
			t.Errorf("GET of a file a call wrote: %d %q", status, got)
		}
		alice.run(a, "import subprocess\nbg = subprocess.Popen(['sleep', '3141'])")
		if out := alice.run(a, "print(bg.poll())"); out != "None\n" {
			t.Errorf("a background process of the last call, polled: %q, want None (running)", out)
		}
	})
	t.Run("other key", func(t *testing.T) {
		bob.t = t
		unknown := execapi.NewSessionID()
		for _, route := range []struct{ method, path, body string }{
			{http.MethodPost, "/exec", `{"code": "print(x)"}`},
			{http.MethodGet, "/files/tmp/in.bin", ""},
			{http.MethodPost, "/fork", ""},
			{http.MethodDelete, "", ""},
		} {
			gotStatus, got := bob.json(route.method, "/v1/sessions/"+a+route.path, route.body)
			wantStatus, want := bob.json(route.method, "/v1/sessions/"+unknown+route.path, route.body)
			if gotStatus != http.StatusNotFound || gotStatus != wantStatus || got != want {
				t.Errorf("%s %s by another key: %d %s; an unknown id: %d %s", route.method, route.path, gotStatus, got, wantStatus, want)
			}
		}
	})
	b := alice.open()
	t.Run("sessions apart", func(t *testing.T) {
		alice.t = t
		if status, body := alice.get(b, "tmp/in.bin"); status != http.StatusNotFound || !strings.Contains(string(body), "file_not_found") {
			t.Errorf("another session's file: %d %s", status, body)
		}
		out := alice.run(b, "import os\nprint([p for p in os.listdir('/proc') if p.isdigit() and open(f'/proc/{p}/cmdline').read().startswith('sleep')])")
		if out != "[]\n" {
			t.Errorf("another session's background process is seen: %s", out)
		}
	})
	var c string
	t.Run("fork", func(t *testing.T) {
		alice.t = t
		status, body := alice.json(http.MethodPost, "/v1/sessions/"+a+"/fork", "")
		var info struct {
			ID         string `json:"id"`
			ForkedFrom string `json:"forked_from"`
		}
		if json.Unmarshal([]byte(body), &info); status != http.StatusCreated || info.ID == "" || info.ForkedFrom != a {
			t.Fatalf("fork: %d %s", status, body)
		}
		c = info.ID
		if status, got := alice.get(c, "tmp/in.bin"); status != http.StatusOK || !bytes.Equal(got, []byte{0, 1, 2, 0xff, 0xfe, '\n'}) {
			t.Errorf("the parent's file in the fork: %d %q", status, got)
		}
		alice.put(c, "tmp/child.txt", []byte("child"))
		alice.put(a, "tmp/parent.txt", []byte("parent"))
		if status, _ := alice.get(a, "tmp/child.txt"); status != http.StatusNotFound {
			t.Errorf("the fork's new file in the parent: %d", status)
		}
		if status, _ := alice.get(c, "tmp/parent.txt"); status != http.StatusNotFound {
			t.Errorf("the parent's new file in the fork: %d", status)
		}
		alice.put(c, "tmp/in.bin", []byte("changed"))
		if _, got := alice.get(a, "tmp/in.bin"); !bytes.Equal(got, []byte{0, 1, 2, 0xff, 0xfe, '\n'}) {
			t.Errorf("the fork's change reached the parent: %q", got)
		}
	})
	t.Run("key maximum", func(t *testing.T) {
		alice.t = t
		status, body := alice.json(http.MethodPost, "/v1/sessions", `{"runtime": "python3.13"}`)
		if status != http.StatusTooManyRequests || !strings.Contains(body, `"session_limit"`) {
			t.Errorf("a fourth session over a maximum of 3: %d %s", status, body)
		}
	})
	t.Run("delete", func(t *testing.T) {
		alice.t = t
		if c == "" {
			t.Skip("no fork")
		}
		status, body := alice.json(http.MethodDelete, "/v1/sessions/"+c, "")
		if status != http.StatusOK || !strings.Contains(body, `"state_purged":true`) || !strings.Contains(body, `"deleted"`) {
			t.Errorf("DELETE: %d %s", status, body)
		}
		status, body = alice.json(http.MethodPost, "/v1/sessions/"+c+"/exec", `{"code": "1"}`)
		if status != http.StatusGone || !strings.Contains(body, `"session_ended"`) {
			t.Errorf("a call after DELETE: %d %s", status, body)
		}
	})
	t.Run("mcp", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		client := mcp.NewClient(&mcp.Implementation{Name: "sessions-serve-test", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.url + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{bobKey}}}, nil)
		if err != nil {
			t.Fatalf("connect: %v\n%s", err, p.stderr())
		}
		defer cs.Close()
		mcpSessionRoundTrip(t, ctx, cs)
	})
	t.Run("console", func(t *testing.T) {
		status, body := consoleSessions(t, p.url, browserConsoleToken)
		if status != http.StatusOK || !strings.Contains(body, store.HashSessionID(a)) || !strings.Contains(body, "alice") || strings.Contains(body, a) {
			t.Errorf("the console's sessions: %d %s", status, body)
		}
	})
	t.Run("operator end", func(t *testing.T) {
		alice.t = t
		short := store.HashSessionID(b)[:sessionHashShown]
		if r := scratchrun(t, t.TempDir(), "", "sessions", "list", "--db", db); r.code != 0 || !strings.Contains(r.stdout, short) {
			t.Fatalf("sessions list: %d %s %s", r.code, r.stdout, r.stderr)
		}
		if r := scratchrun(t, t.TempDir(), "", "sessions", "end", short, "--db", db); r.code != 0 {
			t.Fatalf("sessions end: %d %s %s", r.code, r.stdout, r.stderr)
		}
		// The server ends it within its poll; listing spends nothing.
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, body := alice.json(http.MethodGet, "/v1/sessions", "")
			if !strings.Contains(body, b) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the session the operator ended is still listed: %s\n%s", body, p.stderr())
			}
			time.Sleep(100 * time.Millisecond)
		}
		status, body := alice.json(http.MethodPost, "/v1/sessions/"+b+"/exec", `{"code": "1"}`)
		if status != http.StatusGone || !strings.Contains(body, `"operator"`) {
			t.Errorf("the owner's call after the operator's end: %d %s", status, body)
		}
	})

	// kill -9 with session a open (and its sleep running): the next server
	// on the same store tells a's owner the server restarted, and the
	// sandbox is gone.
	if !sleeping() {
		t.Fatal("the session's background process is not running before the kill")
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	p2 := startServe(t, "--db", db, "--sessions")
	alice = sessionsAPI{t, p2.url, aliceKey}
	bob = sessionsAPI{t, p2.url, bobKey}
	status, body := alice.json(http.MethodPost, "/v1/sessions/"+a+"/exec", `{"code": "print(x)"}`)
	if status != http.StatusGone || !strings.Contains(body, `"server_restart"`) {
		t.Errorf("the owner after a restart: %d %s", status, body)
	}
	if status, got := bob.json(http.MethodPost, "/v1/sessions/"+a+"/exec", `{"code": "print(x)"}`); status != http.StatusNotFound || strings.Contains(got, "server_restart") {
		t.Errorf("another key after a restart: %d %s", status, got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for sleeping() {
		if time.Now().After(deadline) {
			t.Fatalf("the killed server's session still runs its background process:\n%s", p2.stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A session open at a drain ends with the engine, and its row says
	// so (not, at the next start, that the server restarted).
	d := alice.open()
	p2.stop(t)
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	row, err := st.CodeSession(context.Background(), store.HashSessionID(d))
	st.Close()
	if err != nil || row.EndReason != string(execapi.EndServerShutdown) || row.Ended.IsZero() {
		t.Errorf("the row of a session open at the drain: %+v %v", row, err)
	}
	if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
		t.Errorf("left behind after kill -9 and a restart:\n  %s", strings.Join(left, "\n  "))
	}

	// Sessions off (the default): nothing of them is offered.
	p3 := startServe(t, "--db", db)
	if status, body, err := httpCall(http.MethodGet, p3.url+"/v1/sessions", aliceKey, ""); err != nil || status != http.StatusNotFound {
		t.Errorf("GET /v1/sessions with sessions off: %d %s %v", status, body, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "sessions-off-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p3.url + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{aliceKey}}}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, p3.stderr())
	}
	if got := toolNames(t, ctx, cs); !slices.Equal(got, []string{"scratchrun_exec"}) {
		t.Errorf("tools/list with sessions off: %v", got)
	}
	cs.Close()
	p3.stop(t)
	if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
		t.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
	}
}
