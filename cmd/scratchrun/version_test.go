package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/scratchrun/scratchrun/internal/buildinfo"
)

var releaseInfo = buildinfo.Info{Version: "v1.2.3", Commit: "0123456789abcdef", Date: "2031-02-03T04:05:06Z", GoVersion: "go1.26.8", Modified: true}

func TestVersionText(t *testing.T) {
	var b bytes.Buffer
	if code := printVersion(&b, nil, releaseInfo); code != 0 {
		t.Fatalf("exit %d", code)
	}
	want := "scratchrun v1.2.3\n  commit: 0123456789abcdef (modified)\n  date:   2031-02-03T04:05:06Z\n  go:     go1.26.8\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	printVersion(&b, nil, buildinfo.Info{Version: "dev", GoVersion: "go1.26.8"})
	if want := "scratchrun dev\n  commit: unknown\n  date:   unknown\n  go:     go1.26.8\n"; b.String() != want {
		t.Errorf("a build that knows nothing: got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestVersionJSON(t *testing.T) {
	var b bytes.Buffer
	if code := printVersion(&b, []string{"--json"}, releaseInfo); code != 0 {
		t.Fatalf("exit %d", code)
	}
	var got map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%q: %v", b.String(), err)
	}
	want := map[string]any{"version": "v1.2.3", "commit": "0123456789abcdef", "date": "2031-02-03T04:05:06Z", "go_version": "go1.26.8", "modified": true}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// The command prints this build's Info, and refuses what it does not take.
func TestVersionCommand(t *testing.T) {
	r := asCLI(t, nil, "version", "--json")
	var got buildinfo.Info
	if err := json.Unmarshal([]byte(r.stdout), &got); r.code != 0 || err != nil {
		t.Fatalf("exit %d, %v: %q %q", r.code, err, r.stdout, r.stderr)
	}
	if got != buildinfo.Get() {
		t.Errorf("version --json = %+v, want %+v", got, buildinfo.Get())
	}
	if r := asCLI(t, nil, "version", "extra"); r.code != exitUsage {
		t.Errorf("version extra: exit %d, want %d", r.code, exitUsage)
	}
	if r := asCLI(t, nil, "--version"); r.code != 0 || r.stdout == "" {
		t.Errorf("--version: exit %d, stdout %q", r.code, r.stdout)
	}
}
