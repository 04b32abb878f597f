package buildinfo

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// ldflags are the release's flags, spelled as the release script and
// install.sh spell them: a rename here is a rename there.
const ldflags = "-X github.com/scratchrun/scratchrun/internal/buildinfo.version=v9.8.7" +
	" -X github.com/scratchrun/scratchrun/internal/buildinfo.commit=0123456789abcdef0123456789abcdef01234567" +
	" -X github.com/scratchrun/scratchrun/internal/buildinfo.date=2031-02-03T04:05:06Z"

// probeMain prints Get as JSON.
const probeMain = `package main

import (
	"encoding/json"
	"os"

	"github.com/scratchrun/scratchrun/internal/buildinfo"
)

func main() { json.NewEncoder(os.Stdout).Encode(buildinfo.Get()) }
`

// probeModule is a module of its own, under this module's path so that it
// may import this internal package, holding a copy of the package and a
// main that prints Get, committed to a git repository of its own: the
// toolchain stamps what it stamps a checkout's build with, and the test
// knows the commit.
func probeModule(t *testing.T) (dir, head string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: the test builds from a repository of its own")
	}
	dir = t.TempDir()
	pkg := filepath.Join(dir, "internal", "buildinfo")
	for _, d := range []string{pkg, filepath.Join(dir, "cmd", "probe")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"buildinfo.go", "doc.go"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(pkg, f), string(data))
	}
	goVersion := strings.TrimPrefix(runtime.Version(), "go")
	write(t, filepath.Join(dir, "go.mod"), "module github.com/scratchrun/scratchrun\n\ngo "+goVersion+"\n")
	write(t, filepath.Join(dir, "cmd", "probe", "main.go"), probeMain)
	git(t, dir, "init", "-q")
	git(t, dir, "add", ".")
	git(t, dir, "-c", "user.name=test", "-c", "user.email=test@example.invalid", "commit", "-q", "-m", "probe")
	return dir, git(t, dir, "rev-parse", "HEAD")
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// buildAndRun builds the probe with the extra go build flags and returns
// what it printed.
func buildAndRun(t *testing.T, dir string, flags ...string) Info {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: the test builds a binary")
	}
	bin := filepath.Join(t.TempDir(), "probe")
	build := exec.Command(goTool, append(append([]string{"build", "-o", bin}, flags...), "./cmd/probe")...)
	build.Dir = dir
	// The probe module has no dependencies; nothing is fetched.
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local", "GOPROXY=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %v: %v: %s", flags, err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatalf("run the probe: %v", err)
	}
	var info Info
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("probe printed %q: %v", out, err)
	}
	if info.GoVersion != runtime.Version() {
		t.Errorf("GoVersion = %q, want %q", info.GoVersion, runtime.Version())
	}
	return info
}

// A release's flags say it all, with or without a repository around.
func TestReleaseFlags(t *testing.T) {
	dir, _ := probeModule(t)
	for _, vcs := range []string{"-buildvcs=true", "-buildvcs=false"} {
		got := buildAndRun(t, dir, vcs, "-ldflags", ldflags)
		if got.Version != "v9.8.7" || got.Commit != "0123456789abcdef0123456789abcdef01234567" || got.Date != "2031-02-03T04:05:06Z" {
			t.Errorf("%s: got %+v, want the release flags' version, commit and date", vcs, got)
		}
	}
}

// A plain build from a checkout still says its commit, its time and
// whether the tree had changes.
func TestCheckoutBuildSaysItsCommit(t *testing.T) {
	dir, head := probeModule(t)
	got := buildAndRun(t, dir, "-buildvcs=true")
	if got.Commit != head || got.Modified {
		t.Errorf("clean checkout: got %+v, want commit %s, not modified", got, head)
	}
	if got.Date == "" {
		t.Errorf("clean checkout: no date (the commit's time) in %+v", got)
	}
	// The toolchain derives a pseudo-version naming the commit; an older
	// one says (devel), which is dev here.
	if got.Version != Dev && !strings.Contains(got.Version, head[:12]) {
		t.Errorf("clean checkout: version %q is neither %q nor a pseudo-version of %s", got.Version, Dev, head[:12])
	}
	write(t, filepath.Join(dir, "cmd", "probe", "main.go"), probeMain+"\n// changed\n")
	if got := buildAndRun(t, dir, "-buildvcs=true"); got.Commit != head || !got.Modified {
		t.Errorf("changed checkout: got %+v, want commit %s, modified", got, head)
	}
}

// Without flags or a repository's stamp, it says dev and no commit.
func TestBareBuildIsDev(t *testing.T) {
	dir, _ := probeModule(t)
	if got := buildAndRun(t, dir, "-buildvcs=false"); got.Version != Dev || got.Commit != "" || got.Date != "" || got.Modified {
		t.Errorf("got %+v, want version %q and nothing else known", got, Dev)
	}
}
