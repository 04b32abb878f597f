package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bad arguments come back as tool errors (isError) that name the parameter,
// so that a model can correct itself; none reaches a sandbox.
func TestBadArgumentsAreToolErrorsNamingTheField(t *testing.T) {
	rec := newRecording(fakeService())
	cs := connect(t, rec, Options{}, nil)
	cases := []struct {
		args map[string]any
		want []string
		// reaches says the Service sees the request (it validates values);
		// shape errors stop in the adapter.
		reaches bool
	}{
		{map[string]any{"runtime": "cobol", "code": "x"}, []string{"runtime", "installed runtimes", "python3.13", "bash"}, true},
		{map[string]any{"runtime": "bash", "code": "x", "timeout_ms": 99999}, []string{"Invalid argument timeout_ms", "30000"}, true},
		{map[string]any{"runtime": "bash", "code": "x", "timeout_ms": "soon"}, []string{"timeout_ms", "integer", "string"}, false},
		{map[string]any{"runtime": "bash", "code": "x", "timeout_ms": 1.5}, []string{"timeout_ms", "fractional"}, false},
		{map[string]any{"runtime": "bash", "code": "x", "memory_mb": 1}, []string{"memory_mb", "between 64 and 512"}, true},
		{map[string]any{"runtime": "bash", "code": "x", "return_files": []string{"relative.txt"}}, []string{"return_files[0]", "absolute"}, true},
		{map[string]any{"runtime": "bash", "code": "x", "return_files": "/tmp/a"}, []string{"return_files", "array"}, false},
		{map[string]any{"runtime": "bash", "code": "x", "files": map[string]any{"/proc/x": "y"}}, []string{`files["/proc/x"]`}, true},
		{map[string]any{"runtime": "bash", "code": "x", "files": map[string]any{"/tmp/x": 3}}, []string{`files["/tmp/x"]`, "string"}, false},
		{map[string]any{"runtime": "bash", "code": "x", "env": map[string]any{"1BAD": "v"}}, []string{`env["1BAD"]`}, true},
		{map[string]any{"runtime": "bash", "code": "x", "network": "egress"}, []string{"network", "not allowed"}, true},
		{map[string]any{"runtime": "bash"}, []string{"code", "required"}, true},
		{map[string]any{"runtime": "bash", "code": "x", "language": "bash"}, []string{"language", "not a parameter", "runtime, code, timeout_ms", "files_base64"}, false},
	}
	for _, c := range cases {
		before := rec.calls()
		res := call(t, cs, c.args)
		msg := errorText(t, res)
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%v: error %q lacks %q", c.args, msg, w)
			}
		}
		if reached := rec.calls() > before; reached != c.reaches {
			t.Errorf("%v: reached the Service = %v, want %v", c.args, reached, c.reaches)
		}
	}
	// Nothing ran for any of them: the Service refused each before running.
	for range rec.calls() {
		if err := <-rec.returned; err == nil {
			t.Errorf("a bad request ran")
		}
	}
}

// Arguments decode as strictly as the contract's JSON: a name given twice
// (at any depth) or in another case, and an explicit 0 limit, are tool
// errors naming the parameter, and nothing reaches the Service. Before, the
// last duplicate won and 0 ran with the default.
func TestArgumentsAreDecodedStrictly(t *testing.T) {
	rec := newRecording(fakeService())
	cs := connect(t, rec, Options{}, nil)
	cases := []struct {
		args string
		want []string
	}{
		{`{"runtime":"bash","code":"x","network":"none","network":"egress"}`, []string{"Invalid argument network", "twice"}},
		{`{"runtime":"bash","code":"x","Network":"egress"}`, []string{"Invalid argument Network", `did you mean "network"`}},
		{`{"runtime":"bash","code":"x","env":{"A":"1","A":"2"}}`, []string{`Invalid argument env["A"]`, "twice"}},
		{`{"runtime":"bash","code":"x","timeout_ms":0}`, []string{"Invalid argument timeout_ms", "is 0"}},
		{`{"runtime":"bash","code":"x","memory_mb":0}`, []string{"Invalid argument memory_mb", "is 0"}},
		{`{"runtime":"bash","code":"x","memory_mb":0.0}`, []string{"Invalid argument memory_mb", "is 0"}},
	}
	for _, c := range cases {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolName, Arguments: json.RawMessage(c.args)})
		if err != nil {
			t.Fatalf("%s: %v", c.args, err)
		}
		msg := errorText(t, res)
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: error %q lacks %q", c.args, msg, w)
			}
		}
	}
	if n := rec.calls(); n != 0 {
		t.Errorf("%d of these calls reached the Service", n)
	}
}

// Binary input files go in files_base64, as in the HTTP API (the tool had
// no way to send them).
func TestFilesBase64ReachesTheSandbox(t *testing.T) {
	cs := connect(t, testEngine(t), Options{}, nil)
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	res := call(t, cs, map[string]any{
		"runtime":      "python3.13",
		"code":         "data = open('/tmp/in.bin', 'rb').read()\nprint(len(data), data == bytes(range(256)), open('/tmp/t.txt').read())",
		"files":        map[string]string{"/tmp/t.txt": "text"},
		"files_base64": map[string]string{"/tmp/in.bin": base64.StdEncoding.EncodeToString(all)},
	})
	if res.IsError || structured(t, res).Stdout != "256 True text\n" {
		t.Fatalf("files_base64: %+v", res.Content)
	}
	msg := errorText(t, call(t, cs, map[string]any{"runtime": "bash", "code": "x", "files_base64": map[string]string{"/tmp/a": "not base64!"}}))
	if !strings.Contains(msg, `files_base64["/tmp/a"]`) || !strings.Contains(msg, "base64") {
		t.Errorf("bad base64: %q", msg)
	}
}
