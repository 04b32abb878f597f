package mcpserver

import (
	"strings"
	"testing"
)

// Bad arguments come back as tool errors (isError) that name the parameter,
// so that a model can correct itself; none reaches a sandbox.
func TestBadArgumentsAreToolErrorsNamingTheField(t *testing.T) {
	rec := newRecording(testEngine(t))
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
		{map[string]any{"runtime": "bash", "code": "x", "memory_mb": 1}, []string{"memory_mb", "between 16 and 512"}, true},
		{map[string]any{"runtime": "bash", "code": "x", "return_files": []string{"relative.txt"}}, []string{"return_files[0]", "absolute"}, true},
		{map[string]any{"runtime": "bash", "code": "x", "return_files": "/tmp/a"}, []string{"return_files", "array"}, false},
		{map[string]any{"runtime": "bash", "code": "x", "files": map[string]any{"/proc/x": "y"}}, []string{`files["/proc/x"]`}, true},
		{map[string]any{"runtime": "bash", "code": "x", "files": map[string]any{"/tmp/x": 3}}, []string{`files["/tmp/x"]`, "string"}, false},
		{map[string]any{"runtime": "bash", "code": "x", "env": map[string]any{"1BAD": "v"}}, []string{`env["1BAD"]`}, true},
		{map[string]any{"runtime": "bash", "code": "x", "network": "egress"}, []string{"network", "not allowed"}, true},
		{map[string]any{"runtime": "bash"}, []string{"code", "required"}, true},
		{map[string]any{"runtime": "bash", "code": "x", "language": "bash"}, []string{"language", "not a parameter", "runtime, code, timeout_ms"}, false},
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
	// No sandbox ran for any of them: the engine validated before creating one.
	for range rec.calls() {
		if err := <-rec.returned; err == nil {
			t.Errorf("a bad request ran")
		}
	}
}
