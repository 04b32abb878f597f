package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// clientPlatforms are the desktop OSes where scratchrun is the client of a
// server (scratchrun mcp forwarding to SCRATCHRUN_API_URL); the engine stays
// on Linux.
var clientPlatforms = []struct{ goos, goarch string }{
	{"darwin", "amd64"},
	{"darwin", "arm64"},
	{"windows", "amd64"},
}

// engineSide are the packages no client build may link (docs/design.md:
// "Nothing a desktop client links may import a Linux-only package").
var engineSide = []string{"internal/sandbox", "internal/engine", "internal/images"}

// goFor runs the go command in the module's root, building for goos/goarch
// with no cgo (a release's binaries have none), and returns its output.
func goFor(t *testing.T, goos, goarch string, args ...string) (string, error) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: the test builds for other platforms")
	}
	cmd := exec.Command(goTool, args...)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0", "GOTOOLCHAIN=local", "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Every command builds for every client platform; a failure names the
// platform and the compiler's first error, which names the file that
// pulled a Linux-only call into the client.
func TestClientCrossBuilds(t *testing.T) {
	for _, p := range clientPlatforms {
		out, err := goFor(t, p.goos, p.goarch, "build", "-o", os.DevNull, "./cmd/...")
		if err != nil {
			t.Errorf("GOOS=%s GOARCH=%s go build ./cmd/...: %v; first error: %s", p.goos, p.goarch, err, firstBuildError(out))
		}
	}
}

// firstBuildError is the first line of go build's output that is not a
// package heading ("# pkg").
func firstBuildError(out string) string {
	for line := range strings.SplitSeq(out, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			return line
		}
	}
	return out
}

// The client's dependencies hold no engine package, and a regression names
// the package that brought one in.
func TestClientLinksNoEngine(t *testing.T) {
	for _, p := range clientPlatforms {
		// -e: a broken build still lists its packages, so that a
		// regression is named here and not only as a compile error.
		out, err := goFor(t, p.goos, p.goarch, "list", "-e", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./cmd/...")
		if err != nil {
			t.Fatalf("go list -deps for %s/%s: %v: %s", p.goos, p.goarch, err, out)
		}
		for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
			fields := strings.Fields(line)
			if len(fields) == 0 {
				continue
			}
			// Only the cut is named: an engine package importing another
			// is no news once the first one is in.
			if isEngineSide(fields[0]) {
				continue
			}
			for _, imp := range fields[1:] {
				if isEngineSide(imp) {
					t.Errorf("%s/%s: the client links %s (imported by %s); the engine side stays Linux-only", p.goos, p.goarch, imp, fields[0])
				}
			}
		}
	}
}

func isEngineSide(pkg string) bool {
	rel, ok := strings.CutPrefix(pkg, "github.com/scratchrun/scratchrun/")
	return ok && slices.ContainsFunc(engineSide, func(e string) bool { return rel == e || strings.HasPrefix(rel, e+"/") })
}
