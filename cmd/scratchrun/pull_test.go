package main

import (
	"archive/tar"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/images/imagestest"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// An operator pulls images from a registry (a real one, on loopback, serving
// images built from the project's own image) and runs code in each: the
// layers' whiteouts took effect, the image's environment is there, the
// platform asked for was picked from an index, an image whose user is not
// root runs, a second pull of the same digest downloads nothing, and an
// alias says in its note what ran.
func TestImagesPullAndRun(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	base := projectRootfsLayer(t)
	reg := imagestest.NewRegistry(t)

	files := []imagestest.Entry{
		// Mount points that are not directories: the sandbox must still
		// get its own /tmp and /proc, not what these point to.
		{Name: "tmp", Type: tar.TypeSymlink, Link: "/etc"},
		{Name: "proc", Type: tar.TypeSymlink, Link: "/proc"},
		{Name: "code", Type: tar.TypeReg, Mode: 0o644, Body: "not a directory"},
		{Name: "opt/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "opt/keep", Type: tar.TypeReg, Mode: 0o644, Body: "v1\n"},
		{Name: "opt/gone", Type: tar.TypeReg, Mode: 0o644, Body: "deleted by the upper layer\n"},
		{Name: "opt/dir/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "opt/dir/a", Type: tar.TypeReg, Mode: 0o644},
		{Name: "opt/dir/b", Type: tar.TypeReg, Mode: 0o644},
	}
	upper := []imagestest.Entry{
		{Name: "opt/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "opt/.wh.gone", Type: tar.TypeReg},
		{Name: "opt/keep", Type: tar.TypeReg, Mode: 0o644, Body: "v2\n"},
		{Name: "opt/dir/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "opt/dir/.wh..wh..opq", Type: tar.TypeReg},
		{Name: "opt/dir/c", Type: tar.TypeReg, Mode: 0o644},
	}
	cfg := v1.Config{Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "GREETING=from the image"}, WorkingDir: "/opt", Cmd: []string{"/bin/bash"}}
	reg.Push("team/layers:1", imagestest.Image(t, "linux/amd64", cfg, append(slices.Clone(base), files...), upper))

	arch := func(a string) []imagestest.Entry {
		return append(slices.Clone(base), imagestest.Entry{Name: "etc/arch", Type: tar.TypeReg, Mode: 0o644, Body: a + "\n"})
	}
	// Both carry this host's binaries, so that either runs here: the
	// marker tells which one was picked.
	reg.PushIndex("team/multi:1", imagestest.Index(t, imagestest.Image(t, "linux/arm64/v8", v1.Config{}, arch("arm64")), imagestest.Image(t, "linux/amd64", v1.Config{}, arch("amd64"))))

	home := append(slices.Clone(base),
		imagestest.Entry{Name: "home/", Type: tar.TypeDir, Mode: 0o755},
		imagestest.Entry{Name: "home/app/", Type: tar.TypeDir, Mode: 0o700, UID: 1000, GID: 1000},
		imagestest.Entry{Name: "home/app/secret", Type: tar.TypeReg, Mode: 0o600, UID: 1000, GID: 1000, Body: "the app's own file\n"})
	reg.Push("team/nonroot:1", imagestest.Image(t, "linux/amd64", v1.Config{User: "app", Env: []string{"HOME=/home/app"}}, home))

	dir := worldReadableTempDir(t)
	t.Setenv("SCRATCHRUN_DATA_DIR", filepath.Join(dir, "data"))
	pull := func(name, ref string, extra ...string) cliResult {
		t.Helper()
		args := append([]string{"images", "pull", name, reg.Ref(ref), "--command", "/bin/bash {file}", "--file", "main.sh"}, extra...)
		r := scratchrun(t, dir, "", args...)
		if r.code != 0 {
			t.Fatalf("pull %s: exit %d stderr %q", ref, r.code, r.stderr)
		}
		return r
	}
	run := func(runtime, code string) cliResult {
		t.Helper()
		return scratchrun(t, dir, "", "exec", "--runtime", runtime, "--code", code)
	}

	pull("layers", "team/layers:1", "--env", "EXTRA=from the operator")
	r := run("layers", `cat /opt/keep; ls /opt/dir; [ -e /opt/gone ] && echo "gone is back"; echo "$GREETING / $EXTRA / $PATH"; pwd
echo x > /tmp/x && [ ! -e /etc/x ] && [ -d /tmp ] && [ -r /proc/self/status ] && echo "mount points are the sandbox's"`)
	if want := "v2\nc\nfrom the image / from the operator / /usr/local/bin:/usr/bin:/bin\n/tmp\nmount points are the sandbox's\n"; r.code != 0 || r.stdout != want {
		t.Errorf("layers: exit %d stdout %q (want %q) stderr %q", r.code, r.stdout, want, r.stderr)
	}

	blobs := reg.BlobDownloads()
	r = pull("layers-again", "team/layers:1")
	if reg.BlobDownloads() != blobs || !strings.Contains(r.stderr, "nothing to download") {
		t.Errorf("second pull of the same digest downloaded %d blobs: %q", reg.BlobDownloads()-blobs, r.stderr)
	}

	pull("multi", "team/multi:1")
	pull("multi-arm", "team/multi:1", "--platform", "linux/arm64")
	for rt, want := range map[string]string{"multi": "amd64\n", "multi-arm": "arm64\n"} {
		if r := run(rt, "cat /etc/arch"); r.code != 0 || r.stdout != want {
			t.Errorf("%s: exit %d stdout %q (want %q) stderr %q", rt, r.code, r.stdout, want, r.stderr)
		}
	}

	r = pull("nonroot", "team/nonroot:1")
	if !strings.Contains(r.stderr, `User "app" is not applied`) {
		t.Errorf("pull does not say the image's user is not applied: %q", r.stderr)
	}
	r = run("nonroot", `id -u; cat /home/app/secret; echo "$HOME"`)
	if want := "0\nthe app's own file\n/home/app\n"; r.code != 0 || r.stdout != want {
		t.Errorf("nonroot: exit %d stdout %q (want %q) stderr %q", r.code, r.stdout, want, r.stderr)
	}

	r = scratchrun(t, dir, "", "images", "list")
	for _, want := range []string{reg.Ref("team/layers:1"), "layers,layers-again", reg.Ref("team/multi:1") + " (linux/arm64/v8)", "pull"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("images list lacks %q:\n%s", want, r.stdout)
		}
	}

	// Aliases: off until declared; then the note says what ran.
	if r := run("python3.12", "echo hi"); r.code != 2 || !strings.Contains(r.stderr, "installed runtimes: ") {
		t.Errorf("unknown runtime without an alias: exit %d stderr %q", r.code, r.stderr)
	}
	if r := scratchrun(t, dir, "", "images", "alias", "python3.12", "layers"); r.code != 0 {
		t.Fatalf("alias: exit %d stderr %q", r.code, r.stderr)
	}
	r = run("python3.12", "cat /opt/keep")
	if r.code != 0 || r.stdout != "v2\n" || !strings.Contains(r.stderr, "scratchrun: note: Runtime python3.12 is an alias the operator set for layers: the code ran with layers.") {
		t.Errorf("through the alias: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := scratchrun(t, dir, "", "images", "list"); !strings.Contains(r.stdout, "python3.12\tlayers") {
		t.Errorf("images list does not show the alias:\n%s", r.stdout)
	}
	if r := scratchrun(t, dir, "", "images", "alias", "--remove", "python3.12"); r.code != 0 {
		t.Fatalf("alias --remove: exit %d stderr %q", r.code, r.stderr)
	}
	if r := run("python3.12", "echo hi"); r.code != 2 {
		t.Errorf("removed alias still runs: exit %d", r.code)
	}
}

// A pull that fails (here a layer corrupted on its way) says which layer,
// exits 1, and leaves nothing behind.
func TestImagesPullCorruptLayer(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	reg := imagestest.NewRegistry(t)
	img := imagestest.Image(t, "linux/amd64", v1.Config{}, projectRootfsLayer(t))
	reg.Push("team/broken:1", img)
	layers, _ := img.Layers()
	digest, _ := layers[0].Digest()
	reg.Corrupt(digest)

	dir := worldReadableTempDir(t)
	data := filepath.Join(dir, "data")
	t.Setenv("SCRATCHRUN_DATA_DIR", data)
	r := scratchrun(t, dir, "", "images", "pull", "broken", reg.Ref("team/broken:1"), "--command", "/bin/bash {file}", "--file", "main.sh")
	if r.code != 1 || !strings.Contains(r.stderr, "layer 1/1 "+digest.String()) {
		t.Errorf("exit %d stderr %q", r.code, r.stderr)
	}
	var left []string
	for _, sub := range []string{"images", "runtimes.d"} {
		entries, _ := os.ReadDir(filepath.Join(data, sub))
		for _, e := range entries {
			if e.Name() != ".lock" {
				left = append(left, sub+"/"+e.Name())
			}
		}
	}
	if len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
	if r := scratchrun(t, dir, "", "images", "pull", "bad", "x", "--command", "/bin/bash", "--file", "main.sh"); r.code != 2 || !strings.Contains(r.stderr, "{file}") {
		t.Errorf("bad command: exit %d stderr %q", r.code, r.stderr)
	}
}

// A pulled runtime is a runtime like the others for a server: listed in
// /v1/runtimes and in the MCP tool's runtime enum, kept warm (--warm python
// pre-starts the image's interpreter), and run.
func TestPulledRuntimeInServeAndMCP(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	before := leakcheck.Take(leakOpts)
	reg := imagestest.NewRegistry(t)
	reg.Push("lang/python:3.13", imagestest.Image(t, "linux/amd64", v1.Config{Env: []string{"LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1"}}, projectRootfsLayer(t, true)))
	dir := worldReadableTempDir(t)
	t.Setenv("SCRATCHRUN_DATA_DIR", filepath.Join(dir, "data"))
	r := scratchrun(t, dir, "", "images", "pull", "py313", reg.Ref("lang/python:3.13"), "--command", "/usr/bin/python3.13 {file}",
		"--file", "main.py", "--warm", "python", "--version", "3.13", "--libraries", "stdlib")
	if r.code != 0 {
		t.Fatalf("pull: exit %d stderr %q", r.code, r.stderr)
	}

	p := startServe(t, "--db", filepath.Join(t.TempDir(), "keys.db"))
	s, body, err := httpCall(http.MethodGet, p.url+"/v1/runtimes", "", "")
	var info struct {
		Runtimes []struct{ Name, Version, Image string }
	}
	if err != nil || s != 200 || json.Unmarshal([]byte(body), &info) != nil || len(info.Runtimes) != 1 ||
		info.Runtimes[0].Name != "py313" || info.Runtimes[0].Version != "3.13" || info.Runtimes[0].Image != reg.Ref("lang/python:3.13") {
		t.Fatalf("GET /v1/runtimes: %d %s %v", s, body, err)
	}
	warm := func() bool {
		return metricLine(p.url, "", `scratchrun_pool_size{network="none",runtime="py313",variant="light"}`) == "1"
	}
	deadline := time.Now().Add(60 * time.Second)
	for !warm() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if !warm() {
		t.Fatalf("no warm py313 sandbox after a minute:\n%s", p.stderr())
	}
	s, body, err = httpCall(http.MethodPost, p.url+"/v1/exec", "", `{"runtime": "py313", "code": "import sys, os\nprint(sys.version_info[:2], os.environ['LANG'])"}`)
	if err != nil || s != 200 || !strings.Contains(body, `"stdout":"(3, 13) C.UTF-8\n"`) {
		t.Errorf("POST /v1/exec: %d %s %v", s, body, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "pull-test", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.url + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 {
		t.Fatalf("tools/list: %v %v", tools, err)
	}
	schema, _ := json.Marshal(tools.Tools[0].InputSchema)
	if !strings.Contains(string(schema), `"enum":["py313"]`) || !strings.Contains(tools.Tools[0].Description, "py313 (version 3.13): stdlib") {
		t.Errorf("the MCP tool does not offer py313: %s\n%s", schema, tools.Tools[0].Description)
	}
	cs.Close()
	p.stop(t)
	if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
		t.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
	}
}

// `images import` takes what `docker save` writes and an OCI image layout,
// as well as a rootfs tarball, and the runtime runs.
func TestImagesImportArchiveAndLayout(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	img := imagestest.Image(t, "linux/amd64", v1.Config{Env: []string{"ORIGIN=archive"}}, projectRootfsLayer(t))
	dir := worldReadableTempDir(t)
	archive := filepath.Join(dir, "saved.tar")
	tag, _ := name.NewTag("team/saved:1")
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		t.Fatal(err)
	}
	lay := filepath.Join(dir, "layout")
	p, err := layout.Write(lay, empty.Index)
	if err == nil {
		err = p.AppendImage(img)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SCRATCHRUN_DATA_DIR", filepath.Join(dir, "data"))
	for rt, path := range map[string]string{"fromsave": archive, "fromlayout": lay} {
		r := scratchrun(t, dir, "", "images", "import", rt, path, "--command", "/bin/bash {file}", "--file", "main.sh")
		if r.code != 0 {
			t.Fatalf("import %s: exit %d stderr %q", rt, r.code, r.stderr)
		}
		r = scratchrun(t, dir, "", "exec", "--runtime", rt, "--code", `echo "$ORIGIN"`)
		if r.code != 0 || r.stdout != "archive\n" {
			t.Errorf("%s: exit %d stdout %q stderr %q", rt, r.code, r.stdout, r.stderr)
		}
	}
	r := scratchrun(t, dir, "", "images", "list")
	if !strings.Contains(r.stdout, "team/saved:1") || !strings.Contains(r.stdout, "docker-archive") {
		t.Errorf("images list:\n%s", r.stdout)
	}
}
