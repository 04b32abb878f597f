package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/nats-io/nats.go"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/images/imagestest"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/natsserver"
)

// smallImageCmd is the config of the small images these tests pull: the
// project's bash and its libraries, with a PATH of its own.
var smallImageCmd = v1.Config{Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "ORIGIN=small"}}

// inState runs scratchrun with its store in data.
func inState(t *testing.T, dir, data string, args ...string) cliResult {
	t.Helper()
	t.Setenv("SCRATCHRUN_DATA_DIR", data)
	return scratchrun(t, dir, "", args...)
}

// runtimeFile reads a runtime of the store in data as runtimes.d has it.
func runtimeFile(t *testing.T, data, name string) images.Runtime {
	t.Helper()
	var rt images.Runtime
	body, err := os.ReadFile(filepath.Join(data, "runtimes.d", name+".json"))
	if err == nil {
		err = json.Unmarshal(body, &rt)
	}
	if err != nil {
		t.Fatalf("runtime %s in %s: %v", name, data, err)
	}
	return rt
}

// storeLeftovers lists what a store holds of images and runtimes.
func storeLeftovers(data string) []string {
	var left []string
	for _, sub := range []string{"images", "runtimes.d"} {
		entries, _ := os.ReadDir(filepath.Join(data, sub))
		for _, e := range entries {
			if e.Name() != ".lock" {
				left = append(left, sub+"/"+e.Name())
			}
		}
	}
	return left
}

// A catalog runtime built here (bash, in the real trixie image) goes into
// a registry on loopback with `images push`; another state directory
// pulls it by name and reference alone and gets the same runtime on the
// same digest, runs code in it, and pushes the same digest again.
func TestImagesPushPullBetweenStates(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	before := leakcheck.Take(leakOpts)
	reg := imagestest.NewRegistry(t)
	dir := worldReadableTempDir(t)
	r := inState(t, dir, images.DefaultRoot, "images", "push", "bash", reg.Ref("fleet/bash:1"))
	if r.code != 0 || !strings.HasPrefix(r.stdout, reg.Ref("fleet/bash@sha256:")) {
		t.Fatalf("push: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	byDigest := strings.TrimSpace(r.stdout)
	digest := strings.TrimPrefix(byDigest, reg.Ref("fleet/bash@"))

	other := filepath.Join(dir, "other")
	if r := inState(t, dir, other, "images", "pull", "fleetbash", reg.Ref("fleet/bash:1")); r.code != 0 {
		t.Fatalf("pull with no flags: exit %d stderr %q", r.code, r.stderr)
	}
	got := runtimeFile(t, other, "fleetbash")
	store, err := images.OpenStore(images.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := store.Resolve("bash")
	if err != nil {
		t.Fatal(err)
	}
	want := res.Runtime
	if got.Digest != digest || !slices.Equal(got.Command, want.Command) || got.File != want.File || !reflect.DeepEqual(got.Env, want.Env) ||
		got.Version != want.Version || !slices.Equal(got.Libraries, want.Libraries) || got.Warm != want.Warm {
		t.Errorf("pulled runtime %+v\nwant the catalog's %+v on %s", got, want, digest)
	}
	r = inState(t, dir, other, "exec", "--runtime", "fleetbash", "--code", `echo "$BASH_VERSION"; id -u; jq -n 1+1`)
	if r.code != 0 || !strings.HasPrefix(r.stdout, want.Version) || !strings.HasSuffix(r.stdout, "\n0\n2\n") {
		t.Errorf("exec in the pulled runtime: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = inState(t, dir, other, "images", "push", "fleetbash", reg.Ref("fleet/bash:again"))
	if r.code != 0 || strings.TrimSpace(r.stdout) != reg.Ref("fleet/bash@"+digest) {
		t.Errorf("push of the pulled tree: exit %d stdout %q (want the digest %s) stderr %q", r.code, r.stdout, digest, r.stderr)
	}
	pullCatalogBetweenStates(t, dir, reg.Ref("fleet/bash:1"), digest, want.Version)
	if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
		t.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
	}
}

// pullCatalogBetweenStates goes on from TestImagesPushPullBetweenStates
// with the catalog bash it pushed as ref (on digest): pulled by its
// catalog name into an empty state directory it is the catalog image
// trixie there, pulled, with no runtime file, and every catalog runtime of
// trixie runs in it; a worker told --images-from bash=ref there finds it
// in place and offers the catalog runtimes, and so does setup
// --images-from; pulled as (a runtime of) another catalog image it is
// refused, by the CLI, a worker at start and setup, and leaves nothing.
func pullCatalogBetweenStates(t *testing.T, dir, ref, digest, bashVersion string) {
	t.Helper()
	fleet := filepath.Join(dir, "catalog")
	r := inState(t, dir, fleet, "images", "pull", "bash", ref)
	if r.code != 0 || !strings.Contains(r.stderr, "catalog image trixie ") {
		t.Fatalf("pull under the catalog name: exit %d stderr %q", r.code, r.stderr)
	}
	left := storeLeftovers(fleet)
	if len(left) != 1 || !strings.HasPrefix(left[0], "images/trixie-") {
		t.Errorf("the catalog pull left %v, want the trixie image alone (no runtime file)", left)
	}
	r = inState(t, dir, fleet, "exec", "--runtime", "bash", "--code", `echo "$BASH_VERSION"; jq -n 1+1`)
	if r.code != 0 || !strings.HasPrefix(r.stdout, bashVersion) || !strings.HasSuffix(r.stdout, "\n2\n") {
		t.Errorf("exec in the pulled catalog bash: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = inState(t, dir, fleet, "exec", "--runtime", "python3.13", "--code", "import numpy; print(numpy.arange(3).sum())")
	if r.code != 0 || r.stdout != "3\n" {
		t.Errorf("exec in the pulled catalog python3.13: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = inState(t, dir, fleet, "images", "list")
	if r.code != 0 || !regexp.MustCompile(`(?m)^trixie \(pulled from `+regexp.QuoteMeta(ref)+`\)\s+\S+\s+pull\s.*bash.*current$`).MatchString(r.stdout) {
		t.Errorf("images list: exit %d stdout %q", r.code, r.stdout)
	}
	if r := inState(t, dir, fleet, "images", "build", "bash"); r.code != 0 || !strings.Contains(r.stderr, "is up to date (pulled from "+ref+")") {
		t.Errorf("build after the pull: exit %d stderr %q", r.code, r.stderr)
	}

	ns := natsserver.Start(t, natsserver.Options{})
	nc, err := nats.Connect(ns.URLs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync(cluster.RegistrySubject("fleet-catalog"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SCRATCHRUN_DATA_DIR", fleet)
	w := &process{name: "fleet-catalog"}
	cmd := exec.Command(binary, "worker", "--nats", ns.URLs()[0], "--id", "fleet-catalog", "--images-from", "bash="+ref)
	cmd.Env = append(os.Environ(), "SCRATCHRUN_POOL_FLOOR=0")
	w.start(t, cmd, regexp.MustCompile(`serving calls from NATS`), "serving")
	if logs := w.stderr(); !strings.Contains(logs, "image "+digest+" is in the store already as catalog image trixie") {
		t.Errorf("the worker's log does not show the catalog image found in place:\n%s", logs)
	}
	msg, err := sub.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatalf("no registration from the worker: %v\n%s", err, w.stderr())
	}
	if reg, err := cluster.DecodeRegistration("fleet-catalog", msg.Data); err != nil || !reg.Offers("bash") || !reg.Offers("python3.13") {
		t.Errorf("registration %+v, %v: want the catalog runtimes of trixie offered", reg.Runtimes, err)
	}
	w.stop(t)
	r = inState(t, dir, fleet, "setup", "--no-images", "--images-from", "bash="+ref)
	if r.code != 0 || !strings.Contains(r.stdout, "pulled: 1 image(s)") || !strings.Contains(r.stderr, "is in the store already as catalog image trixie") {
		t.Errorf("setup --images-from bash=REF: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}

	refused := filepath.Join(dir, "refused")
	r = inState(t, dir, refused, "images", "pull", "python3.11", ref)
	if r.code != exitUsage || !strings.Contains(r.stderr, `name: "python3.11" is a catalog runtime (it runs in bookworm); this image is the catalog image trixie`) {
		t.Errorf("pull as a runtime of another catalog image: exit %d stderr %q", r.code, r.stderr)
	}
	r = inState(t, dir, refused, "worker", "--nats", ns.URLs()[0], "--id", "fleet-refused", "--images-from", "bookworm="+ref)
	if r.code != 1 || !strings.Contains(r.stderr, "--images-from bookworm="+ref) || !strings.Contains(r.stderr, "this image is the catalog image trixie") || strings.Contains(r.stderr, "serving") {
		t.Errorf("a worker told to pull trixie as bookworm: exit %d stderr %q", r.code, r.stderr)
	}
	r = inState(t, dir, refused, "setup", "--no-images", "--images-from", "bookworm="+ref)
	if r.code != 1 || !strings.Contains(r.stderr, "--images-from bookworm="+ref) || !strings.Contains(r.stderr, "this image is the catalog image trixie") {
		t.Errorf("setup told to pull trixie as bookworm: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if left := storeLeftovers(refused); len(left) != 0 {
		t.Errorf("refused pulls left %v", left)
	}
}

// A runtime pulled with a bare `--command bash` runs the image's own bash,
// found in its PATH; a name the image's PATH lacks is refused naming the
// PATH; export to a layout and to an archive, import (or pull) of each
// with no flags; a corrupt push and a push cut short are refused by pull
// and leave nothing.
func TestImagesExportImportAndBrokenPushes(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	reg := imagestest.NewRegistry(t)
	base := projectRootfsLayer(t)
	reg.Push("small:1", imagestest.Image(t, "linux/amd64", smallImageCmd, base))
	dir := worldReadableTempDir(t)
	data := filepath.Join(dir, "data")

	r := inState(t, dir, data, "images", "pull", "nope", reg.Ref("small:1"), "--command", "nosuchprog {file}", "--file", "main.sh")
	if r.code != exitUsage || !strings.Contains(r.stderr, `program "nosuchprog" is not in the image's PATH (/usr/local/bin:/usr/bin:/bin)`) {
		t.Errorf("unknown program: exit %d stderr %q", r.code, r.stderr)
	}
	if left := storeLeftovers(data); len(left) != 0 {
		t.Errorf("a refused pull left %v", left)
	}
	r = inState(t, dir, data, "images", "pull", "small", reg.Ref("small:1"), "--command", "bash {file}", "--file", "main.sh", "--version", "5")
	if r.code != 0 {
		t.Fatalf("pull --command 'bash {file}': exit %d stderr %q", r.code, r.stderr)
	}
	if rt := runtimeFile(t, data, "small"); rt.Command[0] != "/usr/bin/bash" {
		t.Errorf("bash resolved to %q, want /usr/bin/bash (the image's PATH; /bin is a symlink in it)", rt.Command[0])
	}
	if r := inState(t, dir, data, "exec", "--runtime", "small", "--code", `echo "$ORIGIN $0"`); r.code != 0 || r.stdout != "small /code/main.sh\n" {
		t.Errorf("exec: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}

	lay, archive := filepath.Join(dir, "small-layout"), filepath.Join(dir, "small.tar")
	for _, dest := range []string{lay, archive} {
		if r := inState(t, dir, data, "images", "export", "small", dest); r.code != 0 {
			t.Fatalf("export %s: exit %d stderr %q", dest, r.code, r.stderr)
		}
	}
	want := runtimeFile(t, data, "small")
	elsewhere := filepath.Join(dir, "elsewhere")
	for name, args := range map[string][]string{"from-layout": {"import", "from-layout", lay}, "from-archive": {"pull", "from-archive", archive}} {
		if r := inState(t, dir, elsewhere, append([]string{"images"}, args...)...); r.code != 0 {
			t.Fatalf("images %v: exit %d stderr %q", args, r.code, r.stderr)
		}
		got := runtimeFile(t, elsewhere, name)
		if !slices.Equal(got.Command, want.Command) || got.Version != "5" || got.Env["ORIGIN"] != "small" {
			t.Errorf("%s: %+v, want the runtime exported %+v", name, got, want)
		}
		if r := inState(t, dir, elsewhere, "exec", "--runtime", name, "--code", `echo "$ORIGIN"`); r.code != 0 || r.stdout != "small\n" {
			t.Errorf("%s: exit %d stdout %q stderr %q", name, r.code, r.stdout, r.stderr)
		}
	}

	// Corrupt: the registry serves the pushed layer altered.
	r = inState(t, dir, data, "images", "push", "small", reg.Ref("fleet/small:1"))
	if r.code != 0 {
		t.Fatalf("push: exit %d stderr %q", r.code, r.stderr)
	}
	layers := remoteLayers(t, reg.Ref("fleet/small:1"))
	reg.Corrupt(layers[0])
	broken := filepath.Join(dir, "broken")
	r = inState(t, dir, broken, "images", "pull", "small", reg.Ref("fleet/small:1"))
	if r.code != 1 || !strings.Contains(r.stderr, "layer 1/1 "+layers[0].String()) {
		t.Errorf("pull of a corrupt push: exit %d stderr %q", r.code, r.stderr)
	}
	if left := storeLeftovers(broken); len(left) != 0 {
		t.Errorf("a corrupt pull left %v", left)
	}
	// Cut: a registry that drops the connection half way through the
	// layer's upload.
	cut := imagestest.NewRegistry(t)
	cut.CutUploads()
	if r := inState(t, dir, data, "images", "push", "small", cut.Ref("fleet/small:1")); r.code != 1 || !strings.Contains(r.stderr, cut.Ref("fleet/small:1")) {
		t.Errorf("push cut short: exit %d stderr %q", r.code, r.stderr)
	}
	if r := inState(t, dir, broken, "images", "pull", "small", cut.Ref("fleet/small:1")); r.code != 1 || !strings.Contains(r.stderr, "no such image") {
		t.Errorf("pull of a push cut short: exit %d stderr %q", r.code, r.stderr)
	}
	if left := storeLeftovers(broken); len(left) != 0 {
		t.Errorf("a pull of a cut push left %v", left)
	}
}

// remoteImage is the image ref names in its registry.
func remoteImage(t *testing.T, ref string) v1.Image {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// remoteLayers lists the layer digests of the image ref names.
func remoteLayers(t *testing.T, ref string) []v1.Hash {
	t.Helper()
	img := remoteImage(t, ref)
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var out []v1.Hash
	for _, l := range ls {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// A worker told --images-from pulls its runtime before it registers, says
// so in its log, and registers the runtime; one whose image cannot be
// pulled does not start, naming the reference.
func TestWorkerPullsImagesFromAtStart(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	before := leakcheck.Take(leakOpts)
	reg := imagestest.NewRegistry(t)
	reg.Push("small:1", imagestest.Image(t, "linux/amd64", smallImageCmd, projectRootfsLayer(t)))
	dir := worldReadableTempDir(t)
	src := filepath.Join(dir, "src")
	if r := inState(t, dir, src, "images", "pull", "small", reg.Ref("small:1"), "--command", "bash {file}", "--file", "main.sh"); r.code != 0 {
		t.Fatalf("pull: exit %d stderr %q", r.code, r.stderr)
	}
	r := inState(t, dir, src, "images", "push", "small", reg.Ref("fleet/small:1"))
	if r.code != 0 {
		t.Fatalf("push: exit %d stderr %q", r.code, r.stderr)
	}
	ref := strings.TrimSpace(r.stdout)

	ns := natsserver.Start(t, natsserver.Options{})
	nc, err := nats.Connect(ns.URLs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync(cluster.RegistrySubject("fleet-1"))
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "worker")
	t.Setenv("SCRATCHRUN_DATA_DIR", data)
	r = scratchrun(t, dir, "", "worker", "--nats", ns.URLs()[0], "--id", "fleet-1", "--images-from", "small="+reg.Ref("fleet/nosuch:1"))
	if r.code != 1 || !strings.Contains(r.stderr, "--images-from small="+reg.Ref("fleet/nosuch:1")) || strings.Contains(r.stderr, "serving") {
		t.Errorf("a worker whose image is missing: exit %d stderr %q", r.code, r.stderr)
	}
	if r := scratchrun(t, dir, "", "worker", "--nats", ns.URLs()[0], "--images-from", "small"); r.code != exitUsage || !strings.Contains(r.stderr, "is not NAME=REF") {
		t.Errorf("--images-from without a reference: exit %d stderr %q", r.code, r.stderr)
	}

	w := &process{name: "fleet-1"}
	cmd := exec.Command(binary, "worker", "--nats", ns.URLs()[0], "--id", "fleet-1", "--runtimes", "fleetsmall", "--images-from", "fleetsmall="+ref)
	cmd.Env = append(os.Environ(), "SCRATCHRUN_POOL_FLOOR=0")
	w.start(t, cmd, regexp.MustCompile(`serving calls from NATS`), "serving")
	logs := w.stderr()
	pulled, serving := strings.Index(logs, "--images-from: fleetsmall from "+ref), strings.Index(logs, "serving calls")
	if pulled < 0 || serving < pulled || !strings.Contains(logs, "runtime fleetsmall runs /usr/bin/bash {file}") {
		t.Errorf("the worker's log does not show the pull before it serves:\n%s", logs)
	}
	msg, err := sub.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatalf("no registration from the worker: %v\n%s", err, w.stderr())
	}
	reg1, err := cluster.DecodeRegistration("fleet-1", msg.Data)
	if err != nil || !reg1.Offers("fleetsmall") || len(reg1.Runtimes) != 1 {
		t.Errorf("registration %+v, %v: want fleetsmall offered", reg1.Runtimes, err)
	}
	w.stop(t)
	if got := runtimeFile(t, data, "fleetsmall"); got.Image != ref {
		t.Errorf("the worker's runtime runs in %s, want %s", got.Image, ref)
	}
	if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
		t.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
	}
}
