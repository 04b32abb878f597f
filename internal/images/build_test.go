package images

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/images/imagestest"
)

// fakeMmdebstrap puts an executable "mmdebstrap" shell script first in
// PATH. The script records its arguments in args.txt and runs body with
// $out set to the target tarball (the last argument).
func fakeMmdebstrap(t *testing.T, body string) (argsFile string) {
	t.Helper()
	dir := t.TempDir()
	argsFile = filepath.Join(dir, "args.txt")
	script := "#!/bin/sh\nfor a; do out=$a; printf '%s\\n' \"$a\" >> " + argsFile + "; done\n" + body + "\n"
	if err := os.WriteFile(filepath.Join(dir, "mmdebstrap"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return argsFile
}

// onlyLock checks that the images directory holds nothing but the lock
// file: no image and no unfinished .tmp-* directory.
func onlyLock(t *testing.T, s *Store) {
	t.Helper()
	entries, _ := os.ReadDir(s.imagesDir)
	for _, e := range entries {
		if e.Name() != ".lock" {
			t.Errorf("left in images dir: %s", e.Name())
		}
	}
}

func TestBuildPipelineWithFakeMmdebstrap(t *testing.T) {
	s := openTestStore(t)
	fixture := writeFile(t, filepath.Join(t.TempDir(), "rootfs.tar"), imagestest.Tar(t, []imagestest.Entry{
		{Name: "./", Type: tar.TypeDir, Mode: 0o755},
		{Name: "./usr/bin/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "./usr/bin/python3.13", Type: tar.TypeReg, Mode: 0o755, Body: "fake"},
		{Name: "./dev/console", Type: tar.TypeChar, Mode: 0o600},
	}))
	argsFile := fakeMmdebstrap(t, `echo "I: fake mmdebstrap"; cp `+fixture+` "$out"`)
	var progress bytes.Buffer
	if err := s.Build(context.Background(), []string{"python3.13"}, false, &progress); err != nil {
		t.Fatalf("Build: %v\n%s", err, progress.String())
	}
	hash := currentHash(t, s, "trixie")
	for _, want := range []string{
		"[1/1] building image trixie (recipe " + shortHash(hash) + ")",
		"I: fake mmdebstrap",
		"[1/1] image trixie " + shortHash(hash) + " built in ",
	} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}
	args, _ := os.ReadFile(argsFile)
	tarball := lastLine(string(args))
	if !strings.HasPrefix(string(args), "--variant=minbase\n") || !strings.HasSuffix(string(args), "--\ntrixie\n"+tarball+"\n") {
		t.Errorf("mmdebstrap args:\n%s", args)
	}
	if !strings.HasPrefix(tarball, filepath.Join(s.imagesDir, ".tmp-trixie-")) {
		t.Errorf("tarball %s not in a .tmp- dir of the store", tarball)
	}
	res, err := s.Resolve("python3.13")
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if res.ImageDir != filepath.Join(s.imagesDir, "trixie-"+shortHash(hash)) || res.UIDBase != s.uidBase() {
		t.Errorf("Resolved %+v", res)
	}
	var m imageMeta
	if err := readJSON(filepath.Join(res.ImageDir, "image.json"), &m); err != nil {
		t.Fatal(err)
	}
	if m.Source != SourceMmdebstrap || m.RecipeHash != hash || m.Recipe == nil || m.Suite != "trixie" || m.SizeBytes != 4 || m.Created.IsZero() {
		t.Errorf("image.json = %+v", m)
	}
	if _, err := os.Stat(filepath.Join(res.ImageDir, "rootfs.tar")); !os.IsNotExist(err) {
		t.Error("tarball left next to the rootfs")
	}
	if fi, err := os.Stat(res.ImageDir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("image dir mode %v (%v), want 0755 so shifted ids can reach the rootfs", fi.Mode(), err)
	}

	// force rebuilds in place (swapped atomically).
	progress.Reset()
	if err := s.Build(context.Background(), []string{"trixie"}, true, &progress); err != nil {
		t.Fatalf("forced Build: %v", err)
	}
	if !strings.Contains(progress.String(), "built in") {
		t.Errorf("force did not rebuild:\n%s", progress.String())
	}
	entries, _ := os.ReadDir(s.imagesDir)
	if len(entries) != 2 { // .lock and the image
		t.Errorf("after forced rebuild: %d entries in images dir", len(entries))
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestBuildFailureLeavesNothing(t *testing.T) {
	s := openTestStore(t)
	fakeMmdebstrap(t, `echo partial > "$out"; echo "E: mirror unreachable" >&2; exit 1`)
	var progress bytes.Buffer
	err := s.Build(context.Background(), []string{"bash"}, false, &progress)
	if err == nil || !strings.Contains(err.Error(), "build image trixie: mmdebstrap") {
		t.Errorf("Build = %v", err)
	}
	if !strings.Contains(progress.String(), "E: mirror unreachable") {
		t.Errorf("mmdebstrap's stderr not passed through:\n%s", progress.String())
	}
	onlyLock(t, s)
	if len(s.Installed()) != 0 {
		t.Error("failed build installed something")
	}
}

func TestBuildCancelStopsMmdebstrap(t *testing.T) {
	s := openTestStore(t)
	fakeMmdebstrap(t, `exec sleep 30`)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := s.Build(ctx, []string{"trixie"}, false, nil)
	if err == nil || !strings.Contains(err.Error(), "context deadline exceeded") {
		t.Errorf("Build = %v, want the context's error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("cancel took %v", d)
	}
	onlyLock(t, s)
}
