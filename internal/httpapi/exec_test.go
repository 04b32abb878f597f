package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/client"
	"github.com/scratchrun/scratchrun/internal/execapi"
)

// A request in the contract's shape, with a field the hosted API's clients
// send that this server does not know, gets exactly the contract's result.
func TestExecSuccess(t *testing.T) {
	ts := startServer(t, serverOptions{})
	_, key := ts.key("alice", 100, 4)
	body := `{"runtime": "python3.13", "code": "import os\nprint(os.environ['K'])\nprint(open('/tmp/in.txt').read())\nopen('/tmp/o.bin','wb').write(bytes(range(256)))",
		"limits": {"timeout_ms": 5000, "memory_mb": 128}, "env": {"K": "v"},
		"files": {"/tmp/in.txt": "hello"}, "return_files": ["/tmp/o.bin"], "client_request_id": "abc", "stream": false}`
	a := ts.post(key, body)
	if a.status != http.StatusOK || a.header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d type %q body %s", a.status, a.header.Get("Content-Type"), a.body)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(a.body, &raw); err != nil {
		t.Fatal(err)
	}
	// The contract's seven fields, and the two extensions (outcome, facts).
	for _, k := range []string{"exit_code", "stdout", "stderr", "execution_ms", "state_purged", "files", "note", "outcome", "facts"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("result lacks %q", k)
		}
	}
	if len(raw) != 9 {
		t.Errorf("result has %d fields, want 9: %s", len(raw), a.body)
	}
	var res execapi.Result
	json.Unmarshal(a.body, &res)
	if res.ExitCode != 0 || res.Stdout != "v\nhello\n" || !res.StatePurged || res.Outcome != execapi.OutcomeSuccess {
		t.Errorf("result %+v", res)
	}
	data, err := base64.StdEncoding.DecodeString(res.Files["/tmp/o.bin"])
	if err != nil || len(data) != 256 || data[255] != 255 {
		t.Errorf("returned file: %d bytes, %v", len(data), err)
	}
}

// The Go client speaks the same API: results, Describe, and errors that
// behave like the engine's (validation, capacity).
func TestClientAgainstServer(t *testing.T) {
	ts := startServer(t, serverOptions{})
	_, key := ts.key("alice", 100, 4)
	c := client.New(ts.URL+"/", key)
	ctx := context.Background()
	res, err := c.Run(ctx, client.Request{Runtime: "bash", Code: "echo out; echo err >&2; exit 3"})
	if err != nil || res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" || !res.StatePurged || res.Files == nil {
		t.Fatalf("Exec = %+v, %v", res, err)
	}
	info, err := c.Runtimes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, rt := range info.Runtimes {
		names[rt.Name] = rt.Version != ""
	}
	if !names["bash"] || !names["python3.13"] || info.Isolation == "" || info.MaxTimeoutMS == 0 {
		t.Errorf("Describe = %+v", info)
	}

	_, err = c.Run(ctx, client.Request{Runtime: "bash", Code: "true", ReturnFiles: []string{"/tmp/a: b/../c"}})
	var ve *execapi.ValidationError
	var ae *client.APIError
	if !execapi.IsValidation(err) || !errors.As(err, &ve) || ve.Field != "return_files[0]" || !errors.As(err, &ae) || ae.Status != 400 || ae.Code != execapi.CodeInvalidRequest {
		t.Errorf("invalid request: %v (field %q)", err, fieldOf(ve))
	}
	_, err = c.Run(ctx, client.Request{Runtime: "bash", Code: "true", Files: map[string]string{"/proc/x: y": "z"}})
	if !errors.As(err, &ve) || ve.Field != `files["/proc/x: y"]` {
		t.Errorf("field of a path holding \": \" = %q (%v)", fieldOf(ve), err)
	}
	_, err = c.Run(ctx, client.Request{Runtime: "cobol", Code: "x"})
	if !errors.As(err, &ve) || ve.Field != "runtime" {
		t.Errorf("unknown runtime: %v", err)
	}

	bad := client.New(ts.URL, "sr_live_not-a-key")
	_, err = bad.Run(ctx, client.Request{Runtime: "bash", Code: "true"})
	if !errors.As(err, &ae) || ae.Status != 401 || ae.Code != CodeUnauthorized || execapi.IsValidation(err) {
		t.Errorf("bad key: %v", err)
	}
	if _, err := bad.Runtimes(ctx); !errors.As(err, &ae) || ae.Status != 401 {
		t.Errorf("Describe with a bad key: %v", err)
	}
}

func fieldOf(ve *execapi.ValidationError) string {
	if ve == nil {
		return "<none>"
	}
	return ve.Field
}

// Every error status, with the API's error document. None of the refused
// requests reaches the engine.
func TestErrorStatuses(t *testing.T) {
	ts := startServer(t, serverOptions{maxBody: 4096, fake: scripted()})
	_, key := ts.key("alice", 100, 4)
	unauthorized := ""

	cases := []struct {
		name   string
		key    string
		body   string
		header map[string]string
		status int
		code   string
		want   string // in the message
	}{
		{"malformed JSON", key, `{"runtime": "bash", "code": `, nil, 400, "invalid_request", "body"},
		{"not JSON", key, `hello`, nil, 400, "invalid_request", "body"},
		{"empty body", key, ``, nil, 400, "invalid_request", "body"},
		{"two documents", key, `{"runtime":"bash","code":"x"} {}`, nil, 400, "invalid_request", "body"},
		{"wrong type", key, `{"runtime": "bash", "code": "x", "limits": {"timeout_ms": "soon"}}`, nil, 400, "invalid_request", "limits.timeout_ms"},
		{"timeout too long", key, `{"runtime": "bash", "code": "x", "limits": {"timeout_ms": 99999}}`, nil, 400, "invalid_request", "limits.timeout_ms"},
		{"relative return file", key, `{"runtime": "bash", "code": "x", "return_files": ["out.txt"]}`, nil, 400, "invalid_request", "return_files[0]"},
		{"path under /proc", key, `{"runtime": "bash", "code": "x", "files": {"/proc/self/x": "y"}}`, nil, 400, "invalid_request", `files["/proc/self/x"]`},
		{"no code", key, `{"runtime": "bash"}`, nil, 400, "invalid_request", "code"},
		{"unknown runtime", key, `{"runtime": "cobol", "code": "x"}`, nil, 400, "invalid_request", "runtime"},
		{"no key", "", `{"runtime": "bash", "code": "echo"}`, nil, 401, "unauthorized", "API key"},
		{"unknown key", "sr_live_0000000000000000000000000000000000000000000", `{"runtime": "bash", "code": "echo"}`, nil, 401, "unauthorized", "API key"},
		{"not a bearer", "", `{"runtime": "bash", "code": "echo"}`, map[string]string{"Authorization": "Basic " + key}, 401, "unauthorized", "API key"},
		{"too large", key, `{"runtime": "bash", "code": "` + strings.Repeat("x", 5000) + `"}`, nil, 413, "body_too_large", "4 KiB"},
	}
	for _, c := range cases {
		a, err := ts.do(context.Background(), http.MethodPost, "/v1/exec", c.key, strings.NewReader(c.body), c.header)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if a.status != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, a.status, c.status, a.body)
			continue
		}
		e := a.errorBody(t)
		if e.Code != c.code || !strings.Contains(e.Message, c.want) {
			t.Errorf("%s: error %+v, want code %q mentioning %q", c.name, e, c.code, c.want)
		}
		if c.status == 400 && !strings.HasPrefix(e.Message, c.want) {
			t.Errorf("%s: message %q does not start with the field %q", c.name, e.Message, c.want)
		}
		if c.status == 401 {
			if unauthorized == "" {
				unauthorized = string(a.body)
			} else if string(a.body) != unauthorized {
				t.Errorf("%s: 401 body %q differs from %q: it hints at why", c.name, a.body, unauthorized)
			}
			if a.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: 401 without WWW-Authenticate", c.name)
			}
		}
	}

	// An oversized body sent without a length (chunked) is caught while read.
	big := strings.NewReader(`{"runtime": "bash", "code": "` + strings.Repeat("y", 100_000) + `"}`)
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/exec", struct{ *strings.Reader }{big})
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = -1
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Errorf("chunked oversized body: status %d", resp.StatusCode)
	}

	if n := len(ts.fake.Ran()); n != 0 {
		t.Errorf("%d refused requests reached the engine", n)
	}

	// Other routes: method, path, and the runtimes listing needs a key too.
	a, _ := ts.do(context.Background(), http.MethodGet, "/v1/exec", key, nil, nil)
	if a.status != 405 || a.errorBody(t).Code != CodeMethodNotAllowed || a.header.Get("Allow") != "POST" {
		t.Errorf("GET /v1/exec: %d %s", a.status, a.body)
	}
	a, _ = ts.do(context.Background(), http.MethodGet, "/v2/nothing", key, nil, nil)
	if a.status != 404 || a.errorBody(t).Code != CodeNotFound {
		t.Errorf("unknown path: %d %s", a.status, a.body)
	}
	a, _ = ts.do(context.Background(), http.MethodGet, "/v1/runtimes", "", nil, nil)
	if a.status != 401 {
		t.Errorf("GET /v1/runtimes without a key: %d", a.status)
	}
	if got := ts.metric(`scratchrun_rejections_total{reason="unauthorized"}`); got < 4 {
		t.Errorf("unauthorized rejections counted %v", got)
	}
	if got := ts.metric(`scratchrun_rejections_total{reason="body_too_large"}`); got != 2 {
		t.Errorf("body_too_large rejections counted %v, want 2", got)
	}
}
