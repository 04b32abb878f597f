package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/testenv/golden"
)

// elapsed is the one value of a result that depends on the clock.
var elapsed = regexp.MustCompile(`"execution_ms":[0-9]+`)

// A server without sessions (the default) answers as it did before they
// existed, byte for byte: it serves the committed openapi.json itself (not
// the merged document), GET /v1/runtimes and a run's result have no field
// more, and every session route is the catch-all's 404, as any unknown
// path is. It runs the real engine (its Describe is what /v1/runtimes
// shows) over scripted sandboxes.
func TestAPIUnchangedWithoutSessions(t *testing.T) {
	sb, release := scriptedBackend()
	defer release()
	ts := startServer(t, serverOptions{backend: sb, version: "golden"})
	ctx := context.Background()
	get := func(method, path, body string) answer {
		t.Helper()
		h := map[string]string{}
		var rd *strings.Reader
		if body != "" {
			rd = strings.NewReader(body)
			h["Content-Type"] = "application/json"
		}
		a, err := ts.do(ctx, method, path, "", readerOrNil(rd), h)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return a
	}

	doc, err := os.ReadFile(filepath.Join("openapi", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	a := get("GET", "/v1/openapi.json", "")
	if a.status != 200 || a.header.Get("Content-Type") != "application/json" || !bytes.Equal(a.body, doc) {
		t.Errorf("GET /v1/openapi.json: %d %s, %d bytes: not the committed openapi/openapi.json", a.status, a.header.Get("Content-Type"), len(a.body))
	}

	a = get("GET", "/v1/runtimes", "")
	if a.status != 200 || a.header.Get("Content-Type") != "application/json" {
		t.Errorf("GET /v1/runtimes: %d %s", a.status, a.header.Get("Content-Type"))
	}
	golden.JSON(t, "testdata/sessions_off/runtimes.json", a.body)

	a = get("POST", "/v1/exec", `{"runtime": "bash", "code": "echo hi"}`)
	if a.status != 200 || a.header.Get("Content-Type") != "application/json" {
		t.Errorf("POST /v1/exec: %d %s", a.status, a.header.Get("Content-Type"))
	}
	golden.JSON(t, "testdata/sessions_off/exec_result.json", elapsed.ReplaceAll(a.body, []byte(`"execution_ms":0`)))

	a = get("GET", "/v1/sessions", "")
	if a.status != http.StatusNotFound {
		t.Errorf("GET /v1/sessions: %d %s", a.status, a.body)
	}
	golden.JSON(t, "testdata/sessions_off/not_found.json", a.body)
	// Every other session route is the same 404, naming its path.
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/sessions", `{"runtime": "bash"}`},
		{"GET", "/v1/sessions/ses_aaaaaaaaaaaaaaaaaaaaaaaaaa", ""},
		{"DELETE", "/v1/sessions/ses_aaaaaaaaaaaaaaaaaaaaaaaaaa", ""},
		{"POST", "/v1/sessions/ses_aaaaaaaaaaaaaaaaaaaaaaaaaa/exec", `{"code": "echo hi"}`},
		{"POST", "/v1/sessions/ses_aaaaaaaaaaaaaaaaaaaaaaaaaa/fork", `{}`},
		{"GET", "/v1/sessions/ses_aaaaaaaaaaaaaaaaaaaaaaaaaa/files/tmp/a", ""},
		{"PUT", "/v1/sessions/ses_aaaaaaaaaaaaaaaaaaaaaaaaaa/files/tmp/a", `"data"`},
	} {
		got := get(r.method, r.path, r.body)
		want := get("GET", strings.Replace(r.path, "/v1/sessions", "/v1/nothing", 1), "")
		wantBody := strings.Replace(string(want.body), "/v1/nothing", "/v1/sessions", 1)
		if got.status != http.StatusNotFound || want.status != http.StatusNotFound || string(got.body) != wantBody {
			t.Errorf("%s %s: %d %s, want the catch-all's 404 %s", r.method, r.path, got.status, got.body, wantBody)
		}
	}
}
