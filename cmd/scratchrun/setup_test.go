package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/buildinfo"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// setup --dry-run, as an ordinary user would run it before a first real
// run: it says each step and what it would do, and changes nothing.
func TestSetupDryRun(t *testing.T) {
	dir := t.TempDir()
	data, state := filepath.Join(dir, "data"), filepath.Join(dir, "state")
	env := []string{"SCRATCHRUN_DATA_DIR=" + data, "SCRATCHRUN_STATE_DIR=" + state, "SCRATCHRUN_ISOLATION="}
	r := asCLI(t, env, "setup", "--dry-run")
	want := "scratchrun setup " + buildinfo.Get().Version + ": readying this machine (dry run: nothing is changed)\n" +
		"[1/3] state directories\n" +
		"      " + data + ": would create\n" +
		"      " + filepath.Join(data, "images") + ": would create\n" +
		"      " + filepath.Join(data, "runtimes.d") + ": would create\n" +
		"      " + state + ": would create\n" +
		"[2/3] kernel and cgroups for --isolation namespaces\n" +
		"      would start the namespaces backend as the engine does and stop it: user namespaces, a cgroup hierarchy with the memory, pids and cpu controllers, the scratchrun-spawn helper (next to scratchrun, else built with cc)\n" +
		"[3/3] runtime images\n" +
		"      would build every catalog image with mmdebstrap (" + mmdebstrapFound() + ")\n" +
		"dry run: nothing was changed; run it without --dry-run to do the above\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("exit %d, stderr %q, stdout\n%s\nwant\n%s", r.code, r.stderr, r.stdout, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a dry run made %v", entries)
	}

	// A store with no image yet: each catalog image is named with its
	// runtimes; --no-images skips them.
	if err := os.MkdirAll(filepath.Join(data, "images"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = asCLI(t, env, "setup", "--dry-run")
	if r.code != 0 || !strings.Contains(r.stdout, "      image trixie (bash, node20, python3.13): would build with mmdebstrap\n") ||
		!strings.Contains(r.stdout, "      "+data+": already there\n") {
		t.Errorf("empty store: exit %d, stderr %q, stdout\n%s", r.code, r.stderr, r.stdout)
	}
	// --images-from: each pull is said, and an image a pull may give is
	// built only if it does not.
	r = asCLI(t, env, "setup", "--dry-run", "--images-from", "bash=127.0.0.1:5000/sr/bash:1")
	if r.code != 0 || !strings.Contains(r.stdout, "[3/3] runtime images\n      would pull bash from 127.0.0.1:5000/sr/bash:1\n") ||
		!strings.Contains(r.stdout, "      image trixie (bash, node20, python3.13): would build, unless the pull of bash gives it, with mmdebstrap\n") ||
		!strings.Contains(r.stdout, "      image bookworm (python3.11): would build with mmdebstrap\n") {
		t.Errorf("--images-from: exit %d, stderr %q, stdout\n%s", r.code, r.stderr, r.stdout)
	}
	if r := asCLI(t, env, "setup", "--dry-run", "--images-from", "bash"); r.code != exitUsage || !strings.Contains(r.stderr, `--images-from: "bash" is not NAME=REF`) {
		t.Errorf("--images-from bash: exit %d, stderr %q", r.code, r.stderr)
	}
	r = asCLI(t, env, "setup", "--dry-run", "--no-images")
	if r.code != 0 || !strings.Contains(r.stdout, "[3/3] runtime images\n      skipped (--no-images)") || strings.Contains(r.stdout, "would build") {
		t.Errorf("--no-images: exit %d, stderr %q, stdout\n%s", r.code, r.stderr, r.stdout)
	}
	if r := asCLI(t, env, "setup", "now"); r.code != exitUsage || !strings.Contains(r.stderr, `unexpected argument "now"`) {
		t.Errorf("setup now: exit %d, stderr %q", r.code, r.stderr)
	}
}

// On this machine, images built, setup finds everything there: a second
// run changes nothing and says so (the first may make the test's state
// directory).
func TestSetupSecondRunChangesNothing(t *testing.T) {
	testenv.SkipIfShort(t, "starts the namespaces backend as root and reads the installed images")
	if os.Geteuid() != 0 {
		t.Skip("needs root: the images of /var/lib/scratchrun and the cgroup hierarchy")
	}
	if r := scratchrun(t, t.TempDir(), "", "setup"); r.code != 0 {
		t.Fatalf("first run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	before, err := os.ReadDir("/var/lib/scratchrun/images")
	if err != nil {
		t.Fatal(err)
	}
	r := scratchrun(t, t.TempDir(), "", "setup")
	if r.code != 0 || !strings.HasSuffix(r.stdout, "done: everything was already there, nothing was changed\n") ||
		strings.Contains(r.stdout, "created") || strings.Contains(r.stdout, "building") || strings.Count(r.stdout, ": already there") < 6 {
		t.Errorf("second run: exit %d, stderr %q, stdout\n%s", r.code, r.stderr, r.stdout)
	}
	if !strings.Contains(r.stdout, "ok: the namespaces backend starts here") {
		t.Errorf("second run did not check the backend:\n%s", r.stdout)
	}
	after, err := os.ReadDir("/var/lib/scratchrun/images")
	if err != nil || len(after) != len(before) {
		t.Errorf("the images directory held %d entries, then %d (%v)", len(before), len(after), err)
	}
}
