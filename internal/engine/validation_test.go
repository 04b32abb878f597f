package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/sandbox/sandboxtest"
)

// Invalid requests get an error naming the field and never start a sandbox
// (validation is the engine's, whatever the backend: a fake one counts).
func TestInvalidRequestsNeverStartASandbox(t *testing.T) {
	fake := &sandboxtest.Backend{}
	e := newFakeEngine(t, fake, nil)
	cases := []struct {
		req   execapi.Request
		field string
	}{
		{execapi.Request{Code: "print(1)"}, "runtime"},
		{execapi.Request{Runtime: "python3.12", Code: "print(1)"}, "runtime"},
		{execapi.Request{Runtime: "Python!", Code: "print(1)"}, "runtime"},
		{execapi.Request{Runtime: "bash"}, "code"},
		{execapi.Request{Runtime: "bash", Code: "x", Limits: execapi.Limits{TimeoutMS: 30001}}, "limits.timeout_ms"},
		{execapi.Request{Runtime: "bash", Code: "x", Limits: execapi.Limits{TimeoutMS: -5}}, "limits.timeout_ms"},
		{execapi.Request{Runtime: "bash", Code: "x", Limits: execapi.Limits{MemoryMB: 513}}, "limits.memory_mb"},
		{execapi.Request{Runtime: "bash", Code: "x", Files: map[string]string{"in.csv": ""}}, `files["in.csv"]`},
		{execapi.Request{Runtime: "bash", Code: "x", Files: map[string]string{"/tmp/../etc/passwd": ""}}, `files["/tmp/../etc/passwd"]`},
		{execapi.Request{Runtime: "bash", Code: "x", Files: map[string]string{"/proc/self/mem": ""}}, `files["/proc/self/mem"]`},
		{execapi.Request{Runtime: "bash", Code: "x", ReturnFiles: []string{"/dev/sda"}}, "return_files[0]"},
		{execapi.Request{Runtime: "bash", Code: "x", ReturnFiles: []string{"/tmp/a", "/sys/kernel"}}, "return_files[1]"},
		{execapi.Request{Runtime: "bash", Code: "x", Env: map[string]string{"1BAD": "v"}}, `env["1BAD"]`},
		{execapi.Request{Runtime: "bash", Code: "x", FilesBase64: map[string]string{"/tmp/b": "%%%"}}, `files_base64["/tmp/b"]`},
	}
	for _, c := range cases {
		_, err := e.Exec(context.Background(), c.req, nil)
		var v *execapi.ValidationError
		if err == nil || !execapi.IsValidation(err) {
			t.Errorf("%+v: got %v, want a validation error", c.req, err)
			continue
		}
		if !errors.As(err, &v) {
			t.Errorf("%+v: got %v, want a validation error", c.req, err)
			continue
		}
		if v.Field != c.field {
			t.Errorf("%+v: field %q, want %q (%v)", c.req, v.Field, c.field, err)
		}
	}
	if n := len(fake.Configs()); n != 0 {
		t.Errorf("%d sandboxes were created for invalid requests", n)
	}
}

// An unknown runtime's error lists those that are installed.
func TestUnknownRuntimeListsInstalled(t *testing.T) {
	e := newFakeEngine(t, &sandboxtest.Backend{}, nil)
	_, err := e.Exec(context.Background(), execapi.Request{Runtime: "python3.12", Code: "print(1)"}, nil)
	if err == nil || !strings.Contains(err.Error(), "python3.13") || !strings.Contains(err.Error(), "bash") {
		t.Errorf("error %v does not list the installed runtimes", err)
	}
}
