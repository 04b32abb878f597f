package execapi

import (
	"bytes"
	"errors"
	"path"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzMaxBody keeps fuzzed bodies small enough to run fast while still
// exercising the size limit.
const fuzzMaxBody = 64 << 10

// FuzzDecodeRequest feeds arbitrary bytes through decoding and validation,
// as the HTTP server does with a request body. Neither may panic; every
// refusal must be a *ValidationError naming a field; and whatever is accepted
// must hold the contract's guarantees (paths absolute, clean and outside the
// pseudo file systems; limits within the policy; and so on). The seed corpus
// is in testdata/fuzz/FuzzDecodeRequest.
func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"runtime": "python3.13", "code": "print(1)"}`,
		`{"runtime": "bash", "code": "x", "files": {"/tmp/a/../b": "x"}, "return_files": ["/tmp//c/"]}`,
		`{"runtime": "bash", "code": "x", "files_base64": {"/tmp/bin": "AAEC"}, "network": "egress", "extra": [1, {"a": null}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeRequest(bytes.NewReader(body), fuzzMaxBody)
		if err != nil {
			requireValidationError(t, "decode", err)
			return
		}
		if len(body) > fuzzMaxBody {
			t.Fatalf("accepted a %d-byte body with a limit of %d", len(body), fuzzMaxBody)
		}
		p := DefaultPolicy()
		p.AllowEgress = true
		c, err := p.Validate(req)
		if err != nil {
			requireValidationError(t, "validate", err)
			return
		}
		checkAccepted(t, p, c)
		again, err := p.Validate(req)
		if err != nil || !reflect.DeepEqual(c, again) {
			t.Fatalf("validation is not deterministic: %v", err)
		}
	})
}

// FuzzValidatePath checks the path rule on its own, on any string.
func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{"/tmp/a", "/tmp/../etc", "/proc/self", "//x", "/tmp/", "/", "", "rel", "/dev", "/devx", "/tmp/\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if err := ValidatePath("f", p); err != nil {
			requireValidationError(t, "path", err)
			return
		}
		checkPath(t, p)
	})
}

func requireValidationError(t *testing.T, stage string, err error) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) || !IsValidation(err) {
		t.Fatalf("%s: error %T %v is not a *ValidationError", stage, err, err)
	}
	if ve.Field == "" || ve.Message == "" || !strings.HasPrefix(err.Error(), ve.Field+": ") {
		t.Fatalf("%s: error %q does not name its field", stage, err)
	}
}

func checkPath(t *testing.T, p string) {
	t.Helper()
	switch {
	case !strings.HasPrefix(p, "/"), p == "/":
		t.Fatalf("accepted path %q is not an absolute file path", p)
	case path.Clean(p) != p:
		t.Fatalf("accepted path %q is not clean", p)
	case strings.Contains(p, "/../") || strings.HasSuffix(p, "/.."):
		t.Fatalf("accepted path %q climbs", p)
	case strings.ContainsRune(p, 0), !utf8.ValidString(p), len(p) > maxPathLength:
		t.Fatalf("accepted path %q has a NUL, bad UTF-8 or is too long", p)
	case strings.IndexFunc(p, isHiddenRune) >= 0:
		t.Fatalf("accepted path %q has a control or format character", p)
	}
	for _, root := range forbiddenRoots {
		if p == root || strings.HasPrefix(p, root+"/") {
			t.Fatalf("accepted path %q is under %s", p, root)
		}
	}
}

func checkAccepted(t *testing.T, p Policy, c Checked) {
	t.Helper()
	if !runtimeNamePattern.MatchString(c.Runtime) {
		t.Fatalf("accepted runtime %q", c.Runtime)
	}
	if c.Code == "" || len(c.Code) > p.MaxCodeBytes || strings.ContainsRune(c.Code, 0) {
		t.Fatalf("accepted code of %d bytes", len(c.Code))
	}
	if c.Timeout < p.MinTimeout || c.Timeout > p.MaxTimeout || c.MemoryMB < p.MinMemoryMB || c.MemoryMB > p.MaxMemoryMB {
		t.Fatalf("accepted limits %s / %d MB", c.Timeout, c.MemoryMB)
	}
	if c.Network != NetworkNone && c.Network != NetworkEgress {
		t.Fatalf("accepted network %q", c.Network)
	}
	if len(c.Env) > p.MaxEnv {
		t.Fatalf("accepted %d env entries", len(c.Env))
	}
	for k, v := range c.Env {
		if !envNamePattern.MatchString(k) || strings.ContainsRune(v, 0) {
			t.Fatalf("accepted env %q", k)
		}
	}
	if len(c.Files) > p.MaxFiles {
		t.Fatalf("accepted %d files", len(c.Files))
	}
	total := 0
	for i, f := range c.Files {
		checkPath(t, f.Path)
		total += len(f.Data)
		if i > 0 && c.Files[i-1].Path >= f.Path {
			t.Fatalf("files not sorted and unique: %q then %q", c.Files[i-1].Path, f.Path)
		}
		for _, g := range c.Files {
			if strings.HasPrefix(g.Path, f.Path+"/") {
				t.Fatalf("file %q is also the directory of %q", f.Path, g.Path)
			}
		}
	}
	if total > p.MaxFileBytes {
		t.Fatalf("accepted %d bytes of files", total)
	}
	if len(c.ReturnFiles) > p.MaxReturnFiles {
		t.Fatalf("accepted %d return files", len(c.ReturnFiles))
	}
	seen := map[string]bool{}
	for _, r := range c.ReturnFiles {
		checkPath(t, r)
		if seen[r] {
			t.Fatalf("return file %q listed twice", r)
		}
		seen[r] = true
	}
}
