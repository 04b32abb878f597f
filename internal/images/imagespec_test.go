package images

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// v1Zero is a digest for specs checked without an image.
func v1Zero() v1.Hash { return v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("0", 64)} }

// A spec encodes to the same bytes every time (the image's digest depends
// on it), decodes to what was encoded, and refuses what is not a spec.
func TestImageSpecEncodeDecode(t *testing.T) {
	is := imageSpec{Command: []string{"/usr/bin/python3", "{file}"}, File: "main.py", Version: "3.13",
		Libraries: []string{"numpy"}, Warm: "python", Preload: []string{"numpy", "pandas"}}
	enc := is.encode()
	if want := `{"command":["/usr/bin/python3","{file}"],"file":"main.py","version":"3.13","libraries":["numpy"],"warm":"python","preload":["numpy","pandas"]}`; enc != want {
		t.Errorf("encode = %s, want %s", enc, want)
	}
	got, err := decodeImageSpec(map[string]string{RuntimeLabel: enc, "other": "x"})
	if err != nil || got == nil || !reflect.DeepEqual(*got, is) {
		t.Errorf("decode = %+v, %v; want %+v", got, err, is)
	}
	if got, err := decodeImageSpec(map[string]string{"other": "x"}); got != nil || err != nil {
		t.Errorf("no label: %+v, %v; want nil, nil", got, err)
	}
	for _, bad := range []string{`{"command": "sh"}`, `{"cmd": ["/bin/sh"]}`, `not json`, `{"file": "` + strings.Repeat("x", maxLabelBytes) + `"}`} {
		if _, err := decodeImageSpec(map[string]string{RuntimeLabel: bad}); err == nil || !strings.Contains(err.Error(), RuntimeLabel) {
			t.Errorf("decode %.40s: err = %v, want one naming the label", bad, err)
		}
	}
}

// What the operator says wins field by field; what they leave out comes
// from the image.
func TestSpecWithImage(t *testing.T) {
	is := &imageSpec{Command: []string{"python3", "{file}"}, File: "main.py", Version: "3.13", Libraries: []string{"numpy"}, Warm: "python", Preload: []string{"numpy"}}
	got := RuntimeSpec{Name: "py"}.withImage(is)
	want := RuntimeSpec{Name: "py", Command: []string{"python3", "{file}"}, File: "main.py", Version: "3.13", Libraries: []string{"numpy"}, Warm: "python", Preload: []string{"numpy"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("nothing given: %+v, want %+v", got, want)
	}
	got = RuntimeSpec{Name: "py", Command: []string{"/usr/bin/python3.13", "-I", "{file}"}, Version: "mine", Warm: "none", Libraries: []string{}}.withImage(is)
	want = RuntimeSpec{Name: "py", Command: []string{"/usr/bin/python3.13", "-I", "{file}"}, File: "main.py", Version: "mine", Libraries: []string{}, Warm: "none", Preload: []string{"numpy"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("flags given: %+v, want %+v", got, want)
	}
	rt, err := got.runtime("ref", v1Zero(), nil)
	if err != nil || rt.Warm != "" || rt.WarmCommand != nil {
		t.Errorf("--warm none: %+v, %v; want a cold runtime", rt, err)
	}
	if _, err := (RuntimeSpec{Name: "p", Command: []string{"/bin/sh", "{file}"}, File: "f", Preload: []string{"a,b"}}).runtime("ref", v1Zero(), nil); err == nil || !strings.HasPrefix(err.Error(), "preload:") {
		t.Errorf("preload with a comma: err = %v", err)
	}
}

// A bare program name is looked up in the image's PATH inside the tree:
// symlinks resolve within it, the host's files are never found, and a
// name that is nowhere is refused naming the PATH searched.
func TestResolveProgramInTree(t *testing.T) {
	root := t.TempDir()
	mk := func(p string, mode os.FileMode) {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("#!x\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	link := func(p, target string) {
		if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	mk("usr/bin/python3.13", 0o755)
	mk("usr/bin/notexec", 0o644)
	link("usr/bin/python3", "python3.13")
	link("bin", "usr/bin")
	os.MkdirAll(filepath.Join(root, "usr/local/bin/adir"), 0o755)
	link("usr/local/bin/tool", "/usr/bin/python3.13") // absolute: the image's, not the host's
	link("usr/local/bin/hostls", "/usr/bin/ls")       // the host has it, the image does not
	for _, c := range []struct {
		program, path, want, err string
	}{
		{"python3", "", "/usr/bin/python3", ""},
		{"tool", "", "/usr/local/bin/tool", ""},
		{"python3", "relative:/bin:/usr/bin", "/bin/python3", ""},
		{"/usr/bin/python3", "", "/usr/bin/python3", ""},
		{"ls", "", "", `program "ls" is not in the image's PATH (` + DefaultImagePath + ")"},
		{"hostls", "/usr/local/bin", "", `program "hostls" is not in the image's PATH (/usr/local/bin)`},
		{"notexec", "/usr/bin:/bin", "", `program "notexec" is not in the image's PATH (/usr/bin:/bin)`},
		{"adir", "/usr/local/bin", "", `program "adir" is not in the image's PATH`},
		{"bin/python3", "", "", "must be an absolute path or a name"},
		{"/usr/bin/ls", "", "", `program "/usr/bin/ls" is not in`},
	} {
		got, err := resolveProgram(root, c.program, c.path)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("resolve %q in %q = %q, %v; want %q", c.program, c.path, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("resolve %q in %q = %q, %v; want an error saying %q", c.program, c.path, got, err, c.err)
		}
	}
}
