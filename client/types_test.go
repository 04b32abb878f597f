package client

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/buildinfo"
	"github.com/scratchrun/scratchrun/internal/execapi"
)

// jsonFields are the JSON names of a struct type's fields.
func jsonFields(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		name, _, _ := bytes.Cut([]byte(f.Tag.Get("json")), []byte(","))
		if string(name) != "-" {
			names = append(names, string(name))
		}
	}
	slices.Sort(names)
	return names
}

// The client's Result has every field of the contract's, by the same JSON
// names (its own type only for the files' bytes), and reads the server's
// document with the files decoded.
func TestResultIsTheWiresResult(t *testing.T) {
	if got, want := jsonFields(reflect.TypeFor[Result]()), jsonFields(reflect.TypeFor[execapi.Result]()); !slices.Equal(got, want) {
		t.Fatalf("client.Result has %q, execapi.Result %q", got, want)
	}
	png := []byte("\x89PNG\r\n\x1a\n\x00\xff")
	wire := execapi.Result{ExitCode: 3, Stdout: "o", Files: map[string]string{"/tmp/a.png": "iVBORw0KGgoA/w=="}, Outcome: execapi.OutcomeNonzeroExit,
		Facts: execapi.Facts{TimeoutMS: 5}}
	data, _ := json.Marshal(wire)
	res, err := decodeResult(data)
	if err != nil || res.ExitCode != 3 || res.Stdout != "o" || !bytes.Equal(res.Files["/tmp/a.png"], png) || res.Facts.TimeoutMS != 5 {
		t.Fatalf("decoded %+v, %v", res, err)
	}
	// An older server's document, without outcome or files.
	res, err = decodeResult([]byte(`{"exit_code":124,"facts":{"timed_out":true}}`))
	if err != nil || res.Outcome != OutcomeTimeout || res.Files == nil {
		t.Errorf("older server's result: %+v, %v", res, err)
	}
}

func TestSave(t *testing.T) {
	res := Result{Files: map[string][]byte{"/tmp/out/a.png": {1, 2}, "/b.bin": {3}}}
	dir := t.TempDir()
	if err := res.Save("/tmp/out/a.png", filepath.Join(dir, "x", "a.png")); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "x", "a.png")); !bytes.Equal(data, []byte{1, 2}) {
		t.Errorf("saved %v", data)
	}
	if err := res.Save("/nope", filepath.Join(dir, "n")); err == nil {
		t.Error("saved a file the run did not return")
	}
	written, err := res.SaveAll(filepath.Join(dir, "all"))
	want := []string{filepath.Join(dir, "all", "b.bin"), filepath.Join(dir, "all", "tmp", "out", "a.png")}
	if err != nil || !slices.Equal(written, want) {
		t.Errorf("SaveAll wrote %q, %v; want %q", written, err, want)
	}
}

func TestFromEnvironment(t *testing.T) {
	t.Setenv(EnvURL, "https://user:pw@sandbox.example/")
	t.Setenv(EnvKey, " sr_live_k ")
	c, err := FromEnvironment()
	if err != nil || c.base != "https://user:pw@sandbox.example" || c.apiKey != "sr_live_k" || c.URL() != "https://user:xxxxx@sandbox.example" {
		t.Errorf("FromEnvironment = %+v, %v", c, err)
	}
	t.Setenv(EnvURL, "")
	if c, err := FromEnvironment(); err != nil || c.base != DefaultURL {
		t.Errorf("no URL: %+v, %v", c, err)
	}
	t.Setenv(EnvURL, "sandbox.example:8722")
	if _, err := FromEnvironment(); err == nil {
		t.Error("a URL without a scheme was taken")
	}
	// The client's own transport options and a given HTTP client.
	hc := &http.Client{}
	if c := New(DefaultURL, "", WithHTTPClient(hc), WithConnectTimeout(time.Second)); c.http != hc || c.cfg.connect != time.Second {
		t.Errorf("options: %+v", c.cfg)
	}
}

// The version is the scratchrun module's: this build's own in the
// module's programs, the required version in another program.
func TestVersion(t *testing.T) {
	own := func() buildinfo.Info { return buildinfo.Info{Version: "v9.9.9"} }
	for _, c := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}}, "v9.9.9"},
		{debug.BuildInfo{Main: debug.Module{Path: "example.com/agent"}, Deps: []*debug.Module{{Path: modulePath, Version: "v1.4.0"}}}, "v1.4.0"},
		{debug.BuildInfo{Main: debug.Module{Path: "example.com/agent"}, Deps: []*debug.Module{{Path: modulePath, Version: "v1.4.0", Replace: &debug.Module{Path: "../scratchrun"}}}}, "v1.4.0"},
		{debug.BuildInfo{Main: debug.Module{Path: "example.com/agent"}}, buildinfo.Dev},
	} {
		if got := versionIn(&c.bi, own); got != c.want {
			t.Errorf("%+v: version %q, want %q", c.bi, got, c.want)
		}
	}
	if Version() == "" {
		t.Error("no version")
	}
}
