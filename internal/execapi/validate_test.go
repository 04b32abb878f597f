package execapi

import (
	"strings"
	"testing"
	"time"
)

func TestValidateAppliesDefaults(t *testing.T) {
	c, err := DefaultPolicy().Validate(Request{Runtime: "python3.13", Code: "print(1)"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Timeout != 10*time.Second || c.MemoryMB != 256 || c.Network != NetworkNone {
		t.Errorf("defaults: timeout %s memory %d network %q", c.Timeout, c.MemoryMB, c.Network)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	long := "/" + strings.Repeat("a", 1100)
	cases := []struct {
		name  string
		req   Request
		field string
		says  string
	}{
		{"no runtime", Request{Code: "x"}, "runtime", "required"},
		{"bad runtime", Request{Runtime: "../bash", Code: "x"}, "runtime", "not a runtime name"},
		{"no code", Request{Runtime: "bash"}, "code", "required"},
		{"NUL in code", Request{Runtime: "bash", Code: "a\x00b"}, "code", "NUL"},
		{"timeout too big", Request{Runtime: "bash", Code: "x", Limits: Limits{TimeoutMS: 30001}}, "limits.timeout_ms", "between 1000 and 30000"},
		{"negative memory", Request{Runtime: "bash", Code: "x", Limits: Limits{MemoryMB: -1}}, "limits.memory_mb", "between 64 and 512"},
		{"relative file", Request{Runtime: "bash", Code: "x", Files: map[string]string{"a.txt": ""}}, `files["a.txt"]`, "relative"},
		{"dotdot", Request{Runtime: "bash", Code: "x", Files: map[string]string{"/tmp/../x": ""}}, `files["/tmp/../x"]`, `".."`},
		{"unclean", Request{Runtime: "bash", Code: "x", Files: map[string]string{"/tmp//x": ""}}, `files["/tmp//x"]`, "not clean"},
		{"trailing slash", Request{Runtime: "bash", Code: "x", ReturnFiles: []string{"/tmp/"}}, "return_files[0]", "not clean"},
		{"root", Request{Runtime: "bash", Code: "x", ReturnFiles: []string{"/"}}, "return_files[0]", "root"},
		{"proc", Request{Runtime: "bash", Code: "x", ReturnFiles: []string{"/proc"}}, "return_files[0]", "/proc"},
		{"dev", Request{Runtime: "bash", Code: "x", Files: map[string]string{"/dev/x": ""}}, `files["/dev/x"]`, "/dev"},
		{"too long", Request{Runtime: "bash", Code: "x", Files: map[string]string{long: ""}}, `files["` + long + `"]`, "longer"},
		{"file is a parent", Request{Runtime: "bash", Code: "x", Files: map[string]string{"/tmp/a": "", "/tmp/a/b": ""}}, `files["/tmp/a"]`, "directory"},
		{"dup across maps", Request{Runtime: "bash", Code: "x", Files: map[string]string{"/tmp/a": ""}, FilesBase64: map[string]string{"/tmp/a": ""}}, `files_base64["/tmp/a"]`, "also in files"},
		{"env name", Request{Runtime: "bash", Code: "x", Env: map[string]string{"A-B": ""}}, `env["A-B"]`, "not a valid variable name"},
		{"env NUL", Request{Runtime: "bash", Code: "x", Env: map[string]string{"A": "\x00"}}, `env["A"]`, "NUL"},
		{"network", Request{Runtime: "bash", Code: "x", Network: "host"}, "network", `"none" or "egress"`},
		{"egress off", Request{Runtime: "bash", Code: "x", Network: NetworkEgress}, "network", "not allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DefaultPolicy().Validate(c.req)
			v, ok := err.(*ValidationError)
			if !ok {
				t.Fatalf("got %v, want a *ValidationError", err)
			}
			if v.Field != c.field || !strings.Contains(v.Message, c.says) {
				t.Errorf("got %q: %q, want field %q saying %q", v.Field, v.Message, c.field, c.says)
			}
		})
	}
}

func TestValidateLimitsSizes(t *testing.T) {
	p := DefaultPolicy()
	p.MaxFileBytes = 10
	_, err := p.Validate(Request{Runtime: "bash", Code: "x", Files: map[string]string{"/tmp/a": "0123456789ab"}})
	if v, ok := err.(*ValidationError); !ok || v.Field != "files" {
		t.Errorf("oversized files: %v", err)
	}
	p = DefaultPolicy()
	p.MaxCodeBytes = 3
	if _, err := p.Validate(Request{Runtime: "bash", Code: "echo"}); err == nil || err.(*ValidationError).Field != "code" {
		t.Errorf("oversized code: %v", err)
	}
}

func TestDecodeRequest(t *testing.T) {
	cases := []struct {
		body, field string
	}{
		{`{"runtime": 3}`, "runtime"},
		{`{"runtime": "bash", "limits": {"timeout_ms": "soon"}}`, "limits.timeout_ms"},
		{`{"runtime": "bash", "env": {"A": 1}}`, "env"},
		{`{"runtime": "bash", "return_files": "/tmp/x"}`, "return_files"},
		{`{"runtime": "bash"`, "body"},
		{``, "body"},
		{`{} {}`, "body"},
		{`[1]`, "body"},
	}
	for _, c := range cases {
		_, err := DecodeRequest(strings.NewReader(c.body), 1<<20)
		v, ok := err.(*ValidationError)
		if !ok || v.Field != c.field {
			t.Errorf("%s: got %v, want field %q", c.body, err, c.field)
		}
	}
	req, err := DecodeRequest(strings.NewReader(`{"runtime":"bash","code":"x","extra":{"ignored":true}}`), 1<<20)
	if err != nil || req.Runtime != "bash" {
		t.Errorf("unknown fields must be ignored: %v", err)
	}
	if _, err := DecodeRequest(strings.NewReader(`{"code":"`+strings.Repeat("x", 200)+`"}`), 100); err == nil || !strings.Contains(err.Error(), "larger than 100") {
		t.Errorf("oversized body: %v", err)
	}
}
